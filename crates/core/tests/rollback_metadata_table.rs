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
    let completed: serde_json::Value =
        serde_json::from_slice(&after[&format!("{m}/.hoodie/{r}.deltacommit")]).unwrap();
    assert_eq!(completed["partitionToWriteStats"], serde_json::json!({}));
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

/// Table version 5 (Hudi 0.12/0.13) with a metadata table: Hudi 0.13 records a rollback there
/// differently from 0.15 (docs/compatibility.md), unchecked against real Hudi, so the rollback is
/// refused before anything changes, the dry run too. (The fixture's merge-on-read write has a
/// 0.14+ APPEND marker named after its log file, which version 5 refuses first.)
#[tokio::test]
async fn v5_with_a_metadata_table_is_refused_before_anything_changes() {
    for (kind, needle) in [
        (Kind::CowV6, "has a metadata table"),
        (Kind::MorV6, "version 5"),
    ] {
        let f = Fixture::build(kind, true).await;
        as_version_5(&f).await;
        assert_rollback_refused_unchanged(&f, needle).await;
        let before = f.snapshot().await;
        let err = preview(&open(&f).await, &Selection::AllFailed, &opts())
            .await
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(|e| e.to_string());
        assert!(err.contains(needle), "{err}");
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
