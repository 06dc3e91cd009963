//! The audit's check of the metadata table against the store, and `--repair-metadata-table`, on
//! the version-6 fixture table with a real metadata table (HFile base file and HFile data blocks,
//! as Hudi 0.15 writes them): no disagreement as built (the failed write's completed
//! metadata-table deltacommit is not read, as in Hudi); a data file deleted and one added are
//! reported in their partitions, both directions; the repair is refused with a pending write and
//! on a metadata table that agrees (the table byte-identical), and deletes a disagreeing one.

use common::fixtures::{Fixture, Kind, T1, T2};
use hudi_keeper_core::audit::repair::{repair, RepairOptions};
use hudi_keeper_core::audit::repair_metadata_table::repair_metadata_table;
use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport};
use hudi_keeper_core::exec::rollback::{rollback, Selection};
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::Error;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{
    assert_unchanged, open, rollback_options, with_real_v6_metadata_table,
};

const DELETED: &str = "p1/fg1-0_0-1-1_20240101000000000.parquet";
const ADDED: &str = "p2/extra-0_0-2-2_20240101010000000.parquet";

async fn audited(f: &Fixture) -> AuditReport {
    audit(&open(f).await, &AuditOptions::default())
        .await
        .expect("audit")
}

fn options(dry_run: bool) -> RepairOptions {
    RepairOptions {
        older_than: std::time::Duration::from_secs(3600),
        lock: LockOptions::none(),
        dry_run,
        quarantine: None,
        metadata_table_first: false,
    }
}

async fn fixture() -> Fixture {
    let f = Fixture::build(Kind::CowV6, true).await;
    with_real_v6_metadata_table(&f).await;
    assert!(DELETED.ends_with(&format!("_{T1}.parquet")));
    assert!(ADDED.ends_with(&format!("_{T2}.parquet")));
    f
}

async fn refused(f: &Fixture, report: &AuditReport, needle: &str) {
    let before = f.snapshot().await;
    let table = open(f).await;
    for dry_run in [true, false] {
        match repair_metadata_table(&table, report, &options(dry_run), &AuditOptions::default())
            .await
        {
            Err(Error::RepairRefused { reason, .. }) => {
                assert!(reason.contains(needle), "{reason}")
            }
            other => panic!("expected a refusal with `{needle}`, got {other:?}"),
        }
    }
    assert_unchanged(&before, &f.snapshot().await, needle);
}

#[tokio::test]
async fn drift_is_reported_per_partition_in_both_directions_and_repaired_only_when_asked() {
    let f = fixture().await;
    let clean = audited(&f).await;
    let m = &clean.metadata_table;
    assert!(m.checked && !m.disagrees(), "{m:#?}");
    // p1: fg1 (T1), fg3 (T2); p2: fg2 (T1). The failed write's files are not listed (its
    // metadata-table deltacommit completed, but its data-table instant did not).
    assert_eq!((m.listed_partitions, m.listed_files), (2, 3), "{m:#?}");

    f.delete(DELETED).await;
    f.put(ADDED, b"a copy").await;
    let drift = audited(&f).await;
    let m = &drift.metadata_table;
    assert!(m.checked && m.disagrees(), "{m:#?}");
    assert_eq!((m.missing_from_store, m.not_listed), (1, 1), "{m:#?}");
    assert_eq!(
        m.partitions["p1"].missing_examples,
        vec![DELETED.to_string()]
    );
    assert_eq!(m.partitions["p1"].not_listed, 0);
    assert_eq!(
        m.partitions["p2"].not_listed_examples,
        vec![ADDED.to_string()]
    );
    assert_eq!(m.partitions["p2"].missing_from_store, 0);

    // The failed write is pending: a live writer would write to the metadata table.
    refused(&f, &drift, "roll it back first").await;

    let table = open(&f).await;
    rollback(&table, &Selection::AllFailed, &rollback_options(), None)
        .await
        .expect("rollback");
    let after = audited(&f).await;
    assert_eq!(
        (
            after.metadata_table.missing_from_store,
            after.metadata_table.not_listed
        ),
        (1, 1),
        "{:#?}",
        after.metadata_table
    );

    // The files repair leaves the metadata table alone.
    let files = repair(&table, &options(false), &AuditOptions::default())
        .await
        .expect("files repair");
    assert!(files.removed.is_empty());
    assert!(f
        .snapshot()
        .await
        .contains_key(".hoodie/metadata/.hoodie/hoodie.properties"));

    // A dry run shows it and changes nothing.
    let before = f.snapshot().await;
    let dry = repair_metadata_table(&table, &after, &options(true), &AuditOptions::default())
        .await
        .expect("dry run");
    assert!(dry.dry_run && dry.deleted, "{dry:?}");
    assert!(dry.reason.contains("1 file(s) the store lacks"), "{dry:?}");
    assert_unchanged(&before, &f.snapshot().await, "dry run");

    let done = repair_metadata_table(&table, &after, &options(false), &AuditOptions::default())
        .await
        .expect("repair");
    assert!(!done.dry_run && done.deleted, "{done:?}");
    let left: Vec<String> = f
        .snapshot()
        .await
        .into_keys()
        .filter(|k| k.starts_with(".hoodie/metadata"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let props = String::from_utf8(f.snapshot().await[".hoodie/hoodie.properties"].clone()).unwrap();
    assert!(
        props.contains("hoodie.table.metadata.partitions=\n"),
        "{props}"
    );
    let gone = audited(&f).await;
    assert!(!gone.metadata_table.checked);
    assert!(
        gone.metadata_table
            .not_checked
            .as_deref()
            .is_some_and(|w| w.contains("no metadata table in use")),
        "{:?}",
        gone.metadata_table
    );
    // Nothing left to repair.
    refused(&f, &gone, "not compared with the store").await;
}

#[tokio::test]
async fn a_metadata_table_that_agrees_is_not_deleted() {
    let f = fixture().await;
    let table = open(&f).await;
    rollback(&table, &Selection::AllFailed, &rollback_options(), None)
        .await
        .expect("rollback");
    let r = audited(&f).await;
    assert!(r.metadata_table.checked && !r.metadata_table.disagrees());
    refused(&f, &r, "agrees with the store").await;
}

#[tokio::test]
async fn an_unreadable_metadata_table_is_not_checked_and_the_audit_goes_on() {
    // The plain fixture's metadata table holds placeholder bytes, not HFiles.
    let f = Fixture::build(Kind::MorV6, true).await;
    let r = audited(&f).await;
    let why = r.metadata_table.not_checked.clone().unwrap_or_default();
    assert!(
        !r.metadata_table.checked && why.contains("cannot be read as Hudi reads it"),
        "{:?}",
        r.metadata_table
    );
    assert!(r.data_files() > 0);
}
