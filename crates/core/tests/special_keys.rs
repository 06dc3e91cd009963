//! Object keys with special characters (issue #13). Hudi writes partition paths such as
//! `dt=2024-01-01 10%3A00` (url-encoded partition values), `1~0`, `x#1`, `[p]`, spaces and
//! non-ASCII names; every storage call must address exactly those keys. The fixture tables here
//! get such partitions (data files and markers alike) written straight through object_store, and
//! what a rollback or restore left is read back the same way, never through the seam under test.
//! The S3 cases run against the S3-compatible server `scripts/test` starts (moto on loopback).

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::fixtures::{workload, Fixture, Kind, T1, T2, TF};
use futures::TryStreamExt;
use hudi_keeper_core::exec::restore::{restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::exec::savepoint::{create_savepoint, SavepointRequest};
use hudi_keeper_core::format::rollback::RollbackMetadata;
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::storage::testing::DeleteSwallowingStore;
use hudi_keeper_core::storage::{Storage, StorageOptions};
use hudi_keeper_core::{Error, Table};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// The fixture's partitions `p1` and `p2` renamed, as in the report.
const RENAMED: [(&str, &str); 2] = [("p1", "3%3A0"), ("p2", "1~0")];
/// More partitions, each with a committed file of T1 and a failed file of TF (with its marker).
const MORE: [&str; 7] = [
    "dt=2024-01-01 10%3A00",
    "x#1",
    "[p]",
    "é",
    "日本",
    "a b+c=d",
    "{q}^%25",
];

/// A pending rollback is taken over at once (the tests' own interrupted rollbacks are seconds
/// old). The failed write is always named (`Selection::Instant`): it has no heartbeat file and
/// was written just now, which the automatic selection leaves alone.
fn opts() -> RollbackOptions {
    let mut o = RollbackOptions::default();
    o.heartbeat.min_instant_age = std::time::Duration::ZERO;
    o.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    o
}

fn failed() -> Selection {
    Selection::Instant(TF.to_string())
}

fn key(root: &str, rel: &str) -> Path {
    let k = if root.is_empty() {
        rel.to_string()
    } else {
        format!("{root}/{rel}")
    };
    Path::parse(&k).unwrap_or_else(|e| panic!("{k}: {e}"))
}

/// Every key below `root` and its bytes, as the store itself lists them.
async fn raw(store: &dyn ObjectStore, root: &str) -> BTreeMap<String, Vec<u8>> {
    let prefix = (!root.is_empty()).then(|| key(root, ""));
    let metas: Vec<object_store::ObjectMeta> =
        store.list(prefix.as_ref()).try_collect().await.unwrap();
    let mut out = BTreeMap::new();
    for m in metas {
        let bytes = store.get(&m.location).await.unwrap().bytes().await.unwrap();
        let k = m.location.as_ref();
        let rel = if root.is_empty() {
            k
        } else {
            &k[root.len() + 1..]
        };
        out.insert(rel.to_string(), bytes.to_vec());
    }
    out
}

async fn put_raw(store: &dyn ObjectStore, root: &str, rel: &str, bytes: &[u8]) {
    store
        .put(&key(root, rel), PutPayload::from(bytes.to_vec()))
        .await
        .unwrap();
}

/// `k` with a renamed partition, in the table or in the failed write's marker folder.
fn renamed(k: &str) -> String {
    let temp = format!(".hoodie/.temp/{TF}/");
    let (prefix, rest) = match k.strip_prefix(&temp) {
        Some(r) => (temp.as_str(), r),
        None => ("", k),
    };
    for (from, to) in RENAMED {
        if let Some(tail) = rest.strip_prefix(&format!("{from}/")) {
            return format!("{prefix}{to}/{tail}");
        }
    }
    k.to_string()
}

/// Give the fixture table at `root` its special partitions (see [`RENAMED`] and [`MORE`]), as
/// Hudi would have written them. With `timeline_server`, the markers are one `MARKERS0` file of
/// the timeline-server kind listing them instead.
async fn make_special(store: &dyn ObjectStore, root: &str, timeline_server: bool) {
    for (k, v) in raw(store, root).await {
        let to = renamed(&k);
        if to != k {
            put_raw(store, root, &to, &v).await;
            store.delete(&key(root, &k)).await.unwrap();
        }
    }
    let temp = format!(".hoodie/.temp/{TF}");
    for p in MORE {
        put_raw(store, root, &format!("{p}/c-0_0-1-1_{T1}.parquet"), b"kept").await;
        put_raw(
            store,
            root,
            &format!("{p}/n-0_0-9-9_{TF}.parquet"),
            b"failed",
        )
        .await;
        put_raw(
            store,
            root,
            &format!("{temp}/{p}/n-0_0-9-9_{TF}.parquet.marker.CREATE"),
            b"",
        )
        .await;
    }
    // The failed write's inflight workload, as Hudi profiled it: every partition it wrote to,
    // under the names the table has now.
    let written = partitions();
    let written: Vec<&str> = written.iter().map(String::as_str).collect();
    put_raw(
        store,
        root,
        &format!(".hoodie/{TF}.inflight"),
        &workload(Kind::CowV6, &written),
    )
    .await;
    if timeline_server {
        let markers: Vec<String> = raw(store, root)
            .await
            .into_keys()
            .filter_map(|k| k.strip_prefix(&format!("{temp}/")).map(str::to_string))
            .collect();
        for m in &markers {
            store
                .delete(&key(root, &format!("{temp}/{m}")))
                .await
                .unwrap();
        }
        put_raw(
            store,
            root,
            &format!("{temp}/MARKERS.type"),
            b"TIMELINE_SERVER_BASED",
        )
        .await;
        let text = markers.join("\n") + "\n";
        put_raw(store, root, &format!("{temp}/MARKERS0"), text.as_bytes()).await;
    }
}

fn partitions() -> Vec<String> {
    let mut all: Vec<String> = RENAMED
        .iter()
        .map(|(_, to)| to.to_string())
        .chain(MORE.iter().map(|p| p.to_string()))
        .collect();
    all.sort();
    all
}

/// The data files of the failed write, all of which a rollback deletes.
fn failed_files() -> Vec<String> {
    let mut all = vec![
        format!("3%3A0/fg4-0_0-9-9_{TF}.parquet"),
        format!("3%3A0/fg1-0_0-9-9_{TF}.parquet"),
        format!("1~0/missed-0_0-9-9_{TF}.parquet"),
    ];
    all.extend(MORE.iter().map(|p| format!("{p}/n-0_0-9-9_{TF}.parquet")));
    all.sort();
    all
}

/// Roll back the special fixture table at `root` of `store` (opened by `table`) and check that
/// exactly the failed write's files went, by their raw keys.
async fn rollback_and_check(store: &dyn ObjectStore, root: &str, table: &Table) {
    let before = raw(store, root).await;
    for f in failed_files() {
        assert!(before.contains_key(&f), "the fixture has {f}");
    }
    let done = rollback(table, &failed(), &opts(), None)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", table.uri()));
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].instant, TF);
    assert_eq!(done[0].files_deleted, failed_files().len());
    let after = raw(store, root).await;
    let mut gone: Vec<&String> = before
        .keys()
        .filter(|k| !k.starts_with(".hoodie/") && !after.contains_key(*k))
        .collect();
    gone.sort();
    assert_eq!(gone, failed_files().iter().collect::<Vec<_>>());
    // Every other data file is untouched, byte for byte.
    for (k, v) in before.iter().filter(|(k, _)| !k.starts_with(".hoodie/")) {
        if !failed_files().contains(k) {
            assert_eq!(after.get(k), Some(v), "{k}");
        }
    }
    assert!(
        !after
            .keys()
            .any(|k| k.starts_with(&format!(".hoodie/.temp/{TF}/"))),
        "the markers went"
    );
    assert!(!after.contains_key(&format!(".hoodie/{TF}.inflight")));
    assert!(!after.contains_key(&format!(".hoodie/{TF}.commit.requested")));
    // The completed rollback names the partitions and files by the keys Hudi wrote.
    let r = &done[0].rollback_instant;
    let meta = RollbackMetadata::from_avro(&after[&format!(".hoodie/{r}.rollback")]).unwrap();
    assert_eq!(
        meta.partition_metadata.keys().cloned().collect::<Vec<_>>(),
        partitions()
    );
    let deleted: Vec<&String> = meta
        .partition_metadata
        .values()
        .flat_map(|p| p.success_delete_files.iter())
        .collect();
    assert_eq!(deleted.len(), failed_files().len(), "{deleted:?}");
    for f in failed_files() {
        assert!(
            deleted.iter().any(|abs| abs.ends_with(&format!("/{f}"))),
            "{f} not in {deleted:?}"
        );
    }
    // And the table reads as consistent: nothing pending, nothing left to roll back.
    let reopened = Table::open_storage(table.storage().clone()).await.unwrap();
    assert_eq!(reopened.timeline().await.unwrap().pending().count(), 0);
    let again = rollback(&reopened, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert!(again.is_empty());
    assert_eq!(raw(store, root).await, after);
}

#[tokio::test]
async fn a_v6_cow_table_with_special_partition_paths_rolls_back_in_memory() {
    for timeline_server in [false, true] {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let root = "wh/t%3A1";
        let f = Fixture::build_in(
            Arc::clone(&store),
            root,
            "memory://m/wh/t%3A1",
            Kind::CowV6,
            false,
        )
        .await;
        make_special(store.as_ref(), root, timeline_server).await;
        let table = Table::open_storage(f.storage()).await.unwrap();
        rollback_and_check(store.as_ref(), root, &table).await;
    }
}

#[tokio::test]
async fn a_v6_cow_table_with_special_partition_paths_rolls_back_on_the_local_file_system() {
    for timeline_server in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        // The table folder's own name has a space, `%` and `#` too.
        let dir = tmp.path().join("my tables %20").join("t#1");
        std::fs::create_dir_all(&dir).unwrap();
        let store: Arc<dyn ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap());
        let uri = dir.to_str().unwrap();
        Fixture::build_in(Arc::clone(&store), "", uri, Kind::CowV6, false).await;
        make_special(store.as_ref(), "", timeline_server).await;
        // Opened by its path, as an operator would.
        let table = Table::open(uri, &StorageOptions::default()).await.unwrap();
        rollback_and_check(store.as_ref(), "", &table).await;
    }
}

#[tokio::test]
async fn a_delete_the_store_confirmed_but_did_not_do_fails_the_rollback_before_it_completes() {
    let mem: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let (root, uri) = ("wh/t", "memory://m/wh/t");
    let f = Fixture::build_in(Arc::clone(&mem), root, uri, Kind::CowV6, false).await;
    let stuck = format!("p1/fg4-0_0-9-9_{TF}.parquet");
    // A store that confirms the delete of the failed write's new base file without doing it.
    let swallowing: Arc<dyn ObjectStore> =
        Arc::new(DeleteSwallowingStore::new(Arc::clone(&mem), "fg4-0_0-9-9"));
    let table = Table::open_storage(Storage::from_store(swallowing, root, uri))
        .await
        .unwrap();
    let err = rollback(&table, &failed(), &opts(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::StillListed { table, instant, path }
            if table == uri && instant == TF && *path == stuck),
        "{err}"
    );
    // Nothing was completed: the instant and its rollback are both still pending.
    let left = raw(mem.as_ref(), root).await;
    assert!(left.contains_key(&stuck));
    assert!(left.contains_key(&format!(".hoodie/{TF}.inflight")));
    assert!(left.keys().any(|k| k.ends_with(".rollback.inflight")));
    assert!(!left.keys().any(|k| k.ends_with(".rollback")), "{left:?}");
    // Its rollback heartbeat stays and expires with time (a rerun does not wait for that here).
    let heartbeat = left
        .keys()
        .find(|k| k.starts_with(".hoodie/.heartbeat/") && !k.ends_with(TF))
        .expect("the stopped rollback's heartbeat")
        .clone();
    f.storage()
        .delete(&hudi_keeper_core::storage::RelPath::parse(&heartbeat).unwrap())
        .await
        .unwrap();
    // Resumed on a store that deletes, it completes.
    let table = Table::open_storage(f.storage()).await.unwrap();
    let done = rollback(&table, &failed(), &opts(), None).await.unwrap();
    assert_eq!(done.len(), 1);
    assert!(done[0].resumed);
    let after = raw(mem.as_ref(), root).await;
    assert!(!after.contains_key(&stuck));
    assert!(after.keys().any(|k| k.ends_with(".rollback")));
}

/// Roll back the failed write, savepoint T1 of the special table, then restore it: T2's files go
/// by their raw keys (a listing-based child rollback), T1's stay.
async fn savepoint_and_restore(store: &dyn ObjectStore, root: &str, table: &Table) {
    // The failed write goes first (by name), so that nothing pending is left to judge.
    rollback_and_check(store, root, table).await;
    let created = create_savepoint(
        table,
        &SavepointRequest {
            instant: Some(T1.into()),
            user: "ops".into(),
            comment: String::new(),
        },
        &LockOptions::none(),
    )
    .await
    .unwrap();
    let mut saved: Vec<&String> = created.metadata.partition_metadata.keys().collect();
    saved.sort();
    assert_eq!(saved, partitions().iter().collect::<Vec<_>>());
    let before = raw(store, root).await;
    let done = restore(
        table,
        T1,
        &RestoreOptions {
            rollback: opts(),
            require_savepoint: true,
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(done.undone.len(), 1, "{done:?}");
    let after = raw(store, root).await;
    let data = |m: &BTreeMap<String, Vec<u8>>| -> Vec<String> {
        m.keys()
            .filter(|k| !k.starts_with(".hoodie/"))
            .cloned()
            .collect()
    };
    let mut kept = data(&before);
    kept.retain(|k| !k.contains(T2) && !k.contains(TF));
    assert_eq!(data(&after), kept);
    assert!(kept.contains(&format!("3%3A0/fg1-0_0-1-1_{T1}.parquet")));
    assert!(kept.contains(&format!("1~0/fg2-0_0-1-1_{T1}.parquet")));
    assert!(!after.contains_key(&format!("3%3A0/fg3-0_0-1-1_{T2}.parquet")));
    assert!(after.keys().any(|k| k.ends_with(".restore")));
    assert!(!after.keys().any(|k| k.contains(".rollback")));
}

#[tokio::test]
async fn savepoint_and_restore_of_a_table_with_special_partition_paths_in_memory() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let root = "wh/t 1";
    let f = Fixture::build_in(
        Arc::clone(&store),
        root,
        "memory://m/wh/t 1",
        Kind::CowV6,
        false,
    )
    .await;
    make_special(store.as_ref(), root, false).await;
    let table = Table::open_storage(f.storage()).await.unwrap();
    savepoint_and_restore(store.as_ref(), root, &table).await;
}

mod s3 {
    use super::*;
    use crate::common::s3::{options, s3_store, unique, BUCKET};

    /// A table on the S3 server whose own prefix has a space, `%3A`, `~` and `#` in it.
    async fn special_table(
        name: &str,
        timeline_server: bool,
    ) -> (Arc<dyn ObjectStore>, String, Table) {
        let store = s3_store();
        let root = unique(&format!("special keys %3A~#1/{name}"));
        let uri = format!("s3://{BUCKET}/{root}");
        Fixture::build_in(Arc::clone(&store), &root, &uri, Kind::CowV6, false).await;
        make_special(store.as_ref(), &root, timeline_server).await;
        let table = Table::open(&uri, &options()).await.unwrap();
        (store, root, table)
    }

    #[tokio::test]
    async fn a_v6_cow_table_with_special_partition_paths_rolls_back_on_s3() {
        for timeline_server in [false, true] {
            let (store, root, table) = special_table("rb", timeline_server).await;
            rollback_and_check(store.as_ref(), &root, &table).await;
        }
    }

    #[tokio::test]
    async fn savepoint_and_restore_of_a_table_with_special_partition_paths_on_s3() {
        let (store, root, table) = special_table("restore", false).await;
        savepoint_and_restore(store.as_ref(), &root, &table).await;
    }
}

mod azure {
    use super::*;
    use crate::common::azure::{abfss_uri, az_uri, azure_store, options};
    use crate::common::s3::unique;

    /// A table on the Azure emulator whose own prefix has a space, `%3A`, `~` and `#` in it,
    /// opened by `uri_of` (its `az://` or its `abfss://` form).
    async fn special_table(
        name: &str,
        timeline_server: bool,
        uri_of: fn(&str) -> String,
    ) -> (Arc<dyn ObjectStore>, String, Table) {
        let store = azure_store();
        let root = unique(&format!("special keys %3A~#1/{name}"));
        let uri = uri_of(&root);
        Fixture::build_in(Arc::clone(&store), &root, &uri, Kind::CowV6, false).await;
        make_special(store.as_ref(), &root, timeline_server).await;
        let table = Table::open(&uri, &options()).await.unwrap();
        (store, root, table)
    }

    #[tokio::test]
    async fn a_v6_cow_table_with_special_partition_paths_rolls_back_on_azure_by_az_uri() {
        for timeline_server in [false, true] {
            let (store, root, table) = special_table("rb-az", timeline_server, az_uri).await;
            rollback_and_check(store.as_ref(), &root, &table).await;
        }
    }

    #[tokio::test]
    async fn a_v6_cow_table_with_special_partition_paths_rolls_back_on_azure_by_abfss_uri() {
        let (store, root, table) = special_table("rb-abfss", false, abfss_uri).await;
        rollback_and_check(store.as_ref(), &root, &table).await;
    }

    #[tokio::test]
    async fn savepoint_and_restore_of_a_table_with_special_partition_paths_on_azure() {
        let (store, root, table) = special_table("restore", false, abfss_uri).await;
        savepoint_and_restore(store.as_ref(), &root, &table).await;
    }
}
