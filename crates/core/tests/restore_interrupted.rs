//! Interrupted restores: a crash at any storage call, then a rerun, ends where an
//! uninterrupted restore ends, and leaves nothing but the table needed to finish; a restore
//! records its instant before the metadata table goes, and a resumed one finishes deleting it.

use std::sync::Arc;

use common::fixtures::{rel, Fixture, Kind, T1, T2};
use hudi_keeper_core::exec::restore::{restore, MetadataTableAction};
use hudi_keeper_core::storage::testing::FailNth;
use hudi_keeper_core::timeline::Action;
use hudi_keeper_core::Table;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::crash::Crash;
use hudi_keeper_test_support::engine::{
    as_version_5, assert_resumable, open, restore_instants, restore_options as opts,
    savepointed as fixture, savepointed_with as build, tl,
};
use hudi_keeper_test_support::normalize::{normalize, Normalization};

/// Fail the n-th storage call of a restore (before or after it reaches storage), rerun, and
/// compare with an uninterrupted restore.
async fn crash_at_every_call(kind: Kind, mdt: bool) -> usize {
    crash_at_every_call_with(kind, mdt, false).await
}

async fn crash_at_every_call_with(kind: Kind, mdt: bool, real_mdt: bool) -> usize {
    crash_at_every_call_after(kind, mdt, real_mdt, None, false).await
}

/// The fixture (made a table-version-5 one when `version_5`), restored to `first` if given (so
/// the restore to T1 under test is a second one).
async fn prepared(
    kind: Kind,
    mdt: bool,
    real_mdt: bool,
    first: Option<&str>,
    version_5: bool,
) -> Fixture {
    let f = build(kind, mdt, real_mdt).await;
    if version_5 {
        as_version_5(&f).await;
    }
    if let Some(t) = first {
        restore(&open(&f).await, t, &opts(false), None)
            .await
            .unwrap();
    }
    f
}

/// The crash harness on a restore to T1 of [`prepared`]; every failure must leave the restore
/// resumable ([`assert_resumable`]), and the end states the same number of files.
async fn crash_at_every_call_after(
    kind: Kind,
    mdt: bool,
    real_mdt: bool,
    first: Option<&str>,
    version_5: bool,
) -> usize {
    Crash {
        build: async || prepared(kind, mdt, real_mdt, first, version_5).await,
        run: async |t: &Table| restore(t, T1, &opts(true), None).await.map(|_| ()),
        how: Normalization::RESTORE,
        count_files: true,
    }
    .at_every_call_checking(
        async |f: &Fixture| (f.snapshot().await, restore_instants(&open(f).await).await),
        async |f: &Fixture, (untouched, restores_before), failure: &str| {
            assert_resumable(f, &untouched, &restores_before, failure).await
        },
    )
    .await
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_that_restores_the_metadata_table_then_rerun_ends_alike(
) {
    let n = crash_at_every_call_with(Kind::MorV9, true, true).await;
    eprintln!("mor v9 + metadata table restored: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_restore_that_restores_a_v6_metadata_table_then_rerun_ends_alike(
) {
    let n = crash_at_every_call_with(Kind::MorV6, true, true).await;
    eprintln!("mor v6 + metadata table restored: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_second_restore_to_an_earlier_point_then_rerun_ends_alike_v9(
) {
    let n = crash_at_every_call_after(Kind::MorV9, true, true, Some(T2), false).await;
    eprintln!("mor v9 + metadata table, second restore: {n} injection points");
}

#[tokio::test]
async fn crash_at_any_storage_call_of_a_second_restore_to_an_earlier_point_then_rerun_ends_alike_v6(
) {
    let n = crash_at_every_call_after(Kind::MorV6, true, true, Some(T2), false).await;
    eprintln!("mor v6 + metadata table, second restore: {n} injection points");
}

/// Table version 5 with a metadata table: the restore recorded there after its children, as
/// Hudi 0.13 records it.
#[tokio::test]
async fn crash_at_any_storage_call_of_a_v5_restore_recorded_in_the_metadata_table_then_rerun_ends_alike(
) {
    let n = crash_at_every_call_after(Kind::CowV6, true, false, None, true).await;
    eprintln!("cow v5 + metadata table recorded: {n} injection points");
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
        let expected = normalize(&reference.snapshot().await, Normalization::RESTORE);

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
        assert_eq!(
            normalize(&f.snapshot().await, Normalization::RESTORE),
            expected,
            "{kind:?}"
        );
    }
}

/// Table version 5, merge-on-read: a restore that would undo the failed (pending) deltacommit is
/// refused before anything changes, and so is a *resumed* one whose child rollback of it was not
/// planned yet (as Hudi 0.13's own restore, cut off, leaves it): resuming would plan that
/// rollback as hudi-keeper does, not as Hudi 0.13 does. Nothing changes either time.
#[tokio::test]
async fn a_version_5_restore_of_a_failed_deltacommit_is_refused_fresh_or_resumed() {
    use hudi_keeper_core::storage::OpKind;
    use hudi_keeper_test_support::engine::as_version_5;
    let f = fixture(Kind::MorV6, false).await;
    as_version_5(&f).await;
    let before = f.snapshot().await;
    let err = restore(&open(&f).await, T1, &opts(true), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("roll it back first"), "{err}");
    assert_eq!(f.snapshot().await, before);

    // A restore cut off after its plan, before its first child rollback was planned (made on
    // version 6, then the table read as version 5).
    let f = fixture(Kind::MorV6, false).await;
    let fail = Arc::new(FailNth::new(&[OpKind::PutIfAbsent], 3));
    let t = Table::open_storage(f.storage().with_interceptor(fail.clone()))
        .await
        .unwrap();
    restore(&t, T1, &opts(true), None).await.unwrap_err();
    assert!(fail.fired());
    let timeline = open(&f).await.timeline().await.unwrap();
    assert!(timeline.pending().any(|i| i.action == Action::Restore));
    assert!(
        !timeline
            .instants()
            .iter()
            .any(|i| i.action == Action::Rollback),
        "no child rollback planned yet: {:?}",
        timeline.instants()
    );
    as_version_5(&f).await;
    // Its APPEND markers as Hudi 0.13 names them: after the slice's base file (a version 5
    // table refuses the fixture's, named after the log file, first).
    let snap = f.snapshot().await;
    for k in snap.keys().filter(|k| k.ends_with(".marker.APPEND")) {
        let (dir, name) = k.rsplit_once('/').unwrap();
        let file_id = name.trim_start_matches('.').split('_').next().unwrap();
        let partition = dir.split('/').skip(3).collect::<Vec<_>>().join("/");
        let base = snap
            .keys()
            .find(|b| b.starts_with(&format!("{partition}/{file_id}_")) && b.ends_with(".parquet"))
            .unwrap_or_else(|| panic!("no base file of {file_id} in {partition}"));
        let base_name = base.rsplit('/').next().unwrap();
        f.put(&format!("{dir}/{base_name}.marker.APPEND"), b"")
            .await;
        f.storage().delete(&rel(k)).await.unwrap();
    }
    let before = f.snapshot().await;
    let err = restore(&open(&f).await, T1, &opts(true), None)
        .await
        .map(|d| format!("{d:?}"))
        .unwrap_or_else(|e| e.to_string());
    assert!(err.contains("Hudi 0.13"), "{err}");
    assert_eq!(f.snapshot().await, before);
}

/// A restore stopped after one of its instants was entirely undone (its timeline files gone,
/// its child rollback pending) and run again still records that instant: the completed restore
/// names every instant of its plan with its child rollback's metadata, whichever storage call
/// the first run failed at. (Before, a resumed restore recorded only the instants still on the
/// timeline; on table version 5 its record in the metadata table then missed their deletions.)
#[tokio::test]
async fn a_resumed_restore_records_every_instant_it_undid_whenever_it_was_stopped() {
    use hudi_keeper_core::format::restore::RestoreMetadata;
    use hudi_keeper_core::storage::testing::FailMode;
    let mut n = 1;
    loop {
        let f = build(Kind::CowV6, false, false).await;
        let fail = Arc::new(FailNth::with_mode(&[], n, FailMode::After));
        let first = match Table::open_storage(f.storage().with_interceptor(fail.clone())).await {
            Ok(t) => restore(&t, T1, &opts(true), None).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if !fail.fired() {
            assert!(first.is_ok());
            break;
        }
        for k in f.snapshot().await.into_keys() {
            if k.contains(".heartbeat/") {
                f.delete(&k).await;
            }
        }
        if first.is_err() {
            restore(&open(&f).await, T1, &opts(true), None)
                .await
                .unwrap_or_else(|e| panic!("rerun after call {n}: {e}"));
        }
        let snap = f.snapshot().await;
        let (_, bytes) = snap
            .iter()
            .find(|(k, _)| k.ends_with(".restore") && !k.contains("metadata/"))
            .unwrap_or_else(|| panic!("no completed restore after call {n}"));
        let md = RestoreMetadata::from_avro(bytes).unwrap();
        let named: Vec<&String> = md.hoodie_restore_metadata.keys().collect();
        assert_eq!(named.len(), 2, "after a failure at call {n}: {named:?}");
        assert_eq!(
            md.instants_to_rollback.len(),
            2,
            "after a failure at call {n}"
        );
        n += 1;
    }
    assert!(n > 20, "only {n} calls");
}
