//! The chaos soak (issue #15): real Hudi writers commit in a loop under the ZooKeeper lock with
//! the LAZY policy — two Hudi 1.1 writers on a merge-on-read table with a metadata table (table
//! version 9), one Hudi 0.15 writer on a copy-on-write table with one — while the real
//! `hudi-keeper serve` binary, as deployed, watches both tables. Writers are SIGKILLed at random
//! points; the daemon is SIGKILLed at random points and right after it scheduled a rollback, and
//! started again.
//!
//! At the end: every commit a writer saw succeed is intact; no write is left pending, and every
//! failed write was rolled back exactly once (no instant is the target of two completed
//! rollbacks, and no completed commit is the target of one); no lock is left held; Hudi's
//! validator passes on both tables with every committed record; the last daemon's metrics agree
//! with its log.
//!
//! Two variants: on the local file system, and on the S3-compatible server (moto), where the
//! writers commit through Hadoop's S3A (`s3a://`) straight to the server while the daemon reads and
//! writes the tables (`s3://`) through a proxy that injects faults at random: throttling answers
//! (503 SlowDown), dropped connections, and answers lost after the server acted.
//!
//! `HUDI_KEEPER_SOAK_SECONDS` sets the chaos phase (default 60: the CI run); `scripts/soak` runs it
//! longer, one variant after the other, and keeps each one's JSON report (`HUDI_KEEPER_SOAK_REPORT`).
//! `HUDI_KEEPER_SOAK_SEED` replays a run's random choices (the report names the seed).
//! `HUDI_KEEPER_SOAK_VERSIONS` (e.g. `1.1,1.2`; default `1.1`) lists the Hudi version keys of the
//! version-9 table's writers: the first makes the table and validates it, and writer JVMs take the
//! keys in turn, so Hudi 1.1 and 1.2 writers share the table (`scripts/soak --versions`).
//! The S3 variant runs only with `HUDI_KEEPER_SOAK_S3=1` (scripts/soak sets it; it takes longer
//! than CI can spare). Needs `HUDI_KEEPER_INTEROP=1` and ZooKeeper (`HUDI_KEEPER_ZK`), as the
//! other real-Hudi suites, and for S3 the server (`HUDI_KEEPER_S3_ENDPOINT`).

use hudi_keeper_test_support as common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::interop::{enabled, must, tables_root, workspace};
use common::proxy::{Faults, Injected, SlowProxy};
use hudi_keeper_core::format::rollback::RollbackMetadata;
use hudi_keeper_core::protocol::lock::storage_lock::DEFAULT_PATH as STORAGE_LOCK_PATH;
use hudi_keeper_core::protocol::lock::{
    acquire, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig,
};
use hudi_keeper_core::storage::{RelPath, StorageOptions};
use hudi_keeper_core::timeline::{Action, State};
use hudi_keeper_core::Table;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[path = "interop_soak/writers.rs"]
mod writers;
use writers::{read_writer_log, soak_versions, WriterLog};

/// One table of the soak and its writers.
struct SoakTable {
    /// The daemon's name for it.
    name: &'static str,
    /// The harness's Hudi version key: it makes the table and validates it.
    version: String,
    /// The version keys of its writer JVMs, taken in turn (the first is `version`).
    writer_versions: Vec<String>,
    /// The scenario `run.sh generate` makes it from (completed commits and one failed write).
    scenario: &'static str,
    /// Writers at once.
    writers: usize,
    /// The harness's base path: a local folder, or `s3a://bucket/key`.
    base: String,
    /// hudi-keeper's table URI: the folder, or `s3://bucket/key`.
    uri: String,
    /// The S3-compatible server the writers use (S3A), for the S3 variant.
    s3_endpoint: Option<String>,
    /// The ZooKeeper lock key of its writers and of hudi-keeper.
    zk_key: String,
    /// Its writers and hudi-keeper share Hudi 1.1's storage-based lock (the lease file under
    /// `.hoodie/.locks/`, through the harness's S3 client for Hudi's provider) instead of
    /// ZooKeeper: the Hudi 1.1 table of the S3 variant. (Hudi 0.15 has no such provider.)
    storage_lock: bool,
}

/// The storage-based lock's lease: Hudi requires a validity of at least 10 s and 10 renewals.
const LEASE_VALIDITY_S: u64 = 10;
const LEASE_RENEW_S: u64 = 1;

/// Where the soak's tables live.
enum Store {
    /// Folders of the local file system.
    Local,
    /// The S3-compatible server, under one key prefix; the daemon reaches it through `proxy`.
    S3 { prefix: String, proxy: SlowProxy },
}

impl Store {
    fn label(&self) -> &'static str {
        match self {
            Store::Local => "local file system",
            Store::S3 { .. } => "S3-compatible server (moto), the daemon through a fault proxy",
        }
    }

    /// The storage options of this test's own reads (straight to the store, no faults).
    fn options(&self) -> StorageOptions {
        match self {
            Store::Local => StorageOptions::default(),
            Store::S3 { .. } => common::s3::options(),
        }
    }

    /// The daemon's `[defaults.storage_options]`: the proxy's endpoint.
    fn daemon_toml(&self) -> String {
        match self {
            Store::Local => String::new(),
            Store::S3 { proxy, .. } => common::runs::daemon_store_toml(&proxy.endpoint()),
        }
    }

    fn injected(&self) -> Injected {
        match self {
            Store::Local => Injected::default(),
            Store::S3 { proxy, .. } => proxy.injected(),
        }
    }
}

/// Name, Hudi version key (the version-9 table's writers: [`writers::soak_versions`]), scenario,
/// writers at once.
const TABLES: [(&str, &str, &str, usize); 2] = [
    ("mor-v9", "1.1", "mor-mdt-direct", 2),
    ("cow015", "0.15", "cow-mdt-direct", 1),
];

/// Commits per writer JVM: a writer that finishes is replaced by a new one (new keys).
const COMMITS_PER_WRITER: usize = 4;
const ZK_BASE: &str = "/hudi-soak";

fn soak_seconds() -> u64 {
    std::env::var("HUDI_KEEPER_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
}

fn zk() -> String {
    std::env::var("HUDI_KEEPER_ZK").expect(
        "HUDI_KEEPER_ZK is not set: run the tests through scripts/test, which starts ZooKeeper",
    )
}

fn run_sh(t: &SoakTable) -> Command {
    let mut c = Command::new("bash");
    let lock = match (&t.s3_endpoint, t.storage_lock) {
        (Some(e), true) => format!("storage,{e},{LEASE_VALIDITY_S},{LEASE_RENEW_S}"),
        _ => format!("zookeeper,{},{ZK_BASE},{}", zk(), t.zk_key),
    };
    c.arg(workspace().join("tests/interop/run.sh"))
        .env("INTEROP_LOCK", lock);
    if let Some(e) = &t.s3_endpoint {
        c.env("INTEROP_S3_ENDPOINT", e).env(
            "INTEROP_EXTRA_PROPS",
            format!("hoodie.client.heartbeat.interval_in_ms={S3_HEARTBEAT_MS}"),
        );
    }
    c
}

/// A writer JVM (`run.sh writer` replaces its shell with the JVM: the child is the JVM).
struct Writer {
    table: usize,
    child: Child,
    stdout: PathBuf,
}

/// The writers' heartbeat interval on S3 (1 s locally, the harness's). A heartbeat through S3A is
/// a few requests to the server; on a loaded machine one came 3.1 s after the last, and a Hudi
/// writer that misses its own heartbeat (interval × 2 tolerable misses) stops heartbeating for
/// good while its write goes on: a zombie whose files outlive any rollback planned meanwhile
/// (Hudi's own rollback alike). See the interop README, "Tables on S3".
const S3_HEARTBEAT_MS: u64 = 3000;

/// The daemon's configuration: every table under the writers' ZooKeeper lock, their heartbeat
/// interval. On S3 the skew margin is a second larger: the server gives modification times in
/// whole seconds.
/// The daemon's settings. `min_instant_age` is far longer than the run: a pending rollback
/// someone else may be running waits that long, so every rollback the daemon was killed in must
/// be resumed as its own (`state_dir/own-changes/`) for the tables to end clean. (The writers are
/// LAZY: their failed writes are judged by expired heartbeats, which no minimum age delays.)
fn daemon_config(state: &Path, tables: &[SoakTable], store: &Store) -> String {
    let (heartbeat, margin) = match store {
        Store::Local => ("1s".to_string(), "500ms"),
        Store::S3 { .. } => (format!("{S3_HEARTBEAT_MS}ms"), "1500ms"),
    };
    let mut c = format!(
        "[server]\nstate_dir = \"{}\"\nshutdown_grace = \"5s\"\n[defaults]\npoll_interval = \"1s\"\nfailed_writes_policy = \"lazy\"\nheartbeat_interval = \"{heartbeat}\"\nheartbeat_tolerable_misses = 2\nmin_instant_age = \"10m\"\nclock_skew_margin = \"{margin}\"\nassume_lazy_writers = true\n{}",
        state.display(),
        store.daemon_toml()
    );
    for t in tables {
        if t.storage_lock {
            c.push_str(&format!(
                "[[tables]]\nname = \"{}\"\nuri = \"{}\"\n[tables.lock]\nprovider = \"storage\"\ntimeout = \"120s\"\nstorage_validity = \"{LEASE_VALIDITY_S}s\"\nstorage_renew_interval = \"{LEASE_RENEW_S}s\"\n",
                t.name, t.uri
            ));
            continue;
        }
        c.push_str(&format!(
            "[[tables]]\nname = \"{}\"\nuri = \"{}\"\n[tables.lock]\nprovider = \"zookeeper\"\ntimeout = \"120s\"\nzookeeper_url = \"{}\"\nzookeeper_base_path = \"{ZK_BASE}\"\nzookeeper_lock_key = \"{}\"\nzookeeper_session_timeout = \"10s\"\nzookeeper_connection_timeout = \"5s\"\n",
            t.name,
            t.uri,
            zk(),
            t.zk_key
        ));
    }
    c
}

/// Counters of the run, reported at the end.
#[derive(Default, serde::Serialize)]
struct Report {
    seed: u64,
    chaos_seconds: u64,
    total_seconds: u64,
    store: &'static str,
    /// Faults the proxy injected between the daemon and the store, by kind (S3 only).
    faults_injected: Injected,
    /// Requests the daemons sent through the proxy (S3 only).
    proxied_requests: usize,
    writer_jvms: usize,
    writer_kills: usize,
    daemon_kills_random: usize,
    daemon_kills_after_scheduling: usize,
    daemon_kills_with_a_rollback_pending: usize,
    daemon_starts: usize,
    commits_seen_by_writers: usize,
    commits_completed: usize,
    writer_reported_failures: usize,
    rollbacks_completed: usize,
    rollbacks_logged_by_daemons: usize,
    lost_commits: usize,
    rolled_back_twice: usize,
    committed_rolled_back: usize,
    tables: BTreeMap<String, serde_json::Value>,
}

/// The last daemon started, with the logs of every earlier one.
struct Daemons {
    work: PathBuf,
    config: String,
    current: Option<Daemon>,
    earlier_logs: Vec<String>,
}

impl Daemons {
    fn start(&mut self, report: &mut Report) {
        let d = Daemon::start_with(&self.work, &self.config, |c| {
            c.env("RUST_LOG", "info,hudi_keeper_core=info");
        });
        report.daemon_starts += 1;
        self.current = Some(d);
    }

    /// SIGKILL the running daemon; its log is kept.
    fn kill(&mut self) {
        if let Some(mut d) = self.current.take() {
            let _ = d.child.kill();
            let _ = d.child.wait();
            // The reader thread drains what the process wrote before it died.
            std::thread::sleep(Duration::from_millis(100));
            self.earlier_logs.push(d.logs());
        }
    }

    fn logs(&self) -> String {
        let mut all = self.earlier_logs.join("\n");
        if let Some(d) = &self.current {
            all.push('\n');
            all.push_str(&d.logs());
        }
        all
    }
}

fn count(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

fn has_pending_rollback(rt: &tokio::runtime::Runtime, t: &SoakTable, store: &Store) -> bool {
    let Ok(table) = rt.block_on(Table::open(&t.uri, &store.options())) else {
        return false;
    };
    rt.block_on(table.timeline())
        .map(|tl| tl.pending().any(|i| i.action == Action::Rollback))
        .unwrap_or(false)
}

/// The table's instants: completed writes, pending instants, and the targets of its completed
/// rollbacks (one entry per rollback).
struct Final {
    completed_writes: BTreeSet<String>,
    pending: Vec<String>,
    rollback_targets: Vec<String>,
}

fn final_state(rt: &tokio::runtime::Runtime, t: &SoakTable, store: &Store) -> Final {
    rt.block_on(async {
        let table = Table::open(&t.uri, &store.options())
            .await
            .expect("open the table");
        let tl = table.timeline().await.expect("the timeline");
        let mut rollback_targets = Vec::new();
        for i in tl.completed().filter(|i| i.action == Action::Rollback) {
            let f = i.file(State::Completed).expect("a completed file");
            let bytes = table
                .storage()
                .get(&f.path)
                .await
                .expect("read the rollback");
            let meta = RollbackMetadata::from_avro(&bytes).expect("rollback metadata");
            rollback_targets.extend(meta.commits_rollback);
        }
        Final {
            completed_writes: tl
                .completed()
                .filter(|i| matches!(i.action, Action::Commit | Action::DeltaCommit))
                .map(|i| i.requested_time.clone())
                .collect(),
            pending: tl
                .pending()
                .map(|i| format!("{}.{}", i.requested_time, i.action))
                .collect(),
            rollback_targets,
        }
    })
}

#[test]
fn writers_and_the_daemon_killed_at_random_lose_no_commit_and_leave_no_failed_write() {
    if !enabled() {
        return;
    }
    soak(Store::Local);
}

/// The same soak on the S3-compatible server, the daemon's requests through a proxy that throttles
/// (2%), drops connections (1%) and loses answers after the server acted (1%), with up to 50 ms of
/// jitter. Only with `HUDI_KEEPER_SOAK_S3=1` (scripts/soak).
#[test]
fn on_s3_with_store_faults_writers_and_the_daemon_killed_at_random_lose_no_commit_and_leave_no_failed_write(
) {
    if !enabled() {
        return;
    }
    if std::env::var("HUDI_KEEPER_SOAK_S3").as_deref() != Ok("1") {
        eprintln!("the S3 soak runs with HUDI_KEEPER_SOAK_S3=1 (scripts/soak)");
        return;
    }
    // The proxy outlives the chaos phase, the writers' drain and the settling (bounded below).
    let lifetime = Duration::from_secs(soak_seconds() + 1800);
    let proxy = SlowProxy::start_for(&common::s3::endpoint(), Duration::ZERO, lifetime);
    soak(Store::S3 {
        prefix: common::s3::unique("soak"),
        proxy,
    });
}

/// The faults of the S3 variant: the daemon still makes progress through them.
const FAULTS: Faults = Faults {
    throttle_per_mille: 20,
    drop_per_mille: 10,
    lose_answer_per_mille: 10,
    max_jitter_ms: 50,
};

/// One soak at a time in this process: each runs five JVMs and a daemon on a small machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn soak(store: Store) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let seed = std::env::var("HUDI_KEEPER_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(1)
        });
    let mut rng = StdRng::seed_from_u64(seed);
    let chaos = Duration::from_secs(soak_seconds());
    let mut report = Report {
        seed,
        chaos_seconds: chaos.as_secs(),
        store: store.label(),
        ..Default::default()
    };
    let started = Instant::now();
    let variant = match store {
        Store::Local => "soak",
        Store::S3 { .. } => "soak-s3",
    };
    // Local: the tables and every log here; S3: the logs and the daemon's state only.
    let root = tables_root().join(format!("{variant}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).expect("logs dir");
    let tables: Vec<SoakTable> = TABLES
        .iter()
        .map(|(name, version, scenario, writers)| {
            let writer_versions = if *version == "1.1" {
                soak_versions()
            } else {
                vec![version.to_string()]
            };
            let (base, uri, s3_endpoint) = match &store {
                Store::Local => {
                    let dir = root.join(name).to_str().expect("utf-8").to_string();
                    (dir.clone(), dir, None)
                }
                Store::S3 { prefix, .. } => (
                    format!("s3a://{}/{prefix}/{name}", common::s3::BUCKET),
                    format!("s3://{}/{prefix}/{name}", common::s3::BUCKET),
                    Some(common::s3::endpoint()),
                ),
            };
            SoakTable {
                name,
                version: writer_versions[0].clone(),
                // Hudi 1.1 and 1.2 have the storage-based lock; 0.15 has none.
                storage_lock: s3_endpoint.is_some() && *version == "1.1",
                writer_versions,
                scenario,
                writers: *writers,
                base,
                uri,
                s3_endpoint,
                zk_key: format!("{variant}-{name}-{}", std::process::id()),
            }
        })
        .collect();

    // The tables, made by real Hudi under the same lock: completed commits and a failed write.
    for t in &tables {
        must(
            run_sh(t)
                .args(["generate", &t.version, t.scenario, &t.base])
                .env("INTEROP_LOGS", logs.join(format!("{}-generate", t.name)))
                .output()
                .expect("run.sh generate"),
            "generate",
        );
    }

    let mut daemons = Daemons {
        work: root.join("daemon"),
        config: daemon_config(&root.join("daemon/state"), &tables, &store),
        current: None,
        earlier_logs: Vec::new(),
    };
    if let Store::S3 { proxy, .. } = &store {
        proxy.set_faults(Some(FAULTS), seed);
    }
    daemons.start(&mut report);

    let mut next_id = 1usize;
    let mut spawned = vec![0usize; tables.len()];
    let mut spawn = |t: usize, report: &mut Report| -> Writer {
        let id = next_id;
        next_id += 1;
        let versions = &tables[t].writer_versions;
        let version = &versions[spawned[t] % versions.len()];
        spawned[t] += 1;
        let stdout = logs.join(format!("{}-writer{id}.stdout", tables[t].name));
        let stderr = logs.join(format!("{}-writer{id}.stderr", tables[t].name));
        let child = run_sh(&tables[t])
            .args([
                "writer",
                version,
                &tables[t].base,
                &id.to_string(),
                &COMMITS_PER_WRITER.to_string(),
            ])
            .stdout(std::fs::File::create(&stdout).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn a writer");
        report.writer_jvms += 1;
        Writer {
            table: t,
            child,
            stdout,
        }
    };
    let mut writers: Vec<Writer> = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        for _ in 0..t.writers {
            writers.push(spawn(i, &mut report));
        }
    }
    let mut finished: Vec<Writer> = Vec::new();

    // The chaos phase.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut next_writer_kill = Instant::now() + Duration::from_secs(rng.random_range(6..15));
    let mut next_daemon_kill = Instant::now() + Duration::from_secs(rng.random_range(10..25));
    let mut scheduled_seen = 0usize;
    let chaos_end = Instant::now() + chaos;
    while Instant::now() < chaos_end {
        std::thread::sleep(Duration::from_millis(20));
        // Writers that ended (their commits done, or killed) are replaced.
        let mut i = 0;
        while i < writers.len() {
            if matches!(writers[i].child.try_wait(), Ok(Some(_))) {
                let w = writers.swap_remove(i);
                let t = w.table;
                finished.push(w);
                writers.push(spawn(t, &mut report));
            } else {
                i += 1;
            }
        }
        if Instant::now() >= next_writer_kill && !writers.is_empty() {
            let i = rng.random_range(0..writers.len());
            let _ = writers[i].child.kill();
            report.writer_kills += 1;
            next_writer_kill = Instant::now() + Duration::from_secs(rng.random_range(6..15));
        }
        match &daemons.current {
            Some(d) => {
                let scheduled = count(&d.logs(), "scheduled rollback");
                // The first rollback a run schedules is always cut short (every run kills the
                // daemon mid-change at least once), later ones half the time.
                let first = report.daemon_kills_after_scheduling == 0;
                let after_scheduling =
                    scheduled > scheduled_seen && (first || rng.random_bool(0.5));
                scheduled_seen = scheduled;
                if after_scheduling || Instant::now() >= next_daemon_kill {
                    daemons.kill();
                    if after_scheduling {
                        report.daemon_kills_after_scheduling += 1;
                    } else {
                        report.daemon_kills_random += 1;
                    }
                    if tables.iter().any(|t| has_pending_rollback(&rt, t, &store)) {
                        report.daemon_kills_with_a_rollback_pending += 1;
                    }
                    std::thread::sleep(Duration::from_millis(rng.random_range(200..3000)));
                    daemons.start(&mut report);
                    scheduled_seen = 0;
                    next_daemon_kill =
                        Instant::now() + Duration::from_secs(rng.random_range(10..25));
                }
            }
            None => daemons.start(&mut report),
        }
    }

    // The writers at work finish their runs (no more kills, no replacements).
    let drain = Instant::now();
    for w in &mut writers {
        loop {
            if let Ok(Some(_)) = w.child.try_wait() {
                break;
            }
            assert!(
                drain.elapsed() < Duration::from_secs(600),
                "the writers did not finish within 10 minutes of the chaos phase"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    finished.append(&mut writers);

    // The daemon cleans up what failed last: nothing pending on either table.
    let settle = Instant::now();
    loop {
        let pending: Vec<(String, Vec<String>)> = tables
            .iter()
            .map(|t| (t.name.to_string(), final_state(&rt, t, &store).pending))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if pending.is_empty() {
            break;
        }
        assert!(
            settle.elapsed() < Duration::from_secs(180),
            "instants still pending 3 minutes after the writers stopped: {pending:?}\n{}",
            daemons.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // The last daemon's metrics agree with its log.
    let last = daemons.current.as_ref().expect("a daemon runs");
    let last_log = last.logs();
    for t in &tables {
        let series = format!(
            "hudi_keeper_rollbacks_total{{outcome=\"success\",table=\"{}\",trigger=\"auto\"}}",
            t.name
        );
        let metric = last.metric(&series).unwrap_or(0.0) as usize;
        let logged = last_log
            .lines()
            .filter(|l| l.contains("rolled back a failed write") && l.contains(t.name))
            .count();
        assert_eq!(
            metric, logged,
            "{}: the last daemon counts {metric} rollbacks, its log {logged}\n{last_log}",
            t.name
        );
        let failed = last
            .metric(&format!(
                "hudi_keeper_failed_instants{{table=\"{}\"}}",
                t.name
            ))
            .unwrap_or(0.0);
        assert_eq!(
            failed, 0.0,
            "{}: failed instants reported at the end",
            t.name
        );
    }
    let all_logs = daemons.logs();
    report.rollbacks_logged_by_daemons = count(&all_logs, "rolled back a failed write");
    report.faults_injected = store.injected();
    if let Store::S3 { proxy, .. } = &store {
        report.proxied_requests = proxy.requests();
    }
    daemons
        .current
        .take()
        .expect("a daemon runs")
        .terminate(Duration::from_secs(60));
    std::fs::write(logs.join("daemons.log"), &all_logs).expect("keep the daemon logs");

    // No lock is left held: hudi-keeper takes and releases each table's lock at once.
    for t in &tables {
        let provider = if t.storage_lock {
            LockProvider::Storage(StorageLockConfig {
                path: RelPath::parse(STORAGE_LOCK_PATH).expect("the lock file's path"),
                validity: Duration::from_secs(LEASE_VALIDITY_S),
                renew_interval: Duration::from_secs(LEASE_RENEW_S),
            })
        } else {
            LockProvider::ZooKeeper(ZkLockConfig {
                connect: zk(),
                base_path: ZK_BASE.into(),
                lock_key: t.zk_key.clone(),
                session_timeout: Duration::from_secs(10),
                connection_timeout: Duration::from_secs(5),
                tls: None,
                sasl: None,
            })
        };
        let lock = LockOptions {
            provider,
            timeout: Duration::from_secs(1),
            retry_interval: Duration::from_millis(100),
        };
        rt.block_on(async {
            let table = Table::open(&t.uri, &store.options())
                .await
                .expect("open the table");
            let guard = acquire(table.storage(), &lock)
                .await
                .unwrap_or_else(|e| panic!("{}: the lock is held at the end: {e}", t.name));
            guard.release().await.expect("release");
        });
    }

    // Every commit a writer saw succeed is intact; every failed write was rolled back once.
    for (i, t) in tables.iter().enumerate() {
        let mut log = WriterLog::default();
        for w in finished.iter().filter(|w| w.table == i) {
            read_writer_log(&w.stdout, &mut log);
        }
        let f = final_state(&rt, t, &store);
        let lost: Vec<&String> = log.committed.difference(&f.completed_writes).collect();
        let mut targets: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &f.rollback_targets {
            *targets.entry(r).or_default() += 1;
        }
        let twice: Vec<_> = targets.iter().filter(|(_, n)| **n > 1).collect();
        let committed_rolled_back: Vec<_> = targets
            .keys()
            .filter(|r| f.completed_writes.contains(**r))
            .collect();
        report.lost_commits += lost.len();
        report.rolled_back_twice += twice.len();
        report.committed_rolled_back += committed_rolled_back.len();
        report.commits_seen_by_writers += log.committed.len();
        report.commits_completed += f.completed_writes.len();
        report.writer_reported_failures += log.failed;
        report.rollbacks_completed += f.rollback_targets.len();
        assert!(lost.is_empty(), "{}: commits lost: {lost:?}", t.name);
        assert!(twice.is_empty(), "{}: rolled back twice: {twice:?}", t.name);
        assert!(
            committed_rolled_back.is_empty(),
            "{}: completed commits rolled back: {committed_rolled_back:?}",
            t.name
        );

        // Hudi's validator, expecting the generated records and those of every completed write.
        let generated = rt.block_on(async {
            let table = Table::open(&t.uri, &store.options())
                .await
                .expect("open the table");
            let path = RelPath::parse("expected-records.json").expect("a relative path");
            table.storage().get(&path).await.expect("expected records")
        });
        let mut expected: serde_json::Value =
            serde_json::from_slice(&generated).expect("expected JSON");
        for c in &f.completed_writes {
            if let Some(records) = log.announced.get(c) {
                for (k, v) in records.as_object().expect("records") {
                    expected["records"][k] = v.clone();
                }
            }
        }
        let expected_path = logs.join(format!("{}-expected.json", t.name));
        std::fs::write(
            &expected_path,
            serde_json::to_vec_pretty(&expected).expect("json"),
        )
        .expect("write expected");
        // The validator works on a local copy of an S3 table, where Hudi's storage-based lock
        // has no client (file://): its follow-up commits lock through ZooKeeper.
        let out = run_sh(t)
            .env(
                "INTEROP_LOCK",
                format!("zookeeper,{},{ZK_BASE},{}-verify", zk(), t.zk_key),
            )
            .args([
                "verify",
                &t.version,
                &t.base,
                "--expect",
                expected_path.to_str().expect("utf-8"),
            ])
            .output()
            .expect("run.sh verify");
        let verdict = must(out, "Hudi's validator");
        let v: serde_json::Value = serde_json::from_str(&verdict).expect("validator report");
        assert_eq!(v["ok"], true, "{}: {verdict}", t.name);
        report.tables.insert(
            t.name.to_string(),
            serde_json::json!({
                "hudi": t.version,
                "writer_versions": t.writer_versions,
                "scenario": t.scenario,
                "commits_seen_by_writers": log.committed.len(),
                "commits_completed": f.completed_writes.len(),
                "rollbacks_completed": f.rollback_targets.len(),
                "validator": "passed",
            }),
        );
    }
    report.total_seconds = started.elapsed().as_secs();
    let json = serde_json::to_string_pretty(&report).expect("report JSON");
    eprintln!("SOAK {json}");
    if let Ok(path) = std::env::var("HUDI_KEEPER_SOAK_REPORT") {
        std::fs::write(path, &json).expect("write the report");
    }
    assert!(report.writer_kills > 0, "no writer was killed: {json}");
    assert!(
        report.daemon_kills_after_scheduling > 0 && report.rollbacks_logged_by_daemons > 0,
        "the daemon was never killed after scheduling a rollback, or rolled nothing back: {json}"
    );
    if let Store::S3 { prefix, .. } = &store {
        assert!(
            report.faults_injected.total() > 0,
            "no store faults: {json}"
        );
        rt.block_on(delete_prefix(prefix));
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Every object under `prefix` of the test bucket, deleted (the S3 variant's tables).
async fn delete_prefix(prefix: &str) {
    use futures::{StreamExt, TryStreamExt};
    let store = common::s3::s3_store();
    let prefix = object_store::path::Path::from(prefix);
    let keys: Vec<object_store::path::Path> = store
        .list(Some(&prefix))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .expect("list the soak's tables");
    let locations = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
    let deleted: Vec<_> = store.delete_stream(locations).collect().await;
    for d in deleted {
        d.expect("delete the soak's tables");
    }
}
