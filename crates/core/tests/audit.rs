//! The table audit on the fixture tables: files classified by the instant that wrote them, before
//! and after a rollback, with leftovers, orphans and unknowns planted; read-only.

use std::sync::Arc;

use common::fixtures::{Fixture, Kind, T1, TF};
use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport, Class};
use hudi_keeper_core::exec::rollback::{rollback, Selection};
use hudi_keeper_core::storage::RequestCounter;
use hudi_keeper_core::Table;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{open, rollback_options};

async fn audited(f: &Fixture) -> AuditReport {
    audit(&open(f).await, &AuditOptions::default())
        .await
        .expect("audit")
}

fn files(r: &AuditReport, class: Class) -> u64 {
    r.count(class).files
}

fn example_paths(r: &AuditReport, class: Class) -> Vec<String> {
    r.examples
        .get(&class)
        .map(|e| e.iter().map(|x| x.path.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_failed_writes_files_are_pending_until_rolled_back_and_a_file_put_back_is_a_leftover() {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV9] {
        let f = Fixture::build(kind, false).await;
        let before = audited(&f).await;
        // T1 x2, T2 x1 committed; the failed write's new, missed and merged (or log) files pending
        assert_eq!(files(&before, Class::Committed), 3, "{kind:?}: {before:#?}");
        assert_eq!(files(&before, Class::Pending), 3, "{kind:?}: {before:#?}");
        assert_eq!(files(&before, Class::RollbackLeftover), 0, "{kind:?}");
        assert!(before.other_files >= 1, "the partition metadata file");

        let table = open(&f).await;
        rollback(&table, &Selection::AllFailed, &rollback_options(), None)
            .await
            .expect("rollback");
        let after = audited(&f).await;
        assert_eq!(files(&after, Class::Committed), 3, "{kind:?}: {after:#?}");
        for c in [
            Class::Pending,
            Class::RollbackLeftover,
            Class::Orphan,
            Class::Unknown,
        ] {
            assert_eq!(files(&after, c), 0, "{kind:?} {c:?}: {after:#?}");
        }

        // A file of the rolled-back instant written after its rollback (a zombie writer, or a
        // file its markers missed and the listing did not see).
        let zombie = format!("p2/zombie-0_0-9-9_{TF}.parquet");
        f.put(&zombie, b"late").await;
        let r = audited(&f).await;
        assert_eq!(files(&r, Class::RollbackLeftover), 1, "{kind:?}: {r:#?}");
        assert_eq!(example_paths(&r, Class::RollbackLeftover), vec![zombie]);
        assert_eq!(r.partitions["p2"][&Class::RollbackLeftover].files, 1);
    }
}

#[tokio::test]
async fn orphans_only_where_the_archive_was_read_whole() {
    let f = Fixture::build(Kind::CowV8, false).await;
    // older than the oldest active instant (T1), on no timeline
    let orphan = "p1/old-0_0-1-1_20231201000000000.parquet";
    f.put(orphan, b"orphan").await;
    // newer than the oldest active instant, on no timeline
    let stray = "p1/stray-0_0-1-1_20240101003000000.parquet";
    f.put(stray, b"stray").await;
    // Hudi's bootstrap instant
    let boot = "p1/boot-0_0-1-1_00000000000001.parquet";
    f.put(boot, b"boot").await;
    let r = audited(&f).await;
    assert!(r.archive.complete, "{:?}", r.archive);
    assert_eq!(r.oldest_active_instant.as_deref(), Some(T1));
    assert_eq!(example_paths(&r, Class::Orphan), vec![orphan.to_string()]);
    let mut unknown = example_paths(&r, Class::Unknown);
    unknown.sort();
    assert_eq!(unknown, vec![boot.to_string(), stray.to_string()]);

    // An archive the audit does not read whole: no orphan is claimed.
    f.put(".hoodie/timeline/history/_version_", b"1").await;
    let r = audited(&f).await;
    assert!(!r.archive.complete);
    assert_eq!(files(&r, Class::Orphan), 0, "{r:#?}");
    assert_eq!(files(&r, Class::Unknown), 3, "{r:#?}");
}

#[tokio::test]
async fn the_audit_only_reads() {
    let f = Fixture::build(Kind::MorV9, true).await;
    let before = f.snapshot().await;
    let counter = Arc::new(RequestCounter::new());
    let table = Table::open_storage(f.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    let r = audit(&table, &AuditOptions::default()).await.unwrap();
    assert!(r.data_files() > 0);
    assert_eq!(f.snapshot().await, before);
    for (kind, n) in counter.snapshot() {
        assert!(!kind.is_mutation(), "{kind:?} x{n}");
    }
}

#[tokio::test]
async fn a_version_6_log_file_is_classified_by_its_blocks_when_no_write_stats_name_it() {
    let f = Fixture::build(Kind::MorV6, false).await;
    // The failed append to T1's slice carries T1 in its name, but no completed deltacommit's
    // write stats name it, and its bytes are no log blocks: opened, and unknown (never taken
    // for T1's, which is committed).
    let r = audited(&f).await;
    assert_eq!(r.logs_opened, 1, "{r:#?}");
    let unknown = example_paths(&r, Class::Unknown);
    assert_eq!(
        unknown,
        vec![format!("p1/.fg1-0_{T1}.log.1_0-9-9")],
        "{r:#?}"
    );
}
