//! The rollback engine on hand-made tables of every kind: what it deletes, what it writes, and
//! what it refuses before changing anything. (Its metadata-table work is in
//! `rollback_metadata_table`, its listings in `rollback_listing`, interrupted and concurrent
//! rollbacks in `rollback_interrupted`.)

use std::collections::BTreeMap;

use common::fixtures::{bump, rel, Fixture, Kind, T1, T2, TF};
use hudi_keeper_core::exec::rollback::{
    preview, rollback, MetadataTableOutcome, RollbackOptions, Selection,
};
use hudi_keeper_core::format::log_block::is_rollback_block_for;
use hudi_keeper_core::format::rollback::RollbackPlan;
use hudi_keeper_core::Error;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{
    assert_rollback_refused_unchanged, completed_rollback, open, rollback_options as opts,
    rollback_plan_bytes,
};

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

/// A failed write's log file of partition `p1` with an APPEND marker (as `-append` leaves it).
async fn put_append_marked(f: &Fixture, log: &str) {
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
}

#[tokio::test]
async fn v9_command_block_log_file_takes_the_rollback_write_token_and_sorts_after_the_failed_file()
{
    // Hudi 1.x on table version 8+ (RollbackHelper with HoodieLogFormat.WriterBuilder): the
    // writer starts at log version 1 with its own write token (`0-0-0` on the Java engine) and
    // rolls over while that exact name exists, so it would write `.log.1_0-0-0` here. Hudi
    // reads a slice's logs by version, then token: that name is read before the failed
    // `.log.1_3-12-0` and undoes nothing (the failed records return once the instant is
    // archived). hudi-keeper takes the first such name read after it: `.log.2_0-0-0`.
    let f = Fixture::build(Kind::MorV9, false).await;
    let log = format!(".fg3-0_{TF}.log.1_3-12-0");
    put_append_marked(&f, &log).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    assert!(
        after.contains_key(&format!("p1/{log}")),
        "the log file stays"
    );
    let new = format!("p1/.fg3-0_{TF}.log.2_0-0-0");
    assert!(
        after
            .get(&new)
            .is_some_and(|b| is_rollback_block_for(b, &r, TF)),
        "{:?}",
        after
            .keys()
            .filter(|k| k.contains(".fg3-0_"))
            .collect::<Vec<_>>()
    );
    assert!(!after.contains_key(&format!("p1/.fg3-0_{TF}.log.1_0-0-0")));
    let (_, meta) = completed_rollback(&f, ".hoodie/timeline").await;
    assert_eq!(
        meta.partition_metadata["p1"].rollback_log_files,
        Some(BTreeMap::from([(
            format!("memory://fixture/wh/t/{new}"),
            after[&new].len() as i64
        )]))
    );
}

#[tokio::test]
async fn v9_each_append_marker_of_a_file_group_gets_its_own_command_block_in_the_first_free_version(
) {
    // Hudi 1.x plans one request per APPEND marker (not grouped by file group) and writes one
    // command block for each, every writer rolling over past the names that exist: the failed
    // write's `.log.1_0-0-0` and `.log.2_0-0-0` are passed over, and the blocks go to
    // `.log.3_0-0-0` and `.log.4_0-0-0` (one file each, not the first reused for the second).
    let f = Fixture::build(Kind::MorV9, false).await;
    for v in [1, 2] {
        put_append_marked(&f, &format!(".fg3-0_{TF}.log.{v}_0-0-0")).await;
    }
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert_eq!(done[0].log_blocks_written, 2);
    let r = done[0].rollback_instant.clone();
    let after = f.snapshot().await;
    let blocks: Vec<String> = (3..=4)
        .map(|v| format!("p1/.fg3-0_{TF}.log.{v}_0-0-0"))
        .collect();
    for b in &blocks {
        assert!(
            after
                .get(b)
                .is_some_and(|x| is_rollback_block_for(x, &r, TF)),
            "{b}: {:?}",
            after
                .keys()
                .filter(|k| k.contains(".fg3-0_"))
                .collect::<Vec<_>>()
        );
    }
    let (_, meta) = completed_rollback(&f, ".hoodie/timeline").await;
    let logged: Vec<&String> = meta.partition_metadata["p1"]
        .rollback_log_files
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        logged,
        blocks
            .iter()
            .map(|b| format!("memory://fixture/wh/t/{b}"))
            .collect::<Vec<_>>()
            .iter()
            .collect::<Vec<_>>()
    );
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
    assert_rollback_refused_unchanged(&f, "leave the table").await;
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
