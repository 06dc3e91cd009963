//! Helpers for the tests of runs on a slowed or hung S3-compatible store (see [`super::proxy`]):
//! the storage lock and heartbeat settings they use, the lease as the store has it, and a
//! table snapshot with run-specific names normalized.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::fixtures::{Fixture, Kind, TF};
use super::normalize::Normalization;
use super::s3::{endpoint, options, s3_store, unique, BUCKET};
use super::{bin, stderr};
use hudi_keeper_core::protocol::lock::storage_lock::{LockData, DEFAULT_PATH};

/// The storage lock as the tests configure it (a lease renewed well within its validity), and
/// the writers' heartbeats as [`HEARTBEATS`] says.
pub const LOCK_FLAGS: [&str; 12] = [
    "--lock",
    "storage",
    "--lock-storage-validity",
    "20s",
    "--lock-storage-renew-interval",
    "2s",
    "--heartbeat-interval",
    "1s",
    "--heartbeat-tolerable-misses",
    "2",
    "--clock-skew-margin",
    "500ms",
];

/// `--storage-option` flags for the store at `endpoint` (the server, or a proxy of it).
pub fn store_flags(endpoint: &str) -> Vec<String> {
    options()
        .0
        .iter()
        .flat_map(|(k, v)| {
            let v = if k == "aws_endpoint" {
                endpoint.to_string()
            } else {
                v.clone()
            };
            ["--storage-option".to_string(), format!("{k}={v}")]
        })
        .collect()
}

pub fn daemon_store_toml(endpoint: &str) -> String {
    format!(
        "[defaults.storage_options]\naws_endpoint = \"{endpoint}\"\naws_allow_http = \"true\"\naws_region = \"us-east-1\"\naws_access_key_id = \"test\"\naws_secret_access_key = \"test\"\n"
    )
}

/// The table's lease as the store has it now (read past the proxy).
pub fn lease(rt: &tokio::runtime::Runtime, root: &str) -> Option<LockData> {
    let storage = hudi_keeper_core::storage::Storage::from_store(s3_store(), root, "s3://lock");
    let bytes = rt
        .block_on(storage.get_opt(&super::fixtures::rel(DEFAULT_PATH)))
        .expect("read the lock file")?;
    Some(LockData::parse(&bytes).expect("a Hudi lock file"))
}

pub fn held(rt: &tokio::runtime::Runtime, root: &str) -> bool {
    lease(rt, root).is_some_and(|l| !l.expired)
}

pub fn keys(rt: &tokio::runtime::Runtime, f: &Fixture) -> Vec<String> {
    rt.block_on(
        f.storage()
            .list(&hudi_keeper_core::storage::RelPath::root()),
    )
    .expect("list the table")
    .into_iter()
    .map(|m| m.path.to_string())
    .collect()
}

/// Poll `f` until it holds (`true`) or `bound` passes (`false`).
pub fn within(bound: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > bound {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Every object of the table with run-specific names and bytes replaced: rollback and restore
/// instants, new instants and completion times, Avro files (random sync markers), command
/// blocks. The lock file is left out (its owner and validity differ run to run): the
/// [`Normalization::RUNS`] preset of [`crate::normalize::normalize`].
pub fn normalize(snapshot: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    crate::normalize::normalize(snapshot, Normalization::RUNS)
}

/// The daemon's view of the writers' heartbeats in these tests: expired after 2.5 s. Two misses
/// (Hudi's default) leave a rollback's own heartbeat claim room (1.5 s) for a store slowed
/// down by a proxy.
pub const HEARTBEATS: &str =
    "heartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\n";

/// Give the failed write a heartbeat file, then let it expire under [`HEARTBEATS`] (2.5 s):
/// the write is failed by its expired heartbeat.
pub fn with_expired_heartbeat(rt: &tokio::runtime::Runtime, f: &Fixture) {
    let path = hudi_keeper_core::protocol::heartbeat::heartbeat_path(TF).unwrap();
    rt.block_on(f.storage().put(&path, bytes::Bytes::new()))
        .expect("write the heartbeat");
    std::thread::sleep(Duration::from_secs(3));
}

pub fn s3_fixture(
    rt: &tokio::runtime::Runtime,
    name: &str,
    kind: Kind,
    mdt: bool,
) -> (Fixture, String) {
    let root = unique(name);
    let uri = format!("s3://{BUCKET}/{root}");
    let f = rt.block_on(Fixture::build_in(s3_store(), &root, &uri, kind, mdt));
    (f, root)
}

/// `hudi-keeper rollback` of the fixture's failed write, straight to the server.
pub fn rollback_cli(uri: &str, extra: &[&str]) -> std::process::Output {
    bin()
        .args(["rollback", uri, "--yes"])
        .args(extra)
        .args(LOCK_FLAGS)
        .args(store_flags(&endpoint()))
        .output()
        .expect("run hudi-keeper")
}

/// What an uninterrupted rollback of the fixture leaves.
pub fn rolled_back_reference(rt: &tokio::runtime::Runtime) -> BTreeMap<String, Vec<u8>> {
    let (f, _) = s3_fixture(rt, "cut-ref", Kind::MorV9, true);
    with_expired_heartbeat(rt, &f);
    let out = rollback_cli(&f.uri, &["--instant", TF]);
    assert!(out.status.success(), "{}", stderr(&out));
    normalize(&rt.block_on(f.snapshot()))
}

/// The rollback is in its second lock window (finishing: the metadata table's rollback, the
/// completed rollback): it scheduled the rollback and started deleting, and holds the lock.
pub fn finishing(rt: &tokio::runtime::Runtime, f: &Fixture, root: &str) -> bool {
    keys(rt, f)
        .iter()
        .any(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".rollback.inflight"))
        && held(rt, root)
}
