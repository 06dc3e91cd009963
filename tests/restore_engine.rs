//! Savepoints and restore on hand-made tables of every kind: what a restore undoes and in which
//! order, what it leaves, what it refuses before changing anything, and that a crash at any
//! storage call, then a rerun, ends where an uninterrupted restore ends.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::fixtures::{rel, Fixture, Kind, MDT_INIT, T1, T2, TF};
use hudi_keeper_core::exec::restore::{
    preview_restore, restore, MetadataTableAction, RestoreOptions,
};
use hudi_keeper_core::exec::rollback::RollbackOptions;
use hudi_keeper_core::exec::savepoint::{create_savepoint, list_savepoints, SavepointRequest};
use hudi_keeper_core::format::commit::empty_commit_metadata;
use hudi_keeper_core::format::log_block::is_rollback_block_for;
use hudi_keeper_core::format::restore::{RestoreMetadata, RestorePlan};
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::storage::testing::{CountingInterceptor, FailMode, FailNth};
use hudi_keeper_core::timeline::Action;
use hudi_keeper_core::Table;

fn opts(require_savepoint: bool) -> RestoreOptions {
    // The fixture's failed write (no heartbeat file, written just now) is a dead LAZY
    // writer's: its writers are LAZY and no minimum age applies.
    let mut rollback = RollbackOptions {
        lazy_writers: Some(hudi_keeper_core::protocol::detect::LazyWritersEvidence::Assumed),
        ..RollbackOptions::default()
    };
    rollback.heartbeat.min_instant_age = std::time::Duration::ZERO;
    rollback.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    RestoreOptions {
        rollback,
        require_savepoint,
    }
}

async fn open(f: &Fixture) -> Table {
    Table::open_storage(f.storage())
        .await
        .expect("open fixture")
}

fn tl(kind: Kind) -> &'static str {
    if kind.layout2() {
        ".hoodie/timeline"
    } else {
        ".hoodie"
    }
}

/// The fixture (T1, T2 completed; TF failed) with a savepoint of T1. On v6 merge-on-read
/// tables T2 also appended to T1's slice of fg1, as its commit metadata says.
async fn fixture(kind: Kind, mdt: bool) -> Fixture {
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

fn restore_files(snap: &BTreeMap<String, Vec<u8>>, dir: &str) -> Vec<String> {
    snap.keys()
        .filter(|k| k.starts_with(&format!("{dir}/")) && k.contains(".restore"))
        .filter(|k| !k[dir.len() + 1..].contains('/'))
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_savepoint_keeps_the_files_of_its_commit_and_changes_nothing_else() {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV6, Kind::MorV9] {
        let f = Fixture::build(kind, false).await;
        let before = f.snapshot().await;
        let table = open(&f).await;
        let created = create_savepoint(
            &table,
            &SavepointRequest {
                instant: None,
                user: "u".into(),
                comment: "c".into(),
            },
            &LockOptions::none(),
        )
        .await
        .unwrap();
        // The latest completed commit, with every committed base file up to it.
        assert_eq!(created.instant, T2, "{kind:?}");
        let mut names: Vec<&String> = created
            .metadata
            .partition_metadata
            .values()
            .flatten()
            .collect();
        names.sort();
        let mut expected = vec![
            format!("fg1-0_0-1-1_{T1}.parquet"),
            format!("fg2-0_0-1-1_{T1}.parquet"),
            format!("fg3-0_0-1-1_{T2}.parquet"),
        ];
        if kind == Kind::MorV6 {
            // v6 keeps the whole slice, the failed write's log file included, as Hudi does.
            expected.push(format!(".fg1-0_{T1}.log.1_0-9-9"));
        }
        expected.sort();
        assert_eq!(names, expected.iter().collect::<Vec<_>>(), "{kind:?}");
        // Exactly two new timeline files.
        let after = f.snapshot().await;
        let new: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
        assert_eq!(new.len(), 2, "{kind:?}: {new:?}");
        assert!(new.iter().all(|k| k.contains(".savepoint")));
        assert_eq!(after[&format!("{}/{T2}.savepoint.inflight", tl(kind))], b"");
        let listed = list_savepoints(&table).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].metadata.as_ref(), Some(&created.metadata));
        // A second savepoint of the same commit, or of the pending write, is refused.
        for t in [T2, TF] {
            let err = create_savepoint(
                &table,
                &SavepointRequest {
                    instant: Some(t.into()),
                    user: "u".into(),
                    comment: "c".into(),
                },
                &LockOptions::none(),
            )
            .await
            .unwrap_err();
            assert!(err.to_string().contains("nothing was changed"), "{err}");
        }
        assert_eq!(f.snapshot().await, after);
    }
}

#[tokio::test]
async fn restore_to_a_savepoint_undoes_the_failed_write_then_later_commits_and_leaves_only_the_restore(
) {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV6, Kind::MorV9] {
        let f = fixture(kind, false).await;
        let table = open(&f).await;
        let preview = preview_restore(&table, T1, &opts(true)).await.unwrap();
        let order: Vec<&str> = preview
            .instants
            .iter()
            .map(|i| i.instant.as_str())
            .collect();
        assert_eq!(order, [TF, T2], "{kind:?}: the pending write first");
        assert!(preview.savepointed);
        let untouched = f.snapshot().await;
        let done = restore(&table, T1, &opts(true), None).await.unwrap();
        assert_eq!(done.undone.len(), 2, "{kind:?}");
        assert_eq!(done.metadata_table, MetadataTableAction::NotInUse);
        let after = f.snapshot().await;
        let dir = tl(kind);
        // T1's files and instant stay, with the savepoint.
        assert!(after.contains_key(&format!("p1/fg1-0_0-1-1_{T1}.parquet")));
        assert!(after.contains_key(&format!("p2/fg2-0_0-1-1_{T1}.parquet")));
        assert!(after
            .keys()
            .any(|k| k.starts_with(&format!("{dir}/{T1}")) && k.ends_with(".savepoint")));
        // T2 and TF are gone, data and timeline.
        for k in after.keys() {
            let name = k.rsplit('/').next().unwrap();
            assert!(
                !(name.contains(T2) || name.contains(TF)) || k.contains(".heartbeat"),
                "{kind:?}: {k} survived the restore"
            );
        }
        // No rollback instant is left; one completed restore with its plan.
        assert!(!after.keys().any(|k| k.contains(".rollback")), "{kind:?}");
        let restores = restore_files(&after, dir);
        assert_eq!(restores.len(), 3, "{kind:?}: {restores:?}");
        let r = &done.restore_instant;
        let plan = RestorePlan::from_avro(&after[&format!("{dir}/{r}.restore.requested")]).unwrap();
        assert_eq!(plan.version, Some(2));
        assert_eq!(plan.savepoint_to_restore_timestamp.as_deref(), Some(T1));
        let planned: Vec<&str> = plan
            .instants_to_rollback
            .iter()
            .map(|i| i.commit_time.as_str())
            .collect();
        assert_eq!(planned, [TF, T2]);
        let completed = restores.iter().find(|k| k.ends_with(".restore")).unwrap();
        let meta = RestoreMetadata::from_avro(&after[completed]).unwrap();
        assert_eq!(meta.instants_to_rollback, [TF, T2]);
        assert_eq!(meta.hoodie_restore_metadata.len(), 2);
        assert!(meta.hoodie_restore_metadata.values().all(|v| v.len() == 1));
        if kind == Kind::MorV6 {
            // T2's append to T1's slice is voided by a command block; its log file stays.
            assert!(after.contains_key(&format!("p1/.fg1-0_{T1}.log.2_0-1-1")));
            let blocks: Vec<&String> = after
                .iter()
                .filter(|(_, v)| v.starts_with(b"#HUDI#\0"))
                .map(|(k, _)| k)
                .collect();
            assert_eq!(blocks.len(), 2, "one per undone instant: {blocks:?}");
            let child = &meta.hoodie_restore_metadata[T2][0];
            assert!(blocks.iter().any(|k| is_rollback_block_for(
                &after[*k],
                &child.start_rollback_time,
                T2
            )));
        }
        // Nothing more to do: a rerun finds the restore done and changes nothing.
        let again = restore(&table, T1, &opts(true), None).await.unwrap();
        assert!(again.undone.is_empty());
        assert_eq!(again.restore_instant, done.restore_instant);
        assert_eq!(f.snapshot().await, after);
        assert_ne!(untouched, after);
    }
}

/// The fixture's metadata table as Hudi 1.x writes it: completed deltacommits in Avro with the
/// metadata record schema, and a `partition_stats` partition besides `files`.
async fn with_real_metadata_table(f: &Fixture) {
    let s = f.storage();
    let m = ".hoodie/metadata";
    let avro = empty_commit_metadata(
        "{\"type\":\"record\",\"name\":\"HoodieMetadataRecord\"}",
        "UPSERT_PREPPED",
    )
    .unwrap();
    for t in [T1, T2, TF] {
        s.put(
            &rel(&format!(
                "{m}/.hoodie/timeline/{t}_{}.deltacommit",
                common::fixtures::bump(t)
            )),
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

#[tokio::test]
async fn a_metadata_table_is_restored_to_the_same_point_as_hudi_1_x_restores_it() {
    let f = fixture(Kind::MorV9, true).await;
    with_real_metadata_table(&f).await;
    let table = open(&f).await;
    let preview = preview_restore(&table, T1, &opts(true)).await.unwrap();
    assert_eq!(preview.metadata_table, MetadataTableAction::Restored);
    let done = restore(&table, T1, &opts(true), None).await.unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Restored);
    let after = f.snapshot().await;
    let m = ".hoodie/metadata";
    // T1's metadata stays; T2's and the failed write's (completed there) are undone.
    assert!(after.contains_key(&format!("{m}/files/.files-0000-0_{T1}.log.1_0-1-0")));
    for t in [T2, TF] {
        assert!(!after.contains_key(&format!("{m}/files/.files-0000-0_{t}.log.1_0-1-0")));
        assert!(!after
            .keys()
            .any(|k| k.starts_with(&format!("{m}/.hoodie/timeline/{t}"))));
    }
    // partition_stats is dropped, as Hudi 1.1 drops it.
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/partition_stats/"))));
    let props = String::from_utf8(after[".hoodie/hoodie.properties"].clone()).unwrap();
    assert!(
        props.contains("hoodie.table.metadata.partitions=files\n"),
        "{props}"
    );
    // Its own completed restore, no rollback left, and one empty deltacommit after it.
    let mtl = format!("{m}/.hoodie/timeline");
    let restores = restore_files(&after, &mtl);
    assert_eq!(restores.len(), 3, "{restores:?}");
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&mtl) && k.contains(".rollback")));
    let mdt_restore = restores.iter().find(|k| k.ends_with(".restore")).unwrap();
    let meta = RestoreMetadata::from_avro(&after[mdt_restore]).unwrap();
    assert_eq!(meta.instants_to_rollback, [TF, T2]);
    let m_time = mdt_restore
        .rsplit('/')
        .next()
        .unwrap()
        .split('_')
        .next()
        .unwrap()
        .to_string();
    let syncs: Vec<&String> = after
        .keys()
        .filter(|k| k.starts_with(&format!("{mtl}/")) && k.ends_with(".deltacommit"))
        .filter(|k| k.rsplit('/').next().unwrap().split('_').next().unwrap() > m_time.as_str())
        .collect();
    assert_eq!(syncs.len(), 1, "{syncs:?}");
    assert_eq!(
        hudi_keeper_core::format::commit::schema_of(&after[syncs[0]]).as_deref(),
        Some("{\"type\":\"record\",\"name\":\"HoodieMetadataRecord\"}")
    );
    // The data table's restore completes after the metadata table's.
    let data_restore = restore_files(&after, ".hoodie/timeline");
    assert_eq!(data_restore.len(), 3);
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_that_restores_the_metadata_table_then_rerun_ends_alike(
) {
    let n = crash_at_every_call_with(Kind::MorV9, true, true).await;
    eprintln!("mor v9 + metadata table restored: {n} injection points");
}

#[tokio::test]
async fn a_metadata_table_is_deleted_and_cleared_from_the_table_properties() {
    let f = fixture(Kind::MorV9, true).await;
    let table = open(&f).await;
    let done = restore(&table, T1, &opts(true), None).await.unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Deleted);
    let after = f.snapshot().await;
    assert!(!after.keys().any(|k| k.starts_with(".hoodie/metadata/")));
    let props = String::from_utf8(after[".hoodie/hoodie.properties"].clone()).unwrap();
    assert!(
        props.contains("hoodie.table.metadata.partitions=\n"),
        "{props}"
    );
    assert!(props.contains("hoodie.table.name=fx\n"));
    assert!(!after.contains_key(".hoodie/hoodie.properties.backup"));
}

/// A journal that cannot record anything (a full or read-only `state_dir`).
#[derive(Debug)]
struct BrokenJournal;

impl hudi_keeper_core::exec::ChangeJournal for BrokenJournal {
    fn starting<'a>(
        &'a self,
        _change: &'a hudi_keeper_core::exec::StartedChange,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async { Err("no space left on device".to_string()) })
    }
}

#[tokio::test]
async fn a_restore_whose_journal_cannot_be_written_is_refused_before_the_metadata_table_goes() {
    let f = fixture(Kind::MorV9, true).await;
    let table = open(&f).await;
    let before = f.snapshot().await;
    let mut o = opts(true);
    o.rollback.journal = Some(std::sync::Arc::new(BrokenJournal));
    let err = restore(&table, T1, &o, None).await.unwrap_err();
    assert!(err.to_string().contains("no space left on device"), "{err}");
    assert_eq!(f.snapshot().await, before, "the table changed");
}

/// The fixture's v6 metadata table with real contents, as Hudi 0.15 writes them: a base HFile
/// listing the partitions, one HFile data block per deltacommit (T1, T2 and the failed write's)
/// with the files each wrote, in the log versions the fixture's commit metadata names.
async fn with_real_v6_metadata_table(f: &Fixture) {
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

/// Record key -> file name -> (size, deleted).
type FilesRecords = BTreeMap<String, BTreeMap<String, (i64, bool)>>;

/// The instant and `files` records of the one HFile data block in `bytes`.
fn block_records(bytes: &[u8]) -> (String, FilesRecords) {
    use hudi_keeper_core::format::log_block::read_blocks;
    use hudi_keeper_core::format::metadata_record::decode_v6_files_record;
    let blocks = read_blocks(bytes).expect("log blocks");
    assert_eq!(blocks.len(), 1);
    let instant = blocks[0]
        .header
        .entries
        .iter()
        .find(|(k, _)| *k == 0)
        .map(|(_, v)| v.clone())
        .unwrap();
    let contents = hudi_keeper_core::format::hfile::read(blocks[0].content).unwrap();
    let records = contents
        .cells
        .iter()
        .map(|c| {
            let (_, files) = decode_v6_files_record(&c.value).unwrap();
            (String::from_utf8(c.row.clone()).unwrap(), files)
        })
        .collect();
    (instant, records)
}

#[tokio::test]
async fn a_version_6_metadata_table_is_restored_in_place_as_hudi_0_15_restores_it() {
    let f = fixture(Kind::MorV6, true).await;
    with_real_v6_metadata_table(&f).await;
    let table = open(&f).await;
    let preview = preview_restore(&table, T1, &opts(true)).await.unwrap();
    assert_eq!(preview.metadata_table, MetadataTableAction::Restored);
    let done = restore(&table, T1, &opts(true), None).await.unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Restored);
    let after = f.snapshot().await;
    let m = ".hoodie/metadata";
    // Its deltacommits after the point are undone with rollback command blocks (new log
    // versions); its own restore completed, its child rollbacks gone.
    for t in [T2, TF] {
        assert!(!after
            .keys()
            .any(|k| k.starts_with(&format!("{m}/.hoodie/{t}"))));
        assert!(
            after
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.")))
                .any(|(_, v)| {
                    hudi_keeper_core::format::log_block::read_block_headers(v).is_some_and(|h| {
                        h.len() == 1
                            && h[0].block_type == 0
                            && h[0].entries.iter().any(|(k, v)| *k == 1 && v == t)
                    })
                }),
            "no rollback block for {t}"
        );
    }
    assert!(after.contains_key(&format!("{m}/.hoodie/{T1}.deltacommit")));
    let mtl = format!("{m}/.hoodie");
    assert_eq!(restore_files(&after, &mtl).len(), 3);
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{mtl}/")) && k.contains(".rollback")));
    // Then the sync deltacommit at <new>003, whose block adds what the data table's children
    // appended and the logs T2 and the failed write left (the metadata table no longer lists
    // them), as Hudi 0.15's restore does.
    let syncs: Vec<&String> = after
        .keys()
        .filter(|k| {
            k.starts_with(&format!("{mtl}/"))
                && k.ends_with("003.deltacommit")
                && !k[mtl.len() + 1..].contains('/')
        })
        .collect();
    assert_eq!(syncs.len(), 1, "{syncs:?}");
    let s = syncs[0]
        .rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".deltacommit");
    assert_eq!(s.len(), 20);
    let meta: serde_json::Value = serde_json::from_slice(&after[syncs[0]]).unwrap();
    let path = meta["partitionToWriteStats"]["files"][0]["path"]
        .as_str()
        .unwrap();
    let (instant, records) = block_records(&after[&format!("{m}/{path}")]);
    assert_eq!(instant, s);
    let p1: Vec<&String> = records["p1"].keys().collect();
    let logs: Vec<String> = after
        .keys()
        .filter(|k| k.starts_with(&format!("p1/.fg1-0_{T1}.log.")))
        .map(|k| k[3..].to_string())
        .collect();
    assert_eq!(logs.len(), 4, "{logs:?}");
    assert_eq!(p1, logs.iter().collect::<Vec<_>>());
    assert!(records["p1"]
        .values()
        .all(|(size, deleted)| *size > 0 && !deleted));
    assert_eq!(records.len(), 1, "{records:?}");
    // No marker folder left in the metadata table.
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{mtl}/.temp/"))));
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_that_restores_a_v6_metadata_table_then_rerun_ends_alike(
) {
    let n = crash_at_every_call_with(Kind::MorV6, true, true).await;
    eprintln!("mor v6 + metadata table restored: {n} injection points");
}

/// The instant time a timeline file name starts with.
fn instant_of(key: &str) -> String {
    let name = key.rsplit('/').next().unwrap_or(key);
    name.split(['_', '.']).next().unwrap_or(name).to_string()
}

/// The metadata table's deltacommit times on its timeline (not in sub-folders), each with
/// whether it is completed.
fn mdt_deltacommits(snap: &BTreeMap<String, Vec<u8>>, mtl: &str) -> BTreeMap<String, bool> {
    let mut out: BTreeMap<String, bool> = BTreeMap::new();
    for k in snap.keys() {
        let Some(name) = k.strip_prefix(&format!("{mtl}/")) else {
            continue;
        };
        if name.contains('/') || !name.contains(".deltacommit") {
            continue;
        }
        let done = out.entry(instant_of(k)).or_default();
        *done |= name.ends_with(".deltacommit");
    }
    out
}

/// Restore to T2 (undoing the failed write), then to the earlier T1: the second restore must
/// run the metadata table's own restore again, to T1 (not take the first restore's for an
/// earlier attempt of its own): T2's metadata-table deltacommit and the first sync deltacommit
/// are rolled back, and a new sync deltacommit follows the second metadata-table restore.
async fn restore_later_then_earlier_restores_the_metadata_table_twice(kind: Kind) {
    let f = build(kind, true, true).await;
    let mtl = format!(".hoodie/metadata/{}", tl(kind));
    let first = restore(&open(&f).await, T2, &opts(false), None)
        .await
        .unwrap();
    assert_eq!(first.metadata_table, MetadataTableAction::Restored);
    let mid = f.snapshot().await;
    let m1 = restore_files(&mid, &mtl)
        .iter()
        .map(|k| instant_of(k))
        .max()
        .expect("the first metadata-table restore");
    let mid_deltas = mdt_deltacommits(&mid, &mtl);
    let s1: Vec<&String> = mid_deltas.keys().filter(|t| **t > m1).collect();
    assert_eq!(s1.len(), 1, "{mid_deltas:?}");
    let s1 = s1[0].clone();
    assert!(mid_deltas.contains_key(T2));

    let second = restore(&open(&f).await, T1, &opts(true), None)
        .await
        .unwrap();
    assert_eq!(second.metadata_table, MetadataTableAction::Restored);
    let after = f.snapshot().await;
    let restores = restore_files(&after, &mtl);
    let plans: BTreeMap<String, RestorePlan> = restores
        .iter()
        .filter(|k| k.ends_with(".restore.requested"))
        .map(|k| (instant_of(k), RestorePlan::from_avro(&after[k]).unwrap()))
        .collect();
    let targets: Vec<Option<&str>> = plans
        .values()
        .map(|p| p.savepoint_to_restore_timestamp.as_deref())
        .collect();
    assert_eq!(targets, [Some(T2), Some(T1)], "{restores:?}");
    let m2 = plans.keys().last().unwrap().clone();
    assert!(m2 > m1);
    let completed: Vec<&String> = restores
        .iter()
        .filter(|k| k.ends_with(".restore"))
        .collect();
    assert_eq!(completed.len(), 2, "{restores:?}");
    let m2_done = completed
        .iter()
        .find(|k| instant_of(k) == m2)
        .expect("the second metadata-table restore completed");
    let meta = RestoreMetadata::from_avro(&after[*m2_done]).unwrap();
    assert_eq!(meta.instants_to_rollback, [s1.clone(), T2.to_string()]);
    // After T1 the metadata table holds only the sync deltacommit of the second restore.
    let deltas = mdt_deltacommits(&after, &mtl);
    let later: Vec<(&String, &bool)> = deltas.iter().filter(|(t, _)| t.as_str() > T1).collect();
    assert_eq!(later.len(), 1, "{deltas:?}");
    assert!(
        later[0].0.as_str() > m2.as_str() && *later[0].1,
        "{deltas:?}"
    );
    if kind == Kind::MorV6 {
        assert!(later[0].0.ends_with("003") && later[0].0.len() == 20);
    }
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{mtl}/")) && k.contains(".rollback")));
}

#[tokio::test]
async fn a_restore_to_an_earlier_point_after_a_restore_restores_the_v9_metadata_table_again() {
    restore_later_then_earlier_restores_the_metadata_table_twice(Kind::MorV9).await;
}

#[tokio::test]
async fn a_restore_to_an_earlier_point_after_a_restore_restores_the_v6_metadata_table_again() {
    restore_later_then_earlier_restores_the_metadata_table_twice(Kind::MorV6).await;
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_second_restore_to_an_earlier_point_then_rerun_ends_alike_v9(
) {
    let n = crash_at_every_call_after(Kind::MorV9, true, true, Some(T2)).await;
    eprintln!("mor v9 + metadata table, second restore: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_second_restore_to_an_earlier_point_then_rerun_ends_alike_v6(
) {
    let n = crash_at_every_call_after(Kind::MorV6, true, true, Some(T2)).await;
    eprintln!("mor v6 + metadata table, second restore: {n} injection points");
}

#[tokio::test]
async fn a_version_6_metadata_table_hudi_keeper_cannot_read_is_deleted_for_the_next_writer_to_rebuild(
) {
    let f = fixture(Kind::CowV6, true).await;
    let table = open(&f).await;
    let done = restore(&table, T1, &opts(true), None).await.unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Deleted);
    let after = f.snapshot().await;
    assert!(!after.keys().any(|k| k.starts_with(".hoodie/metadata/")));
    assert!(!after.contains_key(&format!("p1/fg3-0_0-1-1_{T2}.parquet")));
}

#[tokio::test]
async fn bad_restores_are_refused_before_anything_changes() {
    let f = fixture(Kind::CowV8, false).await;
    let table = open(&f).await;
    let before = f.snapshot().await;
    let refused = |e: hudi_keeper_core::Error| e.to_string();
    // No savepoint at T2 (and it is the latest commit anyway).
    let e = refused(restore(&table, T2, &opts(true), None).await.unwrap_err());
    assert!(e.contains("no savepoint at"), "{e}");
    // Archived (older than the active timeline).
    let e = refused(
        restore(&table, "20230101000000000", &opts(false), None)
            .await
            .unwrap_err(),
    );
    assert!(e.contains("archived"), "{e}");
    // The failed write itself is not a restore point.
    let e = refused(restore(&table, TF, &opts(false), None).await.unwrap_err());
    assert!(e.contains("not completed"), "{e}");
    assert_eq!(f.snapshot().await, before);

    // A live write after the restore point.
    let live = common::fixtures::instant_now(0);
    f.start_write(&live).await;
    f.storage()
        .put(
            &rel(&format!(".hoodie/.heartbeat/{live}")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let e = refused(restore(&table, T1, &opts(true), None).await.unwrap_err());
    assert!(e.contains("not a failed write") && e.contains(&live), "{e}");
    assert_eq!(f.snapshot().await, before);

    // A corrupt pending restore plan.
    let f = fixture(Kind::CowV6, false).await;
    let s = f.storage();
    s.put(
        &rel(".hoodie/20240101030000000.restore.requested"),
        b"junk".to_vec().into(),
    )
    .await
    .unwrap();
    let before = f.snapshot().await;
    let table = open(&f).await;
    let e = refused(restore(&table, T1, &opts(true), None).await.unwrap_err());
    assert!(e.contains("cannot be read"), "{e}");
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn a_savepoint_after_the_restore_point_is_refused_up_front() {
    let f = fixture(Kind::CowV6, false).await;
    let table = open(&f).await;
    create_savepoint(
        &table,
        &SavepointRequest {
            instant: Some(T2.into()),
            user: "u".into(),
            comment: "c".into(),
        },
        &LockOptions::none(),
    )
    .await
    .unwrap();
    let before = f.snapshot().await;
    let e = restore(&table, T1, &opts(true), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("commit {T2} is savepointed")), "{e}");
    assert_eq!(f.snapshot().await, before);
}

/// Replace the restore's and its children's instant and completion times, which differ run to
/// run, and the bytes of files that embed them.
fn normalize(snapshot: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    snapshot
        .iter()
        .map(|(k, v)| {
            let k = k
                .split('/')
                .map(|seg| match seg.split_once('.') {
                    Some((_, rest))
                        if rest.starts_with("restore") || rest.starts_with("rollback") =>
                    {
                        format!("<R>.{rest}")
                    }
                    Some((times, rest)) if rest.starts_with("savepoint") => {
                        format!("{}.{rest}", times.split('_').next().unwrap_or(times))
                    }
                    // New instants (the metadata table's sync deltacommit) have new times.
                    Some((times, rest))
                        if times.split('_').next().is_some_and(|t| {
                            (t.len() == 17 || (t.len() == 20 && t.ends_with("003")))
                                && t.bytes().all(|b| b.is_ascii_digit())
                                && ![T1, T2, TF].contains(&t)
                        }) =>
                    {
                        let shape = if times.contains('_') {
                            "<N>_<C>"
                        } else {
                            "<N>"
                        };
                        format!("{shape}.{rest}")
                    }
                    _ => seg.to_string(),
                })
                .collect::<Vec<_>>()
                .join("/");
            let v = if k.contains(".restore")
                || k.contains(".savepoint")
                || k.contains("<N>")
                // Avro files carry a random sync marker.
                || v.starts_with(b"Obj\x01")
                || v.starts_with(b"#HUDI#\0")
            {
                Vec::new()
            } else {
                v.clone()
            };
            (k, v)
        })
        .collect()
}

/// Fail the n-th storage call of a restore (before or after it reaches storage), rerun, and
/// compare with an uninterrupted restore.
async fn crash_at_every_call(kind: Kind, mdt: bool) -> usize {
    crash_at_every_call_with(kind, mdt, false).await
}

async fn build(kind: Kind, mdt: bool, real_mdt: bool) -> Fixture {
    let f = fixture(kind, mdt).await;
    if real_mdt && kind.layout2() {
        with_real_metadata_table(&f).await;
    } else if real_mdt {
        with_real_v6_metadata_table(&f).await;
    }
    f
}

async fn crash_at_every_call_with(kind: Kind, mdt: bool, real_mdt: bool) -> usize {
    crash_at_every_call_after(kind, mdt, real_mdt, None).await
}

/// The fixture, restored to `first` if given (so the restore to T1 under test is a second one).
async fn prepared(kind: Kind, mdt: bool, real_mdt: bool, first: Option<&str>) -> Fixture {
    let f = build(kind, mdt, real_mdt).await;
    if let Some(t) = first {
        restore(&open(&f).await, t, &opts(false), None)
            .await
            .unwrap();
    }
    f
}

/// The requested times of the restore instants (pending or completed) on a table's timeline.
async fn restore_instants(table: &Table) -> Vec<String> {
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
async fn assert_resumable(
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

async fn crash_at_every_call_after(
    kind: Kind,
    mdt: bool,
    real_mdt: bool,
    first: Option<&str>,
) -> usize {
    let reference = prepared(kind, mdt, real_mdt, first).await;
    let counter = Arc::new(CountingInterceptor::new());
    let t = Table::open_storage(reference.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    restore(&t, T1, &opts(true), None).await.unwrap();
    let reference_snapshot = reference.snapshot().await;
    let expected = normalize(&reference_snapshot);
    let calls = counter.total() as usize;
    assert!(calls > 10, "suspiciously few calls: {calls}");

    for (mode, n) in (1..=calls).flat_map(|n| [(FailMode::Before, n), (FailMode::After, n)]) {
        let f = prepared(kind, mdt, real_mdt, first).await;
        let untouched = f.snapshot().await;
        let restores_before = restore_instants(&open(&f).await).await;
        let fail = Arc::new(FailNth::with_mode(&[], n as u64, mode));
        let first = match Table::open_storage(f.storage().with_interceptor(fail.clone())).await {
            Ok(t) => restore(&t, T1, &opts(true), None).await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert!(
            fail.fired(),
            "call {n} of {calls} was never reached ({mode:?})"
        );
        assert!(
            first.is_err(),
            "injected failure {mode:?} call {n} went unnoticed"
        );
        assert_resumable(
            &f,
            &untouched,
            &restores_before,
            &format!("{mode:?} call {n}"),
        )
        .await;
        let t = open(&f).await;
        restore(&t, T1, &opts(true), None)
            .await
            .unwrap_or_else(|e| panic!("rerun after a failure {mode:?} call {n}: {e}"));
        let raw = f.snapshot().await;
        // (Normalized names can coincide: a redundant extra restore would hide among them.)
        assert_eq!(
            raw.len(),
            reference_snapshot.len(),
            "file count after a failure {mode:?} call {n}"
        );
        let got = normalize(&raw);
        let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&got),
            names(&expected),
            "end state after a failure {mode:?} call {n}"
        );
        assert_eq!(
            got, expected,
            "end state bytes after a failure {mode:?} call {n}"
        );
    }
    calls * 2
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_then_rerun_ends_like_an_uninterrupted_one_cow_v6() {
    let n = crash_at_every_call(Kind::CowV6, false).await;
    eprintln!("cow v6: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_then_rerun_ends_like_an_uninterrupted_one_mor_v6() {
    let n = crash_at_every_call(Kind::MorV6, false).await;
    eprintln!("mor v6 (command blocks): {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_then_rerun_ends_like_an_uninterrupted_one_mor_v9_mdt(
) {
    let n = crash_at_every_call(Kind::MorV9, true).await;
    eprintln!("mor v9 + metadata table: {n} injection points");
}

/// A version-6 merge-on-read table whose metadata table hudi-keeper cannot read: the restore
/// deletes it. A crash at any call, the deletion's included, leaves the table as it was or
/// with the restore pending; the rerun ends like an uninterrupted restore.
#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_then_rerun_ends_like_an_uninterrupted_one_mor_v6_mdt_deleted(
) {
    let f = fixture(Kind::MorV6, true).await;
    let done = restore(&open(&f).await, T1, &opts(true), None)
        .await
        .unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Deleted);
    let n = crash_at_every_call(Kind::MorV6, true).await;
    eprintln!("mor v6 + metadata table deleted: {n} injection points");
}

/// Records the path of every write (put, create, delete) that reaches storage, in order.
#[derive(Debug, Default)]
struct Writes(std::sync::Mutex<Vec<String>>);

impl hudi_keeper_core::storage::Interceptor for Writes {
    fn before(
        &self,
        _op: hudi_keeper_core::storage::OpKind,
        _path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        Ok(())
    }

    fn after(
        &self,
        op: hudi_keeper_core::storage::OpKind,
        path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        use hudi_keeper_core::storage::OpKind;
        if matches!(
            op,
            OpKind::Put | OpKind::PutIfAbsent | OpKind::Delete | OpKind::PutIfMatch
        ) {
            self.0.lock().unwrap().push(path.to_string());
        }
        Ok(())
    }
}

/// A restore that deletes the metadata table writes its instant first (`.restore.requested`,
/// then `.restore.inflight`), and only then clears the table properties and removes
/// `.hoodie/metadata`: a crash in between leaves a pending restore that a rerun (or the daemon's
/// journal) continues, never a table with its metadata table gone and no restore recorded.
#[tokio::test]
async fn a_restore_that_deletes_the_metadata_table_records_its_instant_first() {
    for kind in [Kind::MorV9, Kind::MorV6, Kind::CowV6] {
        let f = fixture(kind, true).await;
        let writes = Arc::new(Writes::default());
        let t = Table::open_storage(f.storage().with_interceptor(writes.clone()))
            .await
            .unwrap();
        let done = restore(&t, T1, &opts(true), None).await.unwrap();
        assert_eq!(
            done.metadata_table,
            MetadataTableAction::Deleted,
            "{kind:?}"
        );
        let writes = writes.0.lock().unwrap().clone();
        let dir = tl(kind);
        let r = &done.restore_instant;
        assert_eq!(
            writes.get(..2),
            Some(
                &[
                    format!("{dir}/{r}.restore.requested"),
                    format!("{dir}/{r}.restore.inflight"),
                ][..]
            ),
            "{kind:?}: {writes:?}"
        );
        let mdt = writes
            .iter()
            .position(|w| w.starts_with(".hoodie/metadata/") || w.contains("hoodie.properties"))
            .unwrap_or_else(|| panic!("{kind:?}: the metadata table was not deleted: {writes:?}"));
        let first_child = writes
            .iter()
            .position(|w| w.contains(".rollback"))
            .unwrap_or_else(|| panic!("{kind:?}: no child rollback: {writes:?}"));
        assert!(mdt < first_child, "{kind:?}: {writes:?}");
        assert!(!f
            .snapshot()
            .await
            .keys()
            .any(|k| k.starts_with(".hoodie/metadata/")));
    }
}

/// A restore stopped right after writing its instant, whose metadata table was then half
/// deleted the other way round from hudi-keeper's order (`.hoodie/metadata` gone, its
/// partitions still listed in `hoodie.properties`, as a crash inside another tool's deletion
/// leaves it): the rerun continues the pending restore, clears the properties and ends like an
/// uninterrupted restore.
#[tokio::test]
async fn a_resumed_restore_finishes_deleting_a_half_deleted_metadata_table() {
    use hudi_keeper_core::storage::OpKind;
    for kind in [Kind::MorV9, Kind::MorV6] {
        let reference = fixture(kind, true).await;
        let done = restore(&open(&reference).await, T1, &opts(true), None)
            .await
            .unwrap();
        assert_eq!(
            done.metadata_table,
            MetadataTableAction::Deleted,
            "{kind:?}"
        );
        let expected = normalize(&reference.snapshot().await);

        let f = fixture(kind, true).await;
        // The first plain put is the properties' backup: the metadata table's deletion.
        let fail = Arc::new(FailNth::new(&[OpKind::Put], 1));
        let t = Table::open_storage(f.storage().with_interceptor(fail.clone()))
            .await
            .unwrap();
        restore(&t, T1, &opts(true), None).await.unwrap_err();
        assert!(fail.fired());
        let timeline = open(&f).await.timeline().await.unwrap();
        assert!(
            timeline.pending().any(|i| i.action == Action::Restore),
            "{kind:?}: the restore is pending"
        );
        let snap = f.snapshot().await;
        let props = String::from_utf8(snap[".hoodie/hoodie.properties"].clone()).unwrap();
        assert!(
            props.contains("hoodie.table.metadata.partitions=files\n"),
            "{props}"
        );
        for k in snap.keys().filter(|k| k.starts_with(".hoodie/metadata/")) {
            f.storage().delete(&rel(k)).await.unwrap();
        }
        let again = restore(&open(&f).await, T1, &opts(true), None)
            .await
            .unwrap();
        assert!(again.resumed, "{kind:?}");
        let pending: Vec<&str> = timeline
            .pending()
            .filter(|i| i.action == Action::Restore)
            .map(|i| i.requested_time.as_str())
            .collect();
        assert_eq!(pending, [again.restore_instant.as_str()], "{kind:?}");
        assert_eq!(normalize(&f.snapshot().await), expected, "{kind:?}");
    }
}

#[tokio::test]
async fn an_interrupted_savepoint_is_completed_by_creating_it_again() {
    let f = Fixture::build(Kind::CowV6, false).await;
    f.storage()
        .put(
            &rel(&format!(".hoodie/{T1}.savepoint.inflight")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let table = open(&f).await;
    assert!(list_savepoints(&table).await.unwrap()[0].metadata.is_none());
    create_savepoint(
        &table,
        &SavepointRequest {
            instant: Some(T1.into()),
            user: "u".into(),
            comment: "c".into(),
        },
        &LockOptions::none(),
    )
    .await
    .unwrap();
    let listed = list_savepoints(&table).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].metadata.as_ref().unwrap().file_count(), 2);
}

/// Hudi's `HoodieCleanMetadata` as far as hudi-keeper reads it: an Avro object container file
/// whose one record has `earliestCommitToRetain`.
fn clean_metadata(earliest_commit_to_retain: &str) -> Vec<u8> {
    fn long(out: &mut Vec<u8>, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        long(out, b.len() as i64);
        out.extend_from_slice(b);
    }
    let schema = r#"{"type":"record","name":"HoodieCleanMetadata","namespace":"org.apache.hudi.avro.model","fields":[{"name":"earliestCommitToRetain","type":"string"}]}"#;
    let sync = [7u8; 16];
    let mut out = b"Obj\x01".to_vec();
    long(&mut out, 1);
    bytes(&mut out, b"avro.schema");
    bytes(&mut out, schema.as_bytes());
    long(&mut out, 0);
    out.extend_from_slice(&sync);
    let mut record = Vec::new();
    bytes(&mut record, earliest_commit_to_retain.as_bytes());
    long(&mut out, 1);
    long(&mut out, record.len() as i64);
    out.extend_from_slice(&record);
    out.extend_from_slice(&sync);
    out
}

#[tokio::test]
async fn a_restore_to_a_commit_older_than_the_last_clean_retained_is_refused_before_anything_changes(
) {
    let f = Fixture::build(Kind::CowV8, false).await;
    // A clean after T2 kept T2 and later: older file versions of T1's view may be gone.
    let clean = "20240101013000000";
    let s = f.storage();
    for (name, b) in [
        (format!(".hoodie/timeline/{clean}.clean.requested"), vec![]),
        (format!(".hoodie/timeline/{clean}.clean.inflight"), vec![]),
        (
            format!(".hoodie/timeline/{clean}_20240101013000500.clean"),
            clean_metadata(T2),
        ),
    ] {
        s.put(&rel(&name), b.into()).await.unwrap();
    }
    let before = f.snapshot().await;
    let table = open(&f).await;
    for e in [
        restore(&table, T1, &opts(false), None).await.unwrap_err(),
        preview_restore(&table, T1, &opts(false)).await.unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("the last clean retained") && e.contains(T2),
            "{e}"
        );
    }
    let after = f.snapshot().await;
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(changed.is_empty(), "the table changed: {changed:?}");
    // The oldest retained commit itself is a restore point.
    let p = preview_restore(&table, T2, &opts(false)).await.unwrap();
    assert_eq!(p.instants.len(), 1);
    assert_eq!(p.instants[0].instant, TF);
}

/// A restore whose second undone instant cannot get a child rollback plan is refused before it
/// changes anything: no restore scheduled, the metadata table not deleted, the first instant
/// not undone. (The CLI previews first; the daemon's API does not, so the engine must.)
#[tokio::test]
async fn a_restore_whose_second_instant_cannot_be_planned_is_refused_before_anything_changes() {
    // Version 6 merge-on-read: T2's commit metadata, which says which log files it appended
    // to, is unreadable. (Its metadata table would be deleted first.)
    let f = fixture(Kind::MorV6, true).await;
    f.storage()
        .put(
            &rel(&format!(".hoodie/{T2}.deltacommit")),
            b"not json".to_vec().into(),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let table = open(&f).await;
    let e = restore(&table, T1, &opts(true), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("unreadable"), "{e}");
    assert_eq!(f.snapshot().await, before);

    // A second failed write (undone after TF) whose marker names a file of another instant.
    let f = fixture(Kind::CowV8, true).await;
    let te = "20240101015000000";
    f.start_write(te).await;
    f.storage()
        .put(
            &rel(&format!(
                ".hoodie/.temp/{te}/p1/fg1-0_0-1-1_{T1}.parquet.marker.MERGE"
            )),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let table = open(&f).await;
    let e = restore(&table, T1, &opts(true), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(te), "{e}");
    assert_eq!(f.snapshot().await, before);
}

/// The metadata table's own children are planned before anything changes too: a pending
/// metadata-table deltacommit whose marker names another instant's file refuses the restore
/// with the table (and its metadata table) unchanged.
#[tokio::test]
async fn a_restore_whose_metadata_table_child_cannot_be_planned_is_refused_before_anything_changes()
{
    let f = fixture(Kind::MorV9, true).await;
    with_real_metadata_table(&f).await;
    let s = f.storage();
    let m = ".hoodie/metadata";
    let te = "20240101023000000";
    s.put(
        &rel(&format!("{m}/.hoodie/timeline/{te}.deltacommit.requested")),
        bytes::Bytes::new(),
    )
    .await
    .unwrap();
    s.put(
        &rel(&format!("{m}/.hoodie/timeline/{te}.deltacommit.inflight")),
        bytes::Bytes::new(),
    )
    .await
    .unwrap();
    s.put(
        &rel(&format!(
            "{m}/.hoodie/.temp/{te}/files/files-0000-0_0-1-1_{T1}.hfile.marker.CREATE"
        )),
        bytes::Bytes::new(),
    )
    .await
    .unwrap();
    let table = open(&f).await;
    let before = f.snapshot().await;
    let e = restore(&table, T1, &opts(true), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(te), "{e}");
    assert_eq!(f.snapshot().await, before);
}
