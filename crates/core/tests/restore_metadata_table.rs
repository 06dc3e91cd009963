//! Restores and the metadata table: restored to the same point as Hudi 1.x and Hudi 0.15
//! restore it, and restored again by a second restore to an earlier point.

use std::collections::BTreeMap;

use common::fixtures::{Kind, MDT_INIT, T1, T2, TF};
use hudi_keeper_core::exec::restore::{preview_restore, restore, MetadataTableAction};
use hudi_keeper_core::format::restore::{RestoreMetadata, RestorePlan};
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{
    as_version_5, open, restore_files, restore_options as opts, savepointed as fixture,
    savepointed_with as build, tl, with_real_metadata_table, with_real_v6_metadata_table,
};

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

/// Table version 5 (Hudi 0.12/0.13) with a metadata table: the restore is recorded in it as
/// Hudi 0.13.1 records one (spark-0.13-restore observations): the child rollbacks write nothing
/// there; one deltacommit at the restore instant marks the files of every undone instant whose
/// metadata-table deltacommit completed deleted; nothing in the metadata table is rolled back or
/// restored, and neither `hoodie.properties` changes.
#[tokio::test]
async fn a_version_5_restore_is_recorded_in_the_metadata_table_as_hudi_0_13_records_it() {
    use hudi_keeper_core::format::hfile;
    use hudi_keeper_core::format::log_block::read_blocks;
    use hudi_keeper_core::format::metadata_record::{decode_files_record, LOG_BLOCK_SCHEMA_V5};
    let f = fixture(Kind::CowV6, true).await;
    as_version_5(&f).await;
    let m = ".hoodie/metadata";
    let before = f.snapshot().await;
    let table = open(&f).await;
    let preview = preview_restore(&table, T1, &opts(true)).await.unwrap();
    assert_eq!(preview.metadata_table, MetadataTableAction::Recorded);
    let done = restore(&table, T1, &opts(true), None).await.unwrap();
    assert_eq!(done.metadata_table, MetadataTableAction::Recorded);
    let s = done.restore_instant.clone();
    let after = f.snapshot().await;
    for p in [
        ".hoodie/hoodie.properties",
        &format!("{m}/.hoodie/hoodie.properties"),
    ] {
        assert_eq!(after[p], before[p], "{p}");
    }
    // The metadata table: its deltacommits of T2 and TF stay; one new completed deltacommit at
    // the restore instant; no rollback or restore there.
    let mtl = format!("{m}/.hoodie");
    for t in [T2, TF] {
        assert_eq!(
            after[&format!("{mtl}/{t}.deltacommit")],
            before[&format!("{mtl}/{t}.deltacommit")]
        );
    }
    let new: Vec<&String> = after
        .keys()
        .filter(|k| k.starts_with(&format!("{mtl}/")) && !before.contains_key(*k))
        .collect();
    let want: Vec<String> = ["", ".inflight", ".requested"]
        .iter()
        .map(|x| format!("{mtl}/{s}.deltacommit{x}"))
        .collect();
    assert_eq!(new, want.iter().collect::<Vec<_>>());
    // Its block: the undone instants' base files marked deleted, under Hudi 0.13's schema.
    let log = &after[&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.4_0-0-0")];
    let blocks = read_blocks(log).unwrap();
    assert_eq!(blocks.len(), 1);
    let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V5).unwrap();
    let hf = hfile::read(blocks[0].content).unwrap();
    let mut deleted = Vec::new();
    for c in &hf.cells {
        let (_, files) = decode_files_record(&schema, &c.value).unwrap();
        for (name, (_, d)) in files {
            assert!(d, "{name} is not marked deleted");
            deleted.push(name);
        }
    }
    for t in [T2, TF] {
        assert!(
            deleted
                .iter()
                .any(|n| n.ends_with(&format!("_{t}.parquet"))),
            "{t}: {deleted:?}"
        );
    }
    assert!(!after.keys().any(|k| k.starts_with(&format!("{mtl}/.temp"))));
}

/// Version 5: a restore point older than the metadata table's timeline (Hudi 0.13's
/// restoreToSavepoint deletes the metadata table then) and another pending metadata-table
/// instant are refused before anything changes.
#[tokio::test]
async fn a_version_5_restore_the_metadata_table_cannot_record_is_refused_before_anything_changes() {
    let m = ".hoodie/metadata/.hoodie";
    for case in ["older", "pending"] {
        let f = fixture(Kind::CowV6, true).await;
        as_version_5(&f).await;
        let needle = match case {
            "older" => {
                for x in [".requested", ".inflight", ""] {
                    for t in [MDT_INIT, T1] {
                        f.delete(&format!("{m}/{t}.deltacommit{x}")).await;
                    }
                }
                "older than the metadata table's timeline"
            }
            _ => {
                for x in ["requested", "inflight"] {
                    f.put(&format!("{m}/20240101030000000.deltacommit.{x}"), b"")
                        .await;
                }
                "pending deltacommit 20240101030000000"
            }
        };
        let before = f.snapshot().await;
        let table = open(&f).await;
        let err = restore(&table, T1, &opts(true), None)
            .await
            .map(|d| format!("{d:?}"))
            .unwrap_or_else(|e| e.to_string());
        assert!(err.contains(needle), "{case}: {err}");
        assert_eq!(f.snapshot().await, before, "{case}");
    }
}

/// Table version 5 (Hudi 0.12/0.13): what Hudi 0.13's restore does with what a metadata table
/// left behind (`.hoodie/metadata/` without its `hoodie.properties`) has not been checked
/// against Hudi 0.13, so a restore that would delete it is refused before anything changes, the
/// preview too.
#[tokio::test]
async fn a_version_5_restore_leaves_metadata_table_leftovers_alone_and_changes_nothing() {
    let f = fixture(Kind::CowV6, false).await;
    as_version_5(&f).await;
    f.put(
        ".hoodie/metadata/files/.files-0000-0_00000000000000.log.1_0-1-0",
        b"left",
    )
    .await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let preview = preview_restore(&table, T1, &opts(true))
        .await
        .map(|p| format!("{p:?}"))
        .unwrap_or_else(|e| e.to_string());
    assert!(preview.contains("version 5"), "{preview}");
    let err = restore(&table, T1, &opts(true), None)
        .await
        .map(|d| format!("{d:?}"))
        .unwrap_or_else(|e| e.to_string());
    assert!(err.contains("version 5"), "{err}");
    assert_eq!(f.snapshot().await, before);
}
