//! The archival guard on local fixture tables: after a rollback, a file of the rolled-back instant
//! in a partition the rollback touched goes at once (no age floor), under the lock and checked
//! again; an orphan, a file of an instant pending again, and a table without a completed rollback
//! are left alone; a dry run changes nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use common::fixtures::{Fixture, Kind, TF};
use hudi_keeper_core::audit::guard::{guard, GuardOptions, GuardReport, GuardScope};
use hudi_keeper_core::exec::rollback::{rollback, RollbackDone, Selection};
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};
use hudi_keeper_core::storage::{OpKind, RequestCounter};
use hudi_keeper_core::Table;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{open, rollback_options, tl};

/// In a partition the fixture's rollback of TF touches.
const LEFTOVER: &str = "p2/zombie-0_0-9-9_20240101020000000.parquet";
const ORPHAN: &str = "p1/old-0_0-1-1_20231201000000000.parquet";

fn options(dry_run: bool) -> GuardOptions {
    GuardOptions {
        lock: LockOptions {
            provider: LockProvider::filesystem_default(),
            ..LockOptions::none()
        },
        dry_run,
        max_log_read: 1 << 20,
    }
}

/// The fixture's failed write TF rolled back, then a file of TF and an orphan written (a zombie
/// writer, a stray file), both fresh.
async fn rolled_back_with_strays(kind: Kind) -> (Fixture, Vec<RollbackDone>) {
    let f = Fixture::build(kind, false).await;
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &rollback_options(), None)
        .await
        .expect("rollback");
    assert!(LEFTOVER.ends_with(&format!("_{TF}.parquet")));
    for p in [LEFTOVER, ORPHAN] {
        f.put(p, b"stray").await;
    }
    (f, done)
}

async fn guarded(table: &Table, scope: &GuardScope, dry_run: bool) -> GuardReport {
    guard(table, scope, &options(dry_run)).await.expect("guard")
}

#[tokio::test]
async fn a_fresh_leftover_of_a_completed_rollback_goes_and_nothing_else() {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV9] {
        let (f, done) = rolled_back_with_strays(kind).await;
        let table = open(&f).await;
        let before = f.snapshot().await;
        let just_made: BTreeSet<String> = done.iter().map(|d| d.rollback_instant.clone()).collect();

        let dry = guarded(&table, &GuardScope::Rollbacks(just_made.clone()), true).await;
        assert_eq!(dry.leftovers_found, 1, "{kind:?} {dry:?}");
        assert_eq!(
            f.snapshot().await,
            before,
            "{kind:?}: a dry run changes nothing"
        );

        let r = guarded(&table, &GuardScope::Rollbacks(just_made), false).await;
        assert_eq!(r.rollbacks_checked, 1, "{kind:?} {r:?}");
        let removed: Vec<&str> = r.removed.iter().map(|x| x.path.as_str()).collect();
        assert_eq!(removed, vec![LEFTOVER], "{kind:?} {r:?}");
        let mut expected = before.clone();
        expected.remove(LEFTOVER);
        assert_eq!(f.snapshot().await, expected, "{kind:?}: the orphan stays");
    }
}

#[tokio::test]
async fn other_rollbacks_out_of_scope_and_instants_pending_again_are_left_alone() {
    let (f, _) = rolled_back_with_strays(Kind::CowV8).await;
    let table = open(&f).await;
    let before = f.snapshot().await;
    let other = GuardScope::Rollbacks(BTreeSet::from(["20991231000000000".to_string()]));
    let r = guarded(&table, &other, false).await;
    assert_eq!((r.rollbacks_checked, r.leftovers_found), (0, 0), "{r:?}");
    assert_eq!(f.snapshot().await, before);

    // TF requested again (a compaction or clustering is rerun under its own instant): its
    // files are a pending write's.
    f.put(&format!("{}/{TF}.commit.requested", tl(Kind::CowV8)), b"")
        .await;
    let before = f.snapshot().await;
    let r = guarded(&table, &GuardScope::Every, false).await;
    assert_eq!(r.leftovers_found, 0, "{r:?}");
    assert_eq!(f.snapshot().await, before);
}

#[tokio::test]
async fn without_a_completed_rollback_the_guard_reads_only_the_timeline() {
    let f = Fixture::build(Kind::CowV8, false).await;
    f.put(LEFTOVER, b"stray").await;
    let counter = Arc::new(RequestCounter::new());
    let table = Table::open_storage(f.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    let opened = counter.snapshot();
    let r = guarded(&table, &GuardScope::Every, false).await;
    assert_eq!(r.rollbacks_checked, 0, "{r:?}");
    // One listing of the timeline; no metadata read, no partition listed, nothing changed.
    for (kind, n) in counter.snapshot() {
        let n = n - opened.get(&kind).copied().unwrap_or(0);
        assert!(
            n == 0 || (matches!(kind, OpKind::ListDir | OpKind::List) && n <= 2),
            "{:?}",
            counter.snapshot()
        );
    }
    assert!(f.snapshot().await.contains_key(LEFTOVER));
}

#[tokio::test]
async fn a_metadata_table_that_appeared_after_the_table_was_opened_keeps_the_leftovers() {
    let (f, done) = rolled_back_with_strays(Kind::CowV8).await;
    // Opened (hoodie.properties read: no metadata table), as the daemon keeps its handle...
    let table = open(&f).await;
    // ...then a writer builds a metadata table, which may list the leftover.
    f.put(
        ".hoodie/metadata/.hoodie/hoodie.properties",
        b"hoodie.table.name=fx_metadata\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n",
    )
    .await;
    let props = String::from_utf8(f.snapshot().await[".hoodie/hoodie.properties"].clone()).unwrap();
    assert!(
        props.contains("hoodie.table.metadata.partitions=\n"),
        "{props}"
    );
    f.put(
        ".hoodie/hoodie.properties",
        props
            .replace(
                "hoodie.table.metadata.partitions=\n",
                "hoodie.table.metadata.partitions=files\n",
            )
            .as_bytes(),
    )
    .await;
    let before = f.snapshot().await;
    let just_made: BTreeSet<String> = done.iter().map(|d| d.rollback_instant.clone()).collect();
    let r = guarded(&table, &GuardScope::Rollbacks(just_made), false).await;
    assert_eq!(r.leftovers_found, 1, "{r:?}");
    assert!(r.removed.is_empty(), "{r:?}");
    assert!(
        r.kept
            .iter()
            .any(|k| k.path == LEFTOVER && k.reason.contains("metadata table")),
        "{r:?}"
    );
    assert_eq!(f.snapshot().await, before);
}
