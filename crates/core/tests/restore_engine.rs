//! Savepoints and restore on hand-made tables of every kind: what a restore undoes and in which
//! order, what it leaves, and what it refuses before changing anything. (Restores of the
//! metadata table are in `restore_metadata_table`, interrupted restores in
//! `restore_interrupted`.)

use common::fixtures::{rel, Fixture, Kind, T1, T2, TF};
use hudi_keeper_core::exec::restore::{preview_restore, restore, MetadataTableAction};
use hudi_keeper_core::exec::savepoint::{create_savepoint, list_savepoints, SavepointRequest};
use hudi_keeper_core::format::log_block::is_rollback_block_for;
use hudi_keeper_core::format::restore::{RestoreMetadata, RestorePlan};
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{
    open, restore_files, restore_options as opts, savepointed as fixture, tl,
    with_real_metadata_table,
};

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
