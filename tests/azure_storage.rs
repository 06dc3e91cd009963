//! Against Azure Blob Storage's emulator on loopback (Azurite, started by `scripts/test`
//! through `scripts/azurite-server`): conditional writes, inspect, rollback, savepoint and
//! restore through the binary, on both URI forms users give (`az://container/path`, object_store's,
//! and `abfss://container@account.dfs.core.windows.net/path`, Hudi's), and the daemon polling an
//! Azure table with the storage-based lock kept on Azure.

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::azure::{abfss_uri, az_uri, azure_store, cli_options, options, options_toml};
use common::daemon::Daemon;
use common::fixtures::{Fixture, Kind, T1, T2, TF};
use common::s3::unique;
use common::{run, stderr, stdout};
use hudi_keeper_core::storage::{RelPath, Storage, StorageError};

/// `hudi-keeper <args> --storage-option …` for the emulator's account.
fn run_az(args: &[&str]) -> std::process::Output {
    let opts = cli_options();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(opts.iter().map(String::as_str));
    run(&all)
}

/// `rollback <uri> --instant <instant>` of a lazy writer's write, at once, under the storage
/// lock, plus `extra`.
fn rollback_az(uri: &str, instant: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "rollback",
        uri,
        "--instant",
        instant,
        "--assume-lazy-writers",
        "--min-instant-age",
        "0s",
        "--clock-skew-margin",
        "0s",
        "--lock",
        "storage",
        "--yes",
    ];
    args.extend_from_slice(extra);
    run_az(&args)
}

/// The keys of the table's data files (outside `.hoodie/`).
async fn data_files(f: &Fixture) -> Vec<String> {
    f.snapshot()
        .await
        .into_keys()
        .filter(|k| !k.starts_with(".hoodie"))
        .collect()
}

#[tokio::test]
async fn azure_honours_create_if_absent_and_refuses_a_stale_if_match() {
    let root = unique("cond");
    let s = Storage::open(&az_uri(&root), &options()).unwrap();
    let p = RelPath::parse(".hoodie/.locks/table_lock.json").unwrap();
    let first = s
        .create_versioned(&p, bytes::Bytes::from_static(b"first"))
        .await
        .unwrap();
    let again = s
        .put_if_absent(&p, bytes::Bytes::from_static(b"again"))
        .await
        .unwrap_err();
    assert!(
        matches!(again, StorageError::AlreadyExists { .. }),
        "{again}"
    );
    s.put_if_match(&p, bytes::Bytes::from_static(b"second"), &first)
        .await
        .unwrap();
    let stale = s
        .put_if_match(&p, bytes::Bytes::from_static(b"stale"), &first)
        .await
        .unwrap_err();
    assert!(matches!(stale, StorageError::Conflict { .. }), "{stale}");
    assert_eq!(
        s.get(&p).await.unwrap(),
        bytes::Bytes::from_static(b"second")
    );
}

#[test]
fn inspect_reads_a_table_by_its_az_and_its_abfss_uri() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("insp");
    rt.block_on(Fixture::build_in(
        azure_store(),
        &root,
        &az_uri(&root),
        Kind::CowV8,
        false,
    ));
    for uri in [az_uri(&root), abfss_uri(&root)] {
        let out = run_az(&["inspect", &uri, "--json"]);
        assert!(out.status.success(), "{uri}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["table"]["version"], 8, "{uri}");
        assert_eq!(v["instants"].as_array().unwrap().len(), 3, "{uri}");
        assert_eq!(v["pending"][0]["requested_time"], TF, "{uri}");
    }
}

/// A merge-on-read table with a metadata table, opened by its `abfss://` URI, rolled back by the
/// binary under the storage-based lock (kept on Azure by conditional writes).
#[test]
fn a_rollback_by_abfss_uri_under_the_storage_lock_deletes_the_failed_files_and_completes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("rb");
    let uri = abfss_uri(&root);
    let f = rt.block_on(Fixture::build_in(
        azure_store(),
        &root,
        &uri,
        Kind::MorV9,
        true,
    ));
    assert!(rt.block_on(data_files(&f)).iter().any(|k| k.contains(TF)));
    let out = rollback_az(&uri, TF, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let after = rt.block_on(f.snapshot());
    assert!(
        !after
            .keys()
            .any(|k| !k.starts_with(".hoodie") && k.contains(TF)),
        "{:?}",
        after.keys()
    );
    // The rollback completed, on the table and on its metadata table (the same instant).
    let completed = |dir: &str| -> Vec<String> {
        after
            .keys()
            .filter_map(|k| k.strip_prefix(dir))
            .filter(|n| !n.contains('/') && n.ends_with(".rollback"))
            .filter_map(|n| n.split('_').next().map(str::to_string))
            .collect()
    };
    let rollbacks = completed(".hoodie/timeline/");
    assert_eq!(rollbacks.len(), 1, "{:?}", after.keys());
    assert_eq!(
        completed(".hoodie/metadata/.hoodie/timeline/"),
        rollbacks,
        "{:?}",
        after.keys()
    );
    // The lock was released (Hudi's storage-based lock marks its file expired).
    let lock = after
        .get(".hoodie/.locks/table_lock.json")
        .expect("the lock file");
    let lock: serde_json::Value = serde_json::from_slice(lock).unwrap();
    assert_eq!(lock["expired"], true, "{lock}");
}

#[test]
fn savepoint_and_restore_on_azure_take_the_table_back() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("restore");
    let uri = az_uri(&root);
    let f = rt.block_on(Fixture::build_in(
        azure_store(),
        &root,
        &uri,
        Kind::CowV8,
        false,
    ));
    let rb = rollback_az(&uri, TF, &[]);
    assert!(rb.status.success(), "{}", stderr(&rb));
    let sp = run_az(&[
        "savepoint",
        "create",
        &uri,
        "--instant",
        T1,
        "--lock",
        "storage",
    ]);
    assert!(sp.status.success(), "{}", stderr(&sp));
    let list = run_az(&["savepoint", "list", &uri, "--json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    assert!(stdout(&list).contains(T1), "{}", stdout(&list));
    let before = rt.block_on(data_files(&f));
    assert!(before.iter().any(|k| k.contains(T2)), "{before:?}");
    let out = run_az(&[
        "restore",
        &uri,
        "--savepoint",
        T1,
        "--lock",
        "storage",
        "--min-instant-age",
        "0s",
        "--yes",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let after = rt.block_on(data_files(&f));
    let mut kept = before.clone();
    kept.retain(|k| !k.contains(T2));
    assert_eq!(after, kept);
    assert!(after.iter().any(|k| k.contains(T1)), "{after:?}");
    let timeline = rt.block_on(f.snapshot());
    assert!(
        timeline.keys().any(|k| k.ends_with(".restore")),
        "{:?}",
        timeline.keys()
    );
}

/// The daemon polls a table on Azure and rolls back its failed write once it is old enough,
/// under the storage-based lock on Azure.
#[test]
fn the_daemon_polls_an_azure_table_and_rolls_back_its_failed_write() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("daemon");
    let uri = abfss_uri(&root);
    let f = rt.block_on(Fixture::build_in(
        azure_store(),
        &root,
        &uri,
        Kind::CowV8,
        false,
    ));
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"500ms\"\nmin_instant_age = \"0s\"\nclock_skew_margin = \"0s\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"storage\"\n{}[[tables]]\nname = \"azure\"\nuri = \"{uri}\"\n",
            options_toml()
        ),
    );
    d.wait_for(
        "the failed write on Azure to be rolled back",
        Duration::from_secs(30),
        || {
            // A listing only: it runs while the daemon deletes.
            let left: Vec<String> = rt
                .block_on(f.storage().list(&RelPath::root()))
                .expect("list the table")
                .into_iter()
                .map(|m| m.path.to_string())
                .collect();
            let gone = !left
                .iter()
                .any(|k| !k.starts_with(".hoodie") && k.contains(TF))
                && left.iter().any(|k| k.ends_with(".rollback"));
            gone.then_some(())
        },
    );
    let status = d.get("/api/v1/tables");
    assert!(status.body.contains("\"azure\""), "{}", status.body);
}
