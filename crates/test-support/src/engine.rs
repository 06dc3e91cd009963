//! What the engine suites share: the options they run the rollback and restore engines with,
//! and the tables and checks of the restore suites.

use std::collections::BTreeMap;

use hudi_keeper_core::exec::restore::RestoreOptions;
use hudi_keeper_core::exec::rollback::{preview, rollback, RollbackOptions, Selection};
use hudi_keeper_core::exec::savepoint::{create_savepoint, SavepointRequest};
use hudi_keeper_core::format::commit::empty_commit_metadata;
use hudi_keeper_core::format::rollback::RollbackMetadata;
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::timeline::Action;
use hudi_keeper_core::Table;

use super::fixtures::{bump, rel, Fixture, Kind, MDT_INIT, T1, T2, TF};

/// Default options, except that a pending rollback is taken over at once (the tests' own
/// interrupted rollbacks are seconds old), and the fixture's failed write (no heartbeat file,
/// written just now) is judged failed: its writers are LAZY and no minimum age applies.
pub fn rollback_options() -> RollbackOptions {
    let mut o = RollbackOptions {
        lazy_writers: Some(hudi_keeper_core::protocol::detect::LazyWritersEvidence::Assumed),
        ..RollbackOptions::default()
    };
    o.heartbeat.min_instant_age = std::time::Duration::ZERO;
    o.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    o
}

/// A restore's options: its rollbacks' are [`rollback_options`] (the fixture's failed write is a
/// dead LAZY writer's).
pub fn restore_options(require_savepoint: bool) -> RestoreOptions {
    RestoreOptions {
        rollback: rollback_options(),
        require_savepoint,
    }
}

/// The fixture's table.
pub async fn open(f: &Fixture) -> Table {
    Table::open_storage(f.storage())
        .await
        .expect("open fixture")
}

/// Roll back every failed write of the fixture: refused with an error that contains `needle`,
/// and the table is as it was.
pub async fn assert_rollback_refused_unchanged(f: &Fixture, needle: &str) {
    let before = f.snapshot().await;
    let table = open(f).await;
    let err = rollback(&table, &Selection::AllFailed, &rollback_options(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(needle), "{err}");
    assert_eq!(f.snapshot().await, before);
}

/// The completed rollback on the timeline in `timeline_dir`: its file name and metadata.
pub async fn completed_rollback(f: &Fixture, timeline_dir: &str) -> (String, RollbackMetadata) {
    let snap = f.snapshot().await;
    let (name, bytes) = snap
        .iter()
        .find(|(k, _)| {
            k.starts_with(&format!("{timeline_dir}/"))
                && k.ends_with(".rollback")
                && !k[timeline_dir.len() + 1..].contains('/')
        })
        .expect("a completed rollback file");
    (
        name.clone(),
        RollbackMetadata::from_avro(bytes).expect("readable metadata"),
    )
}

/// The Avro bytes of the plan of a rollback of a fresh copy of the fixture's failed write.
pub async fn rollback_plan_bytes(f: &Fixture) -> Vec<u8> {
    let copy = Fixture::build(f.kind, false).await;
    let table = open(&copy).await;
    let p = preview(&table, &Selection::AllFailed, &rollback_options())
        .await
        .unwrap();
    p[0].plan.to_avro().unwrap()
}

/// Assert that a table is byte-identical to `before`, naming the files that differ.
pub fn assert_unchanged(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    ctx: &str,
) {
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(changed.is_empty(), "{ctx}: the table changed: {changed:?}");
}

/// The timeline folder of a table of `kind`.
pub fn tl(kind: Kind) -> &'static str {
    if kind.layout2() {
        ".hoodie/timeline"
    } else {
        ".hoodie"
    }
}

/// The fixture (T1, T2 completed; TF failed) with a savepoint of T1. On v6 merge-on-read
/// tables T2 also appended to T1's slice of fg1, as its commit metadata says.
pub async fn savepointed(kind: Kind, mdt: bool) -> Fixture {
    let f = Fixture::build(kind, mdt).await;
    let s = f.storage();
    if kind == Kind::MorV6 {
        let log = format!(".fg1-0_{T1}.log.2_0-1-1");
        s.put(
            &rel(&format!("p1/{log}")),
            b"#HUDI#t2-blocks".to_vec().into(),
        )
        .await
        .unwrap();
        let meta = serde_json::json!({
            "partitionToWriteStats": {
                "p1": [
                    {"fileId": "fg1-0", "path": format!("p1/{log}"), "prevCommit": T1},
                    {"fileId": "fg3-0", "path": format!("p1/fg3-0_0-1-1_{T2}.parquet"), "prevCommit": "null"}
                ]
            },
            "operationType": "UPSERT"
        });
        s.put(
            &rel(&format!(".hoodie/{T2}.deltacommit")),
            serde_json::to_vec(&meta).unwrap().into(),
        )
        .await
        .unwrap();
    }
    let table = open(&f).await;
    create_savepoint(
        &table,
        &SavepointRequest {
            instant: Some(T1.into()),
            user: "test".into(),
            comment: "known good".into(),
        },
        &LockOptions::none(),
    )
    .await
    .expect("savepoint");
    f
}

/// The restore files (requested, inflight, completed) on the timeline in `dir`.
pub fn restore_files(snap: &BTreeMap<String, Vec<u8>>, dir: &str) -> Vec<String> {
    snap.keys()
        .filter(|k| k.starts_with(&format!("{dir}/")) && k.contains(".restore"))
        .filter(|k| !k[dir.len() + 1..].contains('/'))
        .cloned()
        .collect()
}

/// The fixture's metadata table as Hudi 1.x writes it: completed deltacommits in Avro with the
/// metadata record schema, and a `partition_stats` partition besides `files`.
pub async fn with_real_metadata_table(f: &Fixture) {
    let s = f.storage();
    let m = ".hoodie/metadata";
    let avro = empty_commit_metadata(
        "{\"type\":\"record\",\"name\":\"HoodieMetadataRecord\"}",
        "UPSERT_PREPPED",
    )
    .unwrap();
    for t in [T1, T2, TF] {
        s.put(
            &rel(&format!("{m}/.hoodie/timeline/{t}_{}.deltacommit", bump(t))),
            avro.clone().into(),
        )
        .await
        .unwrap();
        s.put(
            &rel(&format!(
                "{m}/partition_stats/.partition-stats-0000-0_{t}.log.1_0-1-0"
            )),
            b"stats".to_vec().into(),
        )
        .await
        .unwrap();
    }
    let props = rel(".hoodie/hoodie.properties");
    let text = String::from_utf8(s.get(&props).await.unwrap().to_vec()).unwrap();
    let text = text.replace(
        "hoodie.table.metadata.partitions=files\n",
        "hoodie.table.metadata.partitions=files,partition_stats\n",
    );
    s.put(&props, text.into_bytes().into()).await.unwrap();
}

/// The fixture's v6 metadata table with real contents, as Hudi 0.15 writes them: a base HFile
/// listing the partitions, one HFile data block per deltacommit (T1, T2 and the failed write's)
/// with the files each wrote, in the log versions the fixture's commit metadata names.
pub async fn with_real_v6_metadata_table(f: &Fixture) {
    use hudi_keeper_core::format::hfile::write_hudi_hfile;
    use hudi_keeper_core::format::log_block::hfile_data_block;
    use hudi_keeper_core::format::metadata_record::{
        file_list_record, files_record, LOG_BLOCK_SCHEMA_V6,
    };
    let s = f.storage();
    s.put(
        &rel("p2/.hoodie_partition_metadata"),
        b"commitTime=1\n".to_vec().into(),
    )
    .await
    .unwrap();
    let files = |names: &[&str]| -> BTreeMap<String, i64> {
        names.iter().map(|n| (n.to_string(), 11)).collect()
    };
    let m = ".hoodie/metadata/files";
    let parts = [("p1", 0i64, false), ("p2", 0, false)];
    let base: BTreeMap<String, Vec<u8>> = [
        file_list_record("__all_partitions__", 1, parts.iter().copied()),
        files_record("p2", &files(&[&format!("fg2-0_0-1-1_{T1}.parquet")])),
    ]
    .into_iter()
    .collect();
    s.put(
        &rel(&format!("{m}/files-0000-0_0-0-0_{MDT_INIT}.hfile")),
        write_hudi_hfile(&base, LOG_BLOCK_SCHEMA_V6).unwrap().into(),
    )
    .await
    .unwrap();
    let mut t2 = vec![format!("fg3-0_0-1-1_{T2}.parquet")];
    let mut tf = vec![format!("fg4-0_0-9-9_{TF}.parquet")];
    if f.kind == Kind::MorV6 {
        t2.push(format!(".fg1-0_{T1}.log.2_0-1-1"));
        tf.push(format!(".fg1-0_{T1}.log.1_0-9-9"));
    }
    let blocks = [
        (T1, vec![format!("fg1-0_0-1-1_{T1}.parquet")]),
        (T2, t2),
        (TF, tf),
    ];
    for (i, (t, names)) in blocks.iter().enumerate() {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let rows: BTreeMap<String, Vec<u8>> =
            [files_record("p1", &files(&names))].into_iter().collect();
        s.put(
            &rel(&format!("{m}/.files-0000-0_{MDT_INIT}.log.{}_0-0-0", i + 1)),
            hfile_data_block(t, LOG_BLOCK_SCHEMA_V6, &rows)
                .unwrap()
                .into(),
        )
        .await
        .unwrap();
    }
}

/// The requested times of the restore instants (pending or completed) on a table's timeline.
pub async fn restore_instants(table: &Table) -> Vec<String> {
    table
        .timeline()
        .await
        .expect("timeline")
        .instants()
        .iter()
        .filter(|i| i.action == Action::Restore)
        .map(|i| i.requested_time.clone())
        .collect()
}

/// What a restore stopped by a crash must leave, so that nothing but the table itself is needed
/// to finish it (the daemon's journal drops a restore that is not pending on the timeline): the
/// table as it was, or a pending restore on its timeline, or the restore completed. Anything
/// else (the metadata table deleted with no restore recorded, say) is a change no rerun knows
/// to continue.
pub async fn assert_resumable(
    f: &Fixture,
    untouched: &BTreeMap<String, Vec<u8>>,
    restores_before: &[String],
    failure: &str,
) {
    let now = f.snapshot().await;
    if &now == untouched {
        return;
    }
    let timeline = open(f).await.timeline().await.expect("timeline");
    let pending = timeline.pending().any(|i| i.action == Action::Restore);
    let completed = timeline
        .completed()
        .any(|i| i.action == Action::Restore && !restores_before.contains(&i.requested_time));
    let changed: Vec<&String> = untouched
        .keys()
        .chain(now.keys())
        .filter(|k| untouched.get(*k) != now.get(*k))
        .collect();
    assert!(
        pending || completed,
        "after a failure {failure} the table changed with no pending or completed restore on its timeline: {changed:?}"
    );
}

/// [`savepointed`], its metadata table with real contents if `real_mdt`: Hudi 1.x's
/// ([`with_real_metadata_table`]) on layout 2, Hudi 0.15's ([`with_real_v6_metadata_table`])
/// before it.
pub async fn savepointed_with(kind: Kind, mdt: bool, real_mdt: bool) -> Fixture {
    let f = savepointed(kind, mdt).await;
    if real_mdt && kind.layout2() {
        with_real_metadata_table(&f).await;
    } else if real_mdt {
        with_real_v6_metadata_table(&f).await;
    }
    f
}

/// The fixture's `hoodie.properties` with `hoodie.table.version=5`: a Hudi 0.12/0.13 table.
pub async fn as_version_5(f: &Fixture) {
    let props = f.snapshot().await[".hoodie/hoodie.properties"].clone();
    let text = String::from_utf8(props).expect("hoodie.properties is UTF-8");
    assert!(text.contains("hoodie.table.version=6"), "{text}");
    f.put(
        ".hoodie/hoodie.properties",
        text.replace("hoodie.table.version=6", "hoodie.table.version=5")
            .as_bytes(),
    )
    .await;
    // The metadata table's own, as Hudi 0.13 writes it.
    let mdt = ".hoodie/metadata/.hoodie/hoodie.properties";
    if let Some(props) = f.snapshot().await.get(mdt) {
        let text = String::from_utf8(props.clone()).expect("hoodie.properties is UTF-8");
        f.put(
            mdt,
            text.replace("hoodie.table.version=6", "hoodie.table.version=5")
                .as_bytes(),
        )
        .await;
    }
}
