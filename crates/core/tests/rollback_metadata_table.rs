//! The rollback engine and the metadata table: Hudi 0.15's records of a rollback and rollbacks
//! of the metadata table's own deltacommits, and metadata-table compactions that block a
//! rollback or do not.

use common::fixtures::{bump, rel, Fixture, Kind, MDT_INIT, T1, TF};
use hudi_keeper_core::exec::rollback::{preview, rollback, MetadataTableOutcome, Selection};
use hudi_keeper_core::format::log_block::is_rollback_block_for;
use hudi_keeper_core::format::rollback::RollbackMetadata;
use hudi_keeper_core::Error;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{
    as_version_5, assert_rollback_refused_unchanged, assert_unchanged, completed_rollback, open,
    rollback_options as opts, rollback_plan_bytes,
};

/// Table version 6 (Hudi 0.15) with a metadata table whose deltacommit of the failed write
/// completed: the rollback is recorded in the metadata table as a deltacommit at R (for
/// merge-on-read an HFile data block of files-partition records in a new log version of the
/// `files` slice), then the metadata table's deltacommit of the failed write is rolled back at
/// R006 with a rollback command block, as Hudi 0.15 does.
#[tokio::test]
async fn v6_mor_with_metadata_table_records_the_rollback_and_rolls_back_its_deltacommit() {
    use hudi_keeper_core::format::hfile;
    use hudi_keeper_core::format::log_block::read_blocks;
    let f = Fixture::build(Kind::MorV6, true).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::RolledBack);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    let m = ".hoodie/metadata";
    // The deltacommit at R, completed, listing the log file it appended.
    for s in [".requested", ".inflight", ""] {
        assert!(
            after.contains_key(&format!("{m}/.hoodie/{r}.deltacommit{s}")),
            "{r}.deltacommit{s}"
        );
    }
    let slice = format!("{m}/files/.files-0000-0_{MDT_INIT}");
    let records_log = format!("{slice}.log.4_0-0-0");
    let stats = String::from_utf8(after[&format!("{m}/.hoodie/{r}.deltacommit")].clone()).unwrap();
    assert!(stats.contains(".log.4_0-0-0"), "{stats}");
    // Its block: an HFile of one files record, for p1, listing the data table's rollback log
    // file and the failed write's log file.
    let blocks = read_blocks(&after[&records_log]).expect("log blocks");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].header.block_type, 4);
    let hf = hfile::read(blocks[0].content).expect("an HFile");
    let rows: Vec<String> = hf
        .cells
        .iter()
        .map(|c| String::from_utf8_lossy(&c.row).into_owned())
        .collect();
    assert_eq!(rows, vec!["p1".to_string()]);
    let value = String::from_utf8_lossy(&hf.cells[0].value).into_owned();
    assert!(
        value.contains(&format!(".fg1-0_{T1}.log.1_0-9-9")),
        "{value}"
    );
    assert!(
        value.contains(&format!(".fg1-0_{T1}.log.2_1-0-1")),
        "{value}"
    );
    // The metadata table's rollback of TF at R006: a command block for the log file TF
    // appended, TF's timeline files gone.
    let own = format!("{r}006");
    let block = &after[&format!("{slice}.log.5_1-0-1")];
    assert!(is_rollback_block_for(block, &own, TF));
    assert!(after.contains_key(&format!("{slice}.log.3_0-0-0")));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/{TF}"))));
    let (name, mdt_meta) = completed_rollback(&f, &format!("{m}/.hoodie")).await;
    assert_eq!(name, format!("{m}/.hoodie/{own}.rollback"));
    assert_eq!(mdt_meta.commits_rollback, vec![TF.to_string()]);
    // No marker folder is left in the metadata table.
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/.temp"))));
}

/// Copy-on-write, and a failed write that never reached the metadata table: only the
/// deltacommit at R, with no block and no write stats, as Hudi 0.15 writes it.
#[tokio::test]
async fn v6_cow_rollback_is_recorded_in_the_metadata_table_without_a_block() {
    let f = Fixture::build(Kind::CowV6, true).await;
    let m = ".hoodie/metadata";
    for s in [".requested", ".inflight", ""] {
        f.delete(&format!("{m}/.hoodie/{TF}.deltacommit{s}")).await;
    }
    let logs_before: Vec<String> = f
        .snapshot()
        .await
        .into_keys()
        .filter(|k| k.starts_with(&format!("{m}/files/")))
        .collect();
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::Recorded);
    let r = &done[0].rollback_instant;
    let after = f.snapshot().await;
    assert_no_write_stats(&after, &format!("{m}/.hoodie/{r}.deltacommit"));
    let completed: serde_json::Value =
        serde_json::from_slice(&after[&format!("{m}/.hoodie/{r}.deltacommit")]).unwrap();
    assert_eq!(completed["operationType"], "UPSERT_PREPPED");
    let logs_after: Vec<String> = after
        .into_keys()
        .filter(|k| k.starts_with(&format!("{m}/files/")))
        .collect();
    assert_eq!(logs_after, logs_before);
}

/// The metadata table's deltacommit of the failed write is unreadable, so its rollback cannot be
/// planned: refused before anything changes (not after the data table's deletes).
#[tokio::test]
async fn v6_with_an_unreadable_metadata_table_deltacommit_is_refused_before_anything_changes() {
    let f = Fixture::build(Kind::MorV6, true).await;
    f.put(&format!(".hoodie/metadata/.hoodie/{TF}.deltacommit"), b"{")
        .await;
    assert_rollback_refused_unchanged(&f, "unreadable").await;
}

/// A file slice of a metadata-table compaction that never completed (no commit on its
/// timeline) is ignored by Hudi's file-system view: the rollback's block goes to the latest
/// committed slice.
#[tokio::test]
async fn v6_rollback_block_goes_to_the_latest_committed_files_slice() {
    let f = Fixture::build(Kind::MorV6, true).await;
    let m = ".hoodie/metadata";
    let orphan = "20240101015000000001";
    f.put(
        &format!("{m}/files/files-0000-0_0-0-0_{orphan}.hfile"),
        b"hfile",
    )
    .await;
    f.put(
        &format!("{m}/files/.files-0000-0_{orphan}.log.1_0-0-0"),
        b"x",
    )
    .await;
    let table = open(&f).await;
    rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    let after = f.snapshot().await;
    assert!(after.contains_key(&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.4_0-0-0")));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/files/.files-0000-0_{orphan}.log.2"))));
}

/// The writer died inside its metadata-table write (its metadata-table deltacommit pending):
/// that deltacommit is rolled back first, at a fresh instant (Hudi 0.15's EAGER pre-step), then
/// the rollback is recorded at R; the block it appended stays and is never read.
#[tokio::test]
async fn v6_the_failed_writes_pending_metadata_table_deltacommit_is_rolled_back_first() {
    let f = Fixture::build(Kind::MorV6, true).await;
    let m = ".hoodie/metadata";
    f.delete(&format!("{m}/.hoodie/{TF}.deltacommit")).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::RolledBack);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/{TF}"))));
    let rollbacks: Vec<&String> = after
        .keys()
        .filter(|k| k.starts_with(&format!("{m}/.hoodie/")) && k.ends_with(".rollback"))
        .collect();
    assert_eq!(rollbacks.len(), 1, "{rollbacks:?}");
    let p = rollbacks[0]
        .rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".rollback")
        .to_string();
    assert_ne!(p, format!("{r}006"));
    assert!(p.len() == r.len() && p > r, "{p} after {r}");
    let meta = RollbackMetadata::from_avro(&after[rollbacks[0]]).unwrap();
    assert_eq!(meta.commits_rollback, vec![TF.to_string()]);
    assert!(after.contains_key(&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.3_0-0-0")));
    assert!(after.contains_key(&format!("{m}/.hoodie/{r}.deltacommit")));
    assert!(after.contains_key(&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.4_0-0-0")));
}

/// A pending metadata-table deltacommit of another write (Hudi 0.15 rolls it back first; a v6
/// block cannot be attributed by its file name): refused before anything changes.
#[tokio::test]
async fn v6_with_a_pending_metadata_table_deltacommit_is_refused_and_nothing_changes() {
    let f = Fixture::build(Kind::CowV6, true).await;
    let m = ".hoodie/metadata";
    f.put(
        &format!("{m}/.hoodie/20240101030000000.deltacommit.requested"),
        b"",
    )
    .await;
    f.put(
        &format!("{m}/.hoodie/20240101030000000.deltacommit.inflight"),
        b"",
    )
    .await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("pending deltacommit 20240101030000000"),
        "{err}"
    );
    assert_eq!(f.snapshot().await, before);
}

/// A completed metadata-table compaction requested at `tc` (layout 2). The failed write's
/// metadata-table deltacommit `TF` completed at `bump(TF)`.
async fn compact_metadata_table_at(f: &Fixture, tc: &str) {
    let dir = ".hoodie/metadata/.hoodie/timeline";
    for (name, bytes) in [
        (format!("{dir}/{tc}.compaction.requested"), &b""[..]),
        (format!("{dir}/{tc}.compaction.inflight"), &b""[..]),
        (format!("{dir}/{tc}_{}.commit", bump(tc)), &b"{}"[..]),
    ] {
        f.storage()
            .put(&rel(&name), bytes::Bytes::copy_from_slice(bytes))
            .await
            .unwrap();
    }
}

/// The metadata table's compaction requested after the failed write's deltacommit completed:
/// the compacted files may include it.
async fn compact_metadata_table_after_the_failed_write(f: &Fixture) {
    assert!(COMPACTED_AFTER > bump(TF).as_str());
    compact_metadata_table_at(f, COMPACTED_AFTER).await;
}

const COMPACTED_AFTER: &str = "20240101020001000";

#[tokio::test]
async fn a_metadata_table_compacted_after_the_instant_is_refused_before_anything_changes() {
    // A fresh rollback.
    let f = Fixture::build(Kind::MorV9, true).await;
    compact_metadata_table_after_the_failed_write(&f).await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.to_string().contains("compacted"), "{err}");
    assert!(err.to_string().contains("restore"), "the way out: {err}");
    assert_unchanged(&before, &f.snapshot().await, "refused");
    // The dry run says so too.
    let err = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("compacted"), "{err}");

    // A pending rollback of the instant (scheduled before the compaction) is not resumed either.
    let f = Fixture::build(Kind::MorV9, true).await;
    let plan = rollback_plan_bytes(&f).await;
    f.storage()
        .put(
            &rel(".hoodie/timeline/20240101030000000.rollback.requested"),
            bytes::Bytes::from(plan),
        )
        .await
        .unwrap();
    compact_metadata_table_after_the_failed_write(&f).await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("compacted"), "{err}");
    assert_unchanged(&before, &f.snapshot().await, "refused");

    // A compaction scheduled after the deltacommit completed and still pending may list its
    // files: refused too (stricter than Hudi, whose check sees completed compactions only).
    let f = Fixture::build(Kind::MorV9, true).await;
    let dir = ".hoodie/metadata/.hoodie/timeline";
    f.storage()
        .put(
            &rel(&format!("{dir}/{COMPACTED_AFTER}.compaction.requested")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("pending"), "{err}");
    assert_unchanged(&before, &f.snapshot().await, "refused");
}

#[tokio::test]
async fn a_metadata_table_compaction_requested_before_the_deltacommit_completed_does_not_block_the_rollback(
) {
    // Hudi 1.1.1's rule: the compaction (requested between TF and its metadata-table
    // deltacommit's completion) cannot include the deltacommit, which is rolled back.
    let tc = "20240101020000001";
    assert!(TF < tc && tc < bump(TF).as_str());
    let f = Fixture::build(Kind::MorV9, true).await;
    compact_metadata_table_at(&f, tc).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::RolledBack);
    let after = f.snapshot().await;
    let m = ".hoodie/metadata";
    assert!(!after.contains_key(&format!("{m}/files/.files-0000-0_{TF}.log.1_0-1-0")));
    assert!(!after
        .keys()
        .any(|k| k.contains(&format!("{m}/.hoodie/timeline/{TF}"))));
    // The compaction stays as it was.
    assert!(after.contains_key(&format!("{m}/.hoodie/timeline/{tc}_{}.commit", bump(tc))));
}

/// The completed metadata-table deltacommit at `path` records no write stats (no block).
fn assert_no_write_stats(after: &std::collections::BTreeMap<String, Vec<u8>>, path: &str) {
    let completed: serde_json::Value = serde_json::from_slice(&after[path]).unwrap();
    assert_eq!(
        completed["partitionToWriteStats"],
        serde_json::json!({}),
        "{path}"
    );
}

/// The files-partition records of the HFile data block in the metadata-table log file `log`:
/// key -> file name -> (size, deleted), decoded under Hudi 0.13's block schema.
fn v5_records(
    log: &[u8],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, (i64, bool)>> {
    use hudi_keeper_core::format::hfile;
    use hudi_keeper_core::format::log_block::read_blocks;
    use hudi_keeper_core::format::metadata_record::{decode_files_record, LOG_BLOCK_SCHEMA_V5};
    let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V5).unwrap();
    let blocks = read_blocks(log).expect("log blocks");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].header.block_type, 4);
    let schema_header = blocks[0]
        .header
        .entries
        .iter()
        .find(|(k, _)| *k == 2)
        .map(|(_, v)| v.as_str());
    assert_eq!(schema_header, Some(LOG_BLOCK_SCHEMA_V5));
    let hf = hfile::read(blocks[0].content).expect("an HFile");
    hf.cells
        .iter()
        .map(|c| {
            let (ty, files) = decode_files_record(&schema, &c.value).expect("a v5 record");
            assert_eq!(ty, 2);
            (String::from_utf8_lossy(&c.row).into_owned(), files)
        })
        .collect()
}

/// Table version 5 (Hudi 0.12/0.13) whose failed write completed its metadata-table
/// deltacommit: as Hudi 0.13.1 does (spark-0.13 observations, `cow-mdt-mdtdone`), a
/// deltacommit at R whose block marks the deleted files deleted, and the metadata table's
/// deltacommit of the failed write stays completed (no `R006` rollback).
#[tokio::test]
async fn v5_records_the_deleted_files_when_the_failed_write_completed_in_the_metadata_table() {
    let f = Fixture::build(Kind::CowV6, true).await;
    as_version_5(&f).await;
    let m = ".hoodie/metadata";
    let before = f.snapshot().await;
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::Recorded);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    for s in [".requested", ".inflight", ""] {
        assert!(after.contains_key(&format!("{m}/.hoodie/{r}.deltacommit{s}")));
    }
    assert_eq!(
        after[&format!("{m}/.hoodie/{TF}.deltacommit")],
        before[&format!("{m}/.hoodie/{TF}.deltacommit")]
    );
    assert!(!after
        .keys()
        .any(|k| k.ends_with(".rollback") && k.starts_with(m)));
    let log = format!("{m}/files/.files-0000-0_{MDT_INIT}.log.4_0-0-0");
    let records = v5_records(&after[&log]);
    let deleted = |p: &str, name: &str| {
        assert_eq!(records[p][name], (0, true), "{p}/{name}: {records:?}");
    };
    deleted("p1", &format!("fg4-0_0-9-9_{TF}.parquet"));
    deleted("p2", &format!("missed-0_0-9-9_{TF}.parquet"));
    let stats = String::from_utf8(after[&format!("{m}/.hoodie/{r}.deltacommit")].clone()).unwrap();
    assert!(stats.contains(".log.4_0-0-0"), "{stats}");
    // The data table's completed rollback is in Hudi 0.13's schema; hoodie.properties of both
    // tables are untouched (never upgraded).
    for props in [
        ".hoodie/hoodie.properties",
        &format!("{m}/.hoodie/hoodie.properties"),
    ] {
        assert_eq!(after[props], before[props], "{props}");
    }
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/.temp"))));
}

/// Version 5: only a completed metadata-table deltacommit of the failed instant makes Hudi 0.13
/// record the deleted files (`processRollbackMetadata`'s `containsInstant`); a metadata-table
/// compaction at or after it does not (its writer's `wasSynced` can only drop them): the
/// copy-on-write rollback's deltacommit at R stays empty.
#[tokio::test]
async fn v5_a_metadata_table_compaction_after_the_instant_does_not_make_it_synced() {
    let f = Fixture::build(Kind::CowV6, true).await;
    as_version_5(&f).await;
    let m = ".hoodie/metadata";
    for s in [".requested", ".inflight", ""] {
        f.delete(&format!("{m}/.hoodie/{TF}.deltacommit{s}")).await;
    }
    for s in ["compaction.requested", "compaction.inflight", "commit"] {
        f.put(&format!("{m}/.hoodie/{TF}001.{s}"), b"{}").await;
    }
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::Recorded);
    let r = &done[0].rollback_instant;
    let after = f.snapshot().await;
    assert_no_write_stats(&after, &format!("{m}/.hoodie/{r}.deltacommit"));
    assert!(!after.contains_key(&format!("{m}/files/.files-0000-0_{MDT_INIT}.log.4_0-0-0")));
}

/// Version 5, the failed write never reached the metadata table (copy-on-write): an empty
/// deltacommit at R, no block, as Hudi 0.13.1 writes it (spark-0.13 observations, `cow-mdt`).
#[tokio::test]
async fn v5_without_the_failed_write_in_the_metadata_table_writes_an_empty_deltacommit() {
    let f = Fixture::build(Kind::CowV6, true).await;
    as_version_5(&f).await;
    let m = ".hoodie/metadata";
    for s in [".requested", ".inflight", ""] {
        f.delete(&format!("{m}/.hoodie/{TF}.deltacommit{s}")).await;
    }
    let files_before: Vec<String> = f
        .snapshot()
        .await
        .into_keys()
        .filter(|k| k.starts_with(&format!("{m}/files/")))
        .collect();
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::Recorded);
    let r = &done[0].rollback_instant;
    let after = f.snapshot().await;
    assert_no_write_stats(&after, &format!("{m}/.hoodie/{r}.deltacommit"));
    let files_after: Vec<String> = after
        .into_keys()
        .filter(|k| k.starts_with(&format!("{m}/files/")))
        .collect();
    assert_eq!(files_after, files_before);
}

/// Version 5, the writer died inside its metadata-table write: Hudi 0.13.1's metadata writer
/// rolls that pending deltacommit back first at a fresh instant R' after R (spark-0.13
/// observations, `-mdtinflight`), listing-based from its workload profile: a rollback command
/// block for the `files` slice, its plan naming the metadata table's base path with size 0.
/// Then the deltacommit at R records nothing deleted (the write never completed there).
#[tokio::test]
async fn v5_the_failed_writes_pending_metadata_table_deltacommit_is_rolled_back_at_a_later_instant()
{
    use hudi_keeper_core::format::log_block::is_rollback_block_for;
    let f = Fixture::build(Kind::CowV6, true).await;
    as_version_5(&f).await;
    let m = ".hoodie/metadata";
    f.delete(&format!("{m}/.hoodie/{TF}.deltacommit")).await;
    let profile = serde_json::json!({
        "partitionToWriteStats": { "files": [
            { "fileId": "", "path": null, "prevCommit": "null", "totalWriteBytes": 0 },
            { "fileId": "files-0000-0", "path": null, "prevCommit": MDT_INIT, "totalWriteBytes": 0 },
        ]},
        "compacted": false, "extraMetadata": {}, "operationType": "UPSERT_PREPPED",
    });
    f.put(
        &format!("{m}/.hoodie/{TF}.deltacommit.inflight"),
        profile.to_string().as_bytes(),
    )
    .await;
    f.put(
        &format!(
            "{m}/.hoodie/.temp/{TF}/files/files-0000-0_0-25-40_{MDT_INIT}.hfile.marker.APPEND"
        ),
        b"",
    )
    .await;
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::RolledBack);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/{TF}"))));
    let (name, meta) = completed_rollback(&f, &format!("{m}/.hoodie")).await;
    let p = name
        .rsplit('/')
        .next()
        .unwrap()
        .trim_end_matches(".rollback")
        .to_string();
    assert!(p.len() == r.len() && p > r, "{p} after {r}");
    assert_eq!(meta.commits_rollback, vec![TF.to_string()]);
    let plan = hudi_keeper_core::format::rollback::RollbackPlan::from_avro(
        &after[&format!("{m}/.hoodie/{p}.rollback.requested")],
    )
    .unwrap();
    let reqs = plan.requests.unwrap();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let root = format!("{}/{m}", f.uri);
    assert_eq!(
        reqs[1].log_blocks_to_be_deleted,
        Some(std::collections::BTreeMap::from([(root, 0)]))
    );
    // R' appended the command block as log version 4 (after T1, T2, TF's 1..3). The
    // deltacommit at R is empty (copy-on-write, nothing deleted is recorded: the write never
    // completed there), as in Hudi 0.13.1's `cow-mdt-mdtinflight`.
    let slice = format!("{m}/files/.files-0000-0_{MDT_INIT}");
    assert!(is_rollback_block_for(
        &after[&format!("{slice}.log.4_1-0-1")],
        &p,
        TF
    ));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{slice}.log.5"))));
    assert_no_write_stats(&after, &format!("{m}/.hoodie/{r}.deltacommit"));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!("{m}/.hoodie/.temp"))));
}

/// Version 5: what hudi-keeper does not know how Hudi 0.13 handles is refused before anything
/// changes, the dry run too: another write's pending metadata-table deltacommit, metadata-table
/// partitions besides `files`, a metadata table its `hoodie.properties` does not list.
#[tokio::test]
async fn v5_metadata_tables_it_does_not_understand_are_refused_before_anything_changes() {
    let m = ".hoodie/metadata";
    let cases: [(&str, &str); 3] = [
        ("pending", "pending deltacommit 20240101030000000"),
        ("partitions", "partitions besides `files` (column_stats)"),
        ("unlisted", "lists no partition of"),
    ];
    for (case, needle) in cases {
        let f = Fixture::build(Kind::CowV6, true).await;
        as_version_5(&f).await;
        let props =
            String::from_utf8(f.snapshot().await[".hoodie/hoodie.properties"].clone()).unwrap();
        match case {
            "pending" => {
                for s in ["requested", "inflight"] {
                    f.put(
                        &format!("{m}/.hoodie/20240101030000000.deltacommit.{s}"),
                        b"",
                    )
                    .await;
                }
            }
            "partitions" => {
                let p = props.replace(
                    "hoodie.table.metadata.partitions=files",
                    "hoodie.table.metadata.partitions=files,column_stats",
                );
                assert_ne!(p, props);
                f.put(".hoodie/hoodie.properties", p.as_bytes()).await;
            }
            _ => {
                let p = props.replace("hoodie.table.metadata.partitions=files", "");
                assert_ne!(p, props);
                f.put(".hoodie/hoodie.properties", p.as_bytes()).await;
            }
        }
        assert_rollback_refused_unchanged(&f, needle).await;
        let before = f.snapshot().await;
        let err = preview(&open(&f).await, &Selection::AllFailed, &opts())
            .await
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|e| e.to_string());
        assert!(err.contains(needle), "{case}: {err}");
        assert_eq!(f.snapshot().await, before);
    }
    // Without a metadata table the same table rolls back, `hoodie.properties` untouched.
    let f = Fixture::build(Kind::CowV6, false).await;
    as_version_5(&f).await;
    let before = f.snapshot().await[".hoodie/hoodie.properties"].clone();
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::NotInUse);
    assert_eq!(f.snapshot().await[".hoodie/hoodie.properties"], before);
}
