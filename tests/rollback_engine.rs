//! The rollback engine on hand-made tables of every kind: what it deletes, what it writes, and
//! that a crash at any storage call, then a rerun, ends where an uninterrupted rollback ends.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::fixtures::{bump, rel, Fixture, Kind, MDT_INIT, T1, T2, TF};
use hudi_keeper_core::exec::rollback::{
    preview, rollback, MetadataTableOutcome, RollbackOptions, Selection,
};
use hudi_keeper_core::format::log_block::is_rollback_block_for;
use hudi_keeper_core::format::rollback::{RollbackMetadata, RollbackPlan};
use hudi_keeper_core::storage::testing::{CountingInterceptor, FailMode, FailNth};
use hudi_keeper_core::storage::OpKind;
use hudi_keeper_core::{Error, Table};

/// Default options, except that a pending rollback is taken over at once (the tests' own
/// interrupted rollbacks are seconds old), and the fixture's failed write (no heartbeat file,
/// written just now) is judged failed: its writers are LAZY and no minimum age applies.
fn opts() -> RollbackOptions {
    let mut o = RollbackOptions {
        lazy_writers: Some(hudi_keeper_core::protocol::detect::LazyWritersEvidence::Assumed),
        ..RollbackOptions::default()
    };
    o.heartbeat.min_instant_age = std::time::Duration::ZERO;
    o.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    o
}

async fn open(f: &Fixture) -> Table {
    Table::open_storage(f.storage())
        .await
        .expect("open fixture")
}

fn names(snapshot: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    snapshot.keys().cloned().collect()
}

/// Replace the rollback's instant and completion times, which differ run to run.
fn normalize(snapshot: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    let rollback_times: Vec<String> = snapshot
        .keys()
        .filter_map(|k| k.rsplit('/').next())
        .filter(|n| n.contains(".rollback"))
        .filter_map(|n| n.split(['.', '_']).next())
        .map(str::to_string)
        .collect();
    snapshot
        .iter()
        .map(|(k, v)| {
            let segments: Vec<String> = k
                .split('/')
                .map(|seg| match seg.split_once('.') {
                    Some((times, rest)) if rest.starts_with("rollback") => {
                        if times.contains('_') {
                            format!("<R>_<C>.{rest}")
                        } else {
                            format!("<R>.{rest}")
                        }
                    }
                    _ if rollback_times.iter().any(|t| t == seg) => "<R>".to_string(),
                    // The metadata-table deltacommit that records a v6 rollback is named R.
                    Some((time, rest)) if rollback_times.iter().any(|t| t == time) => {
                        format!("<R>.{rest}")
                    }
                    _ => seg.to_string(),
                })
                .collect();
            let k = segments.join("/");
            // Rollback files and command blocks embed times and durations: keep only that
            // they exist.
            let v = if k.contains(".rollback") || v.starts_with(b"#HUDI#\0") {
                Vec::new()
            } else {
                v.clone()
            };
            (k, v)
        })
        .collect()
}

async fn completed_rollback(f: &Fixture, timeline_dir: &str) -> (String, RollbackMetadata) {
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

#[tokio::test]
async fn cow_v8_rollback_deletes_only_the_failed_files_and_completes() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].instant, TF);
    assert_eq!(done[0].files_deleted, 3);
    let after = f.snapshot().await;
    let gone: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    assert_eq!(
        gone,
        vec![
            &format!(".hoodie/.temp/{TF}/p1/fg1-0_0-9-9_{TF}.parquet.marker.MERGE"),
            &format!(".hoodie/.temp/{TF}/p1/fg4-0_0-9-9_{TF}.parquet.marker.CREATE"),
            &format!(".hoodie/timeline/{TF}.commit.requested"),
            &format!(".hoodie/timeline/{TF}.inflight"),
            &format!("p1/fg1-0_0-9-9_{TF}.parquet"),
            &format!("p1/fg4-0_0-9-9_{TF}.parquet"),
            &format!("p2/missed-0_0-9-9_{TF}.parquet"),
        ]
    );
    // Committed files untouched.
    for k in [
        format!("p1/fg1-0_0-1-1_{T1}.parquet"),
        format!("p2/fg2-0_0-1-1_{T1}.parquet"),
        format!("p1/fg3-0_0-1-1_{T2}.parquet"),
    ] {
        assert_eq!(after.get(&k), before.get(&k), "{k}");
    }
    let r = &done[0].rollback_instant;
    assert!(after.contains_key(&format!(".hoodie/timeline/{r}.rollback.requested")));
    assert_eq!(
        after[&format!(".hoodie/timeline/{r}.rollback.inflight")],
        b""
    );
    let (name, meta) = completed_rollback(&f, ".hoodie/timeline").await;
    assert!(
        name.starts_with(&format!(".hoodie/timeline/{r}_")),
        "{name}"
    );
    assert_eq!(meta.commits_rollback, vec![TF.to_string()]);
    assert_eq!(meta.total_files_deleted, 3);
    assert_eq!(meta.instants_rollback[0].action, "commit");
    assert_eq!(meta.partition_metadata["p1"].success_delete_files.len(), 2);
    assert_eq!(
        meta.partition_metadata["p2"].success_delete_files,
        vec![format!(
            "memory://fixture/wh/t/p2/missed-0_0-9-9_{TF}.parquet"
        )]
    );
    let plan = RollbackPlan::from_avro(&after[&format!(".hoodie/timeline/{r}.rollback.requested")])
        .unwrap();
    assert_eq!(plan.instant_to_rollback.unwrap().commit_time, TF);

    // Nothing is left to do: a second run is a no-op.
    let again = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert!(again.is_empty());
    assert_eq!(f.snapshot().await, after);
}

#[tokio::test]
async fn v9_append_markers_get_a_rollback_command_block_named_with_the_instant_and_the_log_stays() {
    // Hudi 1.0.1 / 1.1.1 on table version 8+: a log file with an APPEND marker is kept and a
    // rollback command block goes into a new log file named with the instant (rolled over past
    // the existing version), as Hudi's own rollback of such a table does (tests/interop_mdt_compaction.rs).
    let f = Fixture::build(Kind::MorV9, false).await;
    let log = format!(".fg3-0_{TF}.log.1_0-0-0");
    f.storage()
        .put(
            &rel(&format!("p1/{log}")),
            bytes::Bytes::from_static(b"#HUDI#failed-append"),
        )
        .await
        .unwrap();
    f.storage()
        .put(
            &rel(&format!(".hoodie/.temp/{TF}/p1/{log}.marker.APPEND")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].log_blocks_written, 1);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    assert!(
        after.contains_key(&format!("p1/{log}")),
        "the log file stays"
    );
    let block = &after[&format!("p1/.fg3-0_{TF}.log.2_0-0-0")];
    assert!(is_rollback_block_for(block, &r, TF));
    // The CREATE-marked log file and the new base file are deleted as before.
    assert!(!after.contains_key(&format!("p1/.fg1-0_{TF}.log.1_0-9-9")));
    assert!(!after.contains_key(&format!("p1/fg4-0_0-9-9_{TF}.parquet")));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!(".hoodie/.temp/{r}/"))));
    let plan = RollbackPlan::from_avro(&after[&format!(".hoodie/timeline/{r}.rollback.requested")])
        .unwrap();
    let append = plan
        .requests
        .iter()
        .flatten()
        .find(|q| q.files_to_be_deleted.is_empty())
        .expect("a command-block request");
    assert_eq!(append.file_id.as_deref(), Some("fg3-0"));
    assert_eq!(append.latest_base_instant.as_deref(), Some(TF));
    assert_eq!(
        append.log_blocks_to_be_deleted,
        Some(BTreeMap::from([(
            format!("memory://fixture/wh/t/p1/{log}"),
            1
        )]))
    );
    let (_, meta) = completed_rollback(&f, ".hoodie/timeline").await;
    let p1 = &meta.partition_metadata["p1"];
    assert_eq!(
        p1.rollback_log_files,
        Some(BTreeMap::from([(
            format!("memory://fixture/wh/t/p1/.fg3-0_{TF}.log.2_0-0-0"),
            block.len() as i64
        )]))
    );
    assert_eq!(p1.log_files_from_failed_commit, Some(BTreeMap::new()));
}

#[tokio::test]
async fn v6_mor_appends_get_a_rollback_command_block_in_a_new_log_version() {
    let f = Fixture::build(Kind::MorV6, false).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].log_blocks_written, 1);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    // The appended log file stays; a new version holds the command block.
    assert!(after.contains_key(&format!("p1/.fg1-0_{T1}.log.1_0-9-9")));
    let block = &after[&format!("p1/.fg1-0_{T1}.log.2_1-0-1")];
    assert!(is_rollback_block_for(block, &r, TF));
    assert!(after.contains_key(&format!(".hoodie/{r}.rollback")));
    assert!(!after
        .keys()
        .any(|k| k.starts_with(&format!(".hoodie/.temp/{r}/"))));
    let (_, meta) = completed_rollback(&f, ".hoodie").await;
    let p1 = &meta.partition_metadata["p1"];
    assert_eq!(
        p1.rollback_log_files,
        Some(BTreeMap::from([(
            format!("memory://fixture/wh/t/p1/.fg1-0_{T1}.log.2_1-0-1"),
            105
        )]))
    );
    assert_eq!(
        p1.log_files_from_failed_commit,
        Some(BTreeMap::from([(format!(".fg1-0_{T1}.log.1_0-9-9"), 1)]))
    );
}

#[tokio::test]
async fn v9_mor_with_metadata_table_rolls_back_the_metadata_deltacommit_with_the_same_instant() {
    let f = Fixture::build(Kind::MorV9, true).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].metadata_table, MetadataTableOutcome::RolledBack);
    let r = &done[0].rollback_instant;
    let after = f.snapshot().await;
    let m = ".hoodie/metadata";
    assert!(!after.contains_key(&format!("{m}/files/.files-0000-0_{TF}.log.1_0-1-0")));
    assert!(after.contains_key(&format!("{m}/files/.files-0000-0_{T2}.log.1_0-1-0")));
    assert!(!after
        .keys()
        .any(|k| k.contains(&format!("{m}/.hoodie/timeline/{TF}"))));
    assert!(after.contains_key(&format!(
        "{m}/.hoodie/timeline/{T2}_{}.deltacommit",
        bump(T2)
    )));
    let (_, mdt_meta) = completed_rollback(&f, &format!("{m}/.hoodie/timeline")).await;
    assert_eq!(mdt_meta.start_rollback_time, *r);
    assert_eq!(mdt_meta.commits_rollback, vec![TF.to_string()]);
    assert_eq!(mdt_meta.total_files_deleted, 1);
    // The data table's log file of the failed deltacommit is deleted outright.
    assert!(!after.contains_key(&format!("p1/.fg1-0_{TF}.log.1_0-9-9")));
}

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
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unreadable"), "{err}");
    assert_eq!(f.snapshot().await, before);
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

#[tokio::test]
async fn dry_run_previews_and_changes_nothing() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let p = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].files, 3);
    assert_eq!(p[0].files_not_in_markers, 1);
    assert_eq!(p[0].partitions["p1"].files, 2);
    assert_eq!(
        p[0].bytes,
        ("failed-new".len() + "failed-merge".len() + "failed-missed".len()) as u64
    );
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn named_instants_that_must_not_be_rolled_back_are_refused() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let table = open(&f).await;
    let before = f.snapshot().await;
    for (t, needle) in [
        (T1, "completed"),
        ("20990101000000000", "not on the active timeline"),
    ] {
        let err = rollback(&table, &Selection::Instant(t.into()), &opts(), None)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    // A live heartbeat needs --force.
    f.storage()
        .put(
            &rel(&format!(".hoodie/.heartbeat/{TF}")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let err = rollback(&table, &Selection::Instant(TF.into()), &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("live"), "{err}");
    assert!(err.to_string().contains("--force"), "{err}");
    let mut after = f.snapshot().await;
    after.remove(&format!(".hoodie/.heartbeat/{TF}"));
    assert_eq!(after, before);
    let forced = RollbackOptions {
        force: true,
        ..opts()
    };
    let done = rollback(&table, &Selection::Instant(TF.into()), &forced, None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
}

#[tokio::test]
async fn a_pending_compaction_is_never_rolled_back() {
    let f = Fixture::build(Kind::MorV9, false).await;
    let t = "20240101030000000";
    f.storage()
        .put(
            &rel(&format!(".hoodie/timeline/{t}.compaction.requested")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let table = open(&f).await;
    let err = rollback(
        &table,
        &Selection::Instant(t.into()),
        &RollbackOptions {
            force: true,
            ..opts()
        },
        None,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("compaction"), "{err}");
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(
        done.iter().map(|d| d.instant.as_str()).collect::<Vec<_>>(),
        vec![TF]
    );
    assert!(f
        .snapshot()
        .await
        .contains_key(&format!(".hoodie/timeline/{t}.compaction.requested")));
}

#[tokio::test]
async fn a_marker_pointing_outside_the_table_stops_the_rollback_before_any_change() {
    let f = Fixture::build(Kind::CowV8, false).await;
    // A marker file name cannot hold `..` segments, but a timeline-server marker line can.
    f.storage()
        .put(
            &rel(&format!(".hoodie/.temp/{TF}/MARKERS.type")),
            bytes::Bytes::from_static(b"TIMELINE_SERVER_BASED"),
        )
        .await
        .unwrap();
    f.storage()
        .put(
            &rel(&format!(".hoodie/.temp/{TF}/MARKERS0")),
            bytes::Bytes::from(format!("../../other/x_0-1-2_{TF}.parquet.marker.CREATE\n")),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("leave the table"), "{err}");
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn a_corrupt_pending_plan_is_never_executed() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let table = open(&f).await;
    // Schedule, then truncate the plan.
    let r = "20240101030000000";
    let good = rollback_plan_bytes(&f).await;
    f.storage()
        .put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.requested")),
            bytes::Bytes::from(good[..good.len() / 2].to_vec()),
        )
        .await
        .unwrap();
    f.storage()
        .put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.inflight")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
    let p = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap();
    // The unreadable plan is left alone: the failed write is planned afresh.
    assert_eq!(p.len(), 1);
    assert!(p[0].resumes.is_none());
}

async fn rollback_plan_bytes(f: &Fixture) -> Vec<u8> {
    let copy = Fixture::build(f.kind, false).await;
    let table = open(&copy).await;
    let p = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap();
    p[0].plan.to_avro().unwrap()
}

#[tokio::test]
async fn a_plan_naming_a_file_of_another_instant_is_refused_before_any_delete() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let table = open(&f).await;
    let mut plan = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap()[0]
        .plan
        .clone();
    plan.requests.as_mut().unwrap()[0]
        .files_to_be_deleted
        .push(format!("memory://fixture/wh/t/p1/fg3-0_0-1-1_{T2}.parquet"));
    let r = "20240101030000000";
    f.storage()
        .put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.requested")),
            bytes::Bytes::from(plan.to_avro().unwrap()),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not a file of this instant"),
        "{err}"
    );
    assert_eq!(f.snapshot().await, before);
}

/// Fail the n-th storage call of a rollback, rerun, and compare with an uninterrupted run.
async fn crash_at_every_call(kind: Kind, mdt: bool) -> usize {
    crash_at_every_call_without(kind, mdt, &[]).await
}

/// [`crash_at_every_call`] on the fixture with `drop` deleted after it is built.
async fn crash_at_every_call_without(kind: Kind, mdt: bool, drop: &[&str]) -> usize {
    let build = || async {
        let f = Fixture::build(kind, mdt).await;
        for p in drop {
            f.delete(p).await;
        }
        f
    };
    let reference = build().await;
    let counter = Arc::new(CountingInterceptor::new());
    let t = Table::open_storage(reference.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    rollback(&t, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    let expected = normalize(&reference.snapshot().await);
    let calls = counter.total() as usize;
    assert!(calls > 10, "suspiciously few calls: {calls}");

    for (mode, n) in (1..=calls).flat_map(|n| [(FailMode::Before, n), (FailMode::After, n)]) {
        let f = build().await;
        let fail = Arc::new(FailNth::with_mode(&[], n as u64, mode));
        let crashing = f.storage().with_interceptor(fail.clone());
        let first = match Table::open_storage(crashing).await {
            Ok(t) => rollback(&t, &Selection::AllFailed, &opts(), None)
                .await
                .map(|_| ()),
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
        let t = open(&f).await;
        rollback(&t, &Selection::AllFailed, &opts(), None)
            .await
            .unwrap_or_else(|e| panic!("rerun after a failure {mode:?} call {n}: {e}"));
        let got = normalize(&f.snapshot().await);
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
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_cow() {
    let n = crash_at_every_call(Kind::CowV8, false).await;
    eprintln!("cow v8: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v6_mor() {
    let n = crash_at_every_call(Kind::MorV6, false).await;
    eprintln!("v6 mor: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v9_mdt() {
    let n = crash_at_every_call(Kind::MorV9, true).await;
    eprintln!("v9 mor + metadata table: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v6_mor_mdt() {
    let n = crash_at_every_call(Kind::MorV6, true).await;
    eprintln!("v6 mor + metadata table: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v6_mdt_pending() {
    let pending = format!(".hoodie/metadata/.hoodie/{TF}.deltacommit");
    let n = crash_at_every_call_without(Kind::MorV6, true, &[&pending]).await;
    eprintln!("v6 mor + metadata table, its deltacommit pending: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v6_cow_mdt() {
    let n = crash_at_every_call(Kind::CowV6, true).await;
    eprintln!("v6 cow + metadata table: {n} injection points");
}

#[tokio::test]
async fn a_recent_pending_rollback_is_left_to_whoever_is_running_it() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let table = open(&f).await;
    // Someone else scheduled a rollback of the failed write moments ago.
    let plan = preview(&table, &Selection::AllFailed, &opts())
        .await
        .unwrap()[0]
        .plan
        .to_avro()
        .unwrap();
    let r = "20240101030000000";
    f.storage()
        .put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.requested")),
            bytes::Bytes::from(plan),
        )
        .await
        .unwrap();
    let before = f.snapshot().await;
    let patient = RollbackOptions::default();
    let done = rollback(&table, &Selection::AllFailed, &patient, None)
        .await
        .unwrap();
    assert!(done.is_empty());
    assert_eq!(f.snapshot().await, before);
    let err = rollback(&table, &Selection::Instant(TF.into()), &patient, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--force"), "{err}");
    // Once it is old enough (here: at once), it is resumed with its own instant.
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].rollback_instant, r);
    assert!(done[0].resumed);
}

#[tokio::test]
async fn rollback_requests_are_counted() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let counter = Arc::new(CountingInterceptor::new());
    let t = Table::open_storage(f.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    rollback(&t, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    // 3 data files + 2 timeline files + 2 markers + heartbeat.
    assert_eq!(counter.count(OpKind::Delete), 8);
    assert_eq!(counter.count(OpKind::PutIfAbsent), 3);
    assert_eq!(counter.count(OpKind::Put), 0);
}

/// Records the folders listed (recursively or one level) through the storage seam.
#[derive(Debug, Default)]
struct ListedFolders(std::sync::Mutex<Vec<(OpKind, String)>>);

impl hudi_keeper_core::storage::Interceptor for ListedFolders {
    fn before(
        &self,
        op: OpKind,
        path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        if matches!(op, OpKind::List | OpKind::ListDir) {
            self.0.lock().unwrap().push((op, path.to_string()));
        }
        Ok(())
    }
}

impl ListedFolders {
    /// The data folders listed: what is not the timeline, the marker folder or a heartbeat.
    fn data_folders(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, p)| p.clone())
            .filter(|p| !p.starts_with(".hoodie"))
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// The fixture with `n` more partitions of committed files that the failed write never touched.
async fn with_untouched_partitions(kind: Kind, n: usize) -> Fixture {
    let f = Fixture::build(kind, false).await;
    for i in 0..n {
        f.put(&format!("u{i:04}/fgu{i}-0_0-1-1_{T1}.parquet"), b"c")
            .await;
    }
    f
}

#[tokio::test]
async fn the_cross_check_lists_the_partitions_the_failed_write_names_not_the_table() {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV6, Kind::MorV9] {
        let mut listed_per_size = Vec::new();
        for untouched in [5, 200] {
            let f = with_untouched_partitions(kind, untouched).await;
            let listed = Arc::new(ListedFolders::default());
            let counter = Arc::new(CountingInterceptor::new());
            let chain =
                hudi_keeper_core::storage::testing::Chain(vec![listed.clone(), counter.clone()]);
            let t = Table::open_storage(f.storage().with_interceptor(Arc::new(chain)))
                .await
                .unwrap();
            let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
            let json = serde_json::to_value(&previews[0].listing).unwrap();
            assert_eq!(json["scope"], "partitions", "{kind:?}: {json}");
            assert_eq!(json["partitions"], 2, "{kind:?}: {json}");
            let done = rollback(&t, &Selection::AllFailed, &opts(), None)
                .await
                .unwrap();
            assert_eq!(done.len(), 1);
            // Only the partitions the markers and the inflight workload name (p1, p2) were
            // listed: never the table root, never an untouched partition.
            assert_eq!(
                listed.data_folders(),
                ["p1", "p2"],
                "{kind:?}, {untouched} untouched"
            );
            // The file its markers missed (in p2, which the workload names) is gone.
            let after = f.snapshot().await;
            assert!(
                !after.contains_key(&format!("p2/missed-0_0-9-9_{TF}.parquet")),
                "{kind:?}: the file the markers missed is still there"
            );
            assert!(after.contains_key(&format!("u0000/fgu0-0_0-1-1_{T1}.parquet")));
            listed_per_size.push(counter.count(OpKind::List) + counter.count(OpKind::ListDir));
        }
        assert_eq!(
            listed_per_size[0], listed_per_size[1],
            "{kind:?}: the listings grew with the untouched partitions"
        );
    }
}

#[tokio::test]
async fn an_instant_that_names_no_partition_is_cross_checked_against_the_whole_table() {
    for kind in [Kind::CowV6, Kind::CowV8] {
        let f = with_untouched_partitions(kind, 3).await;
        // No markers, no workload (a bulk insert's empty inflight file), and a file of the
        // failed write in a partition nothing names.
        for m in f.snapshot().await.keys().filter(|k| k.contains(".temp/")) {
            f.delete(m).await;
        }
        let inflight = if kind.layout2() {
            format!(".hoodie/timeline/{TF}.inflight")
        } else {
            format!(".hoodie/{TF}.inflight")
        };
        f.put(&inflight, b"").await;
        let stray = format!("u0002/stray-0_0-9-9_{TF}.parquet");
        f.put(&stray, b"failed-stray").await;
        let t = open(&f).await;
        let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
        let json = serde_json::to_value(&previews[0].listing).unwrap();
        assert_eq!(json["scope"], "whole_table", "{kind:?}: {json}");
        assert!(
            json["why"].as_str().unwrap().contains("names no partition"),
            "{json}"
        );
        rollback(&t, &Selection::AllFailed, &opts(), None)
            .await
            .unwrap();
        let after = f.snapshot().await;
        assert!(
            !after.contains_key(&stray),
            "{kind:?}: {stray} was not found"
        );
        assert!(!after.contains_key(&format!("p2/missed-0_0-9-9_{TF}.parquet")));
    }
}

#[tokio::test]
async fn a_damaged_inflight_workload_widens_the_listing_to_the_whole_table() {
    let f = with_untouched_partitions(Kind::CowV8, 3).await;
    f.put(
        &format!(".hoodie/timeline/{TF}.inflight"),
        b"Obj\x01garbage",
    )
    .await;
    let stray = format!("u0001/stray-0_0-9-9_{TF}.parquet");
    f.put(&stray, b"failed-stray").await;
    let t = open(&f).await;
    let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
    let json = serde_json::to_value(&previews[0].listing).unwrap();
    assert_eq!(json["scope"], "whole_table", "{json}");
    rollback(&t, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert!(!f.snapshot().await.contains_key(&stray));
}

/// Assert that a table is byte-identical to `before`, naming the files that differ.
fn assert_unchanged(
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

#[tokio::test]
async fn a_pending_rollback_whose_instant_has_since_completed_is_refused_before_anything_changes() {
    for kind in [Kind::CowV8, Kind::MorV9] {
        let f = Fixture::build(kind, kind == Kind::MorV9).await;
        // A rollback of the failed write was scheduled and started...
        let plan = rollback_plan_bytes(&f).await;
        let r = "20240101030000000";
        let s = f.storage();
        s.put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.requested")),
            bytes::Bytes::from(plan),
        )
        .await
        .unwrap();
        s.put(
            &rel(&format!(".hoodie/timeline/{r}.rollback.inflight")),
            bytes::Bytes::new(),
        )
        .await
        .unwrap();
        // ...but its writer was alive and completed the instant.
        let action = if kind.mor() { "deltacommit" } else { "commit" };
        s.put(
            &rel(&format!(".hoodie/timeline/{TF}_{}.{action}", bump(TF))),
            bytes::Bytes::from_static(b"{}"),
        )
        .await
        .unwrap();
        let before = f.snapshot().await;
        let table = open(&f).await;
        for selection in [Selection::AllFailed, Selection::Instant(TF.into())] {
            let err = rollback(&table, &selection, &opts(), None)
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Refused { .. }), "{kind:?}: {err}");
            let text = err.to_string();
            assert!(
                text.contains("completed") && text.contains(r),
                "{kind:?}: {text}"
            );
            assert_unchanged(
                &before,
                &f.snapshot().await,
                &format!("{kind:?} {selection:?}"),
            );
        }
        let err = preview(&table, &Selection::AllFailed, &opts())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("completed"), "{kind:?}: {err}");
    }
}

/// Plays "another process" on a local table: once the rollback under test has deleted the
/// failed write's heartbeat (the last step before finishing), the next request first completes
/// the pending rollback as another process would (its completed file, the instant's own files
/// removed), then records every file of the table.
#[derive(Debug)]
struct CompletesTheRollbackFirst {
    dir: std::path::PathBuf,
    armed: std::sync::atomic::AtomicBool,
    fired: std::sync::atomic::AtomicBool,
    seen: std::sync::Mutex<BTreeMap<String, Vec<u8>>>,
}

fn read_tree(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let k = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(k, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

impl hudi_keeper_core::storage::Interceptor for CompletesTheRollbackFirst {
    fn before(
        &self,
        op: OpKind,
        path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        use std::sync::atomic::Ordering::SeqCst;
        if op == OpKind::Delete && path.as_str() == format!(".hoodie/.heartbeat/{TF}") {
            self.armed.store(true, SeqCst);
            return Ok(());
        }
        if self.armed.load(SeqCst) && !self.fired.swap(true, SeqCst) {
            let tl = self.dir.join(".hoodie/timeline");
            let r = std::fs::read_dir(&tl)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find_map(|n| n.strip_suffix(".rollback.inflight").map(str::to_string))
                .expect("a pending rollback");
            std::fs::write(tl.join(format!("{r}_{}.rollback", bump(&r))), b"theirs").unwrap();
            for own in [format!("{TF}.inflight"), format!("{TF}.commit.requested")] {
                let _ = std::fs::remove_file(tl.join(own));
            }
            *self.seen.lock().unwrap() = read_tree(&self.dir);
        }
        Ok(())
    }
}

#[tokio::test]
async fn finishing_a_rollback_another_process_completed_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let f = Fixture::build_in(store, "", dir.path().to_str().unwrap(), Kind::CowV8, false).await;
    let other = Arc::new(CompletesTheRollbackFirst {
        dir: dir.path().to_path_buf(),
        armed: Default::default(),
        fired: Default::default(),
        seen: Default::default(),
    });
    let table = Table::open_storage(f.storage().with_interceptor(other.clone()))
        .await
        .unwrap();
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(other.fired.load(std::sync::atomic::Ordering::SeqCst));
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.to_string().contains("another process"), "{err}");
    let after = read_tree(dir.path());
    let completions: Vec<&String> = after
        .keys()
        .filter(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".rollback"))
        .collect();
    assert_eq!(completions.len(), 1, "{completions:?}");
    assert_unchanged(
        &other.seen.lock().unwrap(),
        &after,
        "after the other process completed it",
    );
}

/// A writer that died before its first marker leaves its marker folder empty: on the local file
/// system (the one store whose folders outlive their files) the rollback removes the folder, as
/// Hudi's recursive delete does, so no `.hoodie/.temp/<instant>/` is left.
#[test]
fn a_local_rollback_removes_an_empty_marker_folder_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let f = common::fixtures::build_local(&rt, &dir, Kind::CowV8);
    let markers = dir.join(format!(".hoodie/.temp/{TF}"));
    // Its markers gone, its folders (the instant's and a partition's) left empty.
    for e in walk(&markers) {
        std::fs::remove_file(e).unwrap();
    }
    assert!(markers.is_dir());
    let table = rt
        .block_on(Table::open(dir.to_str().unwrap(), &Default::default()))
        .unwrap();
    let mut opts = RollbackOptions::default();
    opts.heartbeat.min_instant_age = std::time::Duration::ZERO;
    let done = rt
        .block_on(rollback(
            &table,
            &Selection::Instant(TF.into()),
            &opts,
            None,
        ))
        .unwrap();
    assert_eq!(done.len(), 1);
    assert!(!markers.exists(), "{:?}", walk(&dir.join(".hoodie/.temp")));
    assert!(!rt
        .block_on(f.snapshot())
        .keys()
        .any(|k| k.contains(TF) && !k.starts_with(".hoodie")));
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}
