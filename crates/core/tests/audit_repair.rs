//! `audit --repair` on local fixture tables: only leftovers and orphans older than the floor go,
//! under the lock, checked again; a dry run and a refused floor change nothing; a file the
//! metadata table may list stays; a quarantine gets a copy first.

use std::time::{Duration, SystemTime};

use common::fixtures::{build_local, Fixture, Kind, TF};
use hudi_keeper_core::audit::journal::{Journal, JOURNAL_DIR};
use hudi_keeper_core::audit::repair::{repair, RepairOptions, RepairReport, DEFAULT_OLDER_THAN};
use hudi_keeper_core::audit::{AuditOptions, Class};
use hudi_keeper_core::exec::rollback::{rollback, Selection};
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};
use hudi_keeper_core::storage::testing::FailNth;
use hudi_keeper_core::storage::{OpKind, Storage, StorageOptions};
use hudi_keeper_core::Error;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{open, rollback_options};
use hudi_keeper_test_support::set_mtime;

const LEFTOVER: &str = "p2/zombie-0_0-9-9_20240101020000000.parquet";
const ORPHAN: &str = "p1/old-0_0-1-1_20231201000000000.parquet";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn options(older_than: Duration) -> RepairOptions {
    RepairOptions {
        older_than,
        lock: LockOptions {
            provider: LockProvider::filesystem_default(),
            ..LockOptions::none()
        },
        dry_run: false,
        quarantine: None,
        metadata_table_first: false,
    }
}

/// `repair` with the floor at one hour and the fixture's lock.
fn repair_an_hour_on(
    rt: &tokio::runtime::Runtime,
    table: &hudi_keeper_core::Table,
) -> RepairReport {
    rt.block_on(repair(
        table,
        &options(Duration::from_secs(3600)),
        &AuditOptions::default(),
    ))
    .unwrap()
}

/// Take the repair journals out of a table snapshot, parsed.
fn journals_in(snapshot: &mut std::collections::BTreeMap<String, Vec<u8>>) -> Vec<Journal> {
    let paths: Vec<String> = snapshot
        .keys()
        .filter(|k| k.starts_with(JOURNAL_DIR))
        .cloned()
        .collect();
    paths
        .into_iter()
        .map(|p| {
            let bytes = snapshot.remove(&p).unwrap();
            serde_json::from_slice(&bytes).unwrap()
        })
        .collect()
}

fn removed_paths(r: &RepairReport) -> Vec<&str> {
    r.removed.iter().map(|x| x.path.as_str()).collect()
}

/// A rolled-back failed write, then a leftover of it and an orphan planted, both `age` old.
fn table_with_leftovers(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    kind: Kind,
    age: Duration,
) -> Fixture {
    let f = build_local(rt, dir, kind);
    let table = rt.block_on(open(&f));
    rt.block_on(rollback(
        &table,
        &Selection::AllFailed,
        &rollback_options(),
        None,
    ))
    .expect("rollback");
    assert!(LEFTOVER.ends_with(&format!("_{TF}.parquet")));
    for p in [LEFTOVER, ORPHAN] {
        rt.block_on(f.put(p, b"stray"));
        set_mtime(&dir.join(p), SystemTime::now() - age);
    }
    f
}

#[test]
fn only_leftovers_and_orphans_older_than_the_floor_go() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV8, Duration::from_secs(7200));
    let table = rt.block_on(open(&f));
    let before = rt.block_on(f.snapshot());

    // Younger than the default floor (3 days): both stay, the table as it was.
    let r = rt
        .block_on(repair(
            &table,
            &options(DEFAULT_OLDER_THAN),
            &AuditOptions::default(),
        ))
        .unwrap();
    assert!(r.removed.is_empty(), "{:?}", r.removed);
    assert_eq!(r.kept.len(), 2, "{:?}", r.kept);
    assert!(r.kept.iter().all(|k| k.reason.contains("--older-than")));
    assert_eq!(rt.block_on(f.snapshot()), before);

    // A dry run at one hour names both and changes nothing.
    let mut dry = options(Duration::from_secs(3600));
    dry.dry_run = true;
    let r = rt
        .block_on(repair(&table, &dry, &AuditOptions::default()))
        .unwrap();
    let mut named: Vec<_> = r.removed.iter().map(|x| x.path.as_str()).collect();
    named.sort();
    assert_eq!(named, vec![ORPHAN, LEFTOVER]);
    assert_eq!(rt.block_on(f.snapshot()), before);

    // For real: exactly those two files go, named first in a journal that is then finished;
    // the lock is released.
    let r = repair_an_hour_on(&rt, &table);
    assert_eq!(r.removed.len(), 2, "{:?} {:?}", r.removed, r.kept);
    let mut after = rt.block_on(f.snapshot());
    let journals = journals_in(&mut after);
    assert_eq!(journals.len(), 1, "{journals:?}");
    let j = &journals[0];
    assert_eq!(Some(&j.id), r.journal.as_ref());
    assert!(j.finished.is_some());
    let mut named: Vec<_> = j.files.iter().map(|f| f.path.as_str()).collect();
    named.sort();
    assert_eq!(named, vec![ORPHAN, LEFTOVER]);
    let mut expected = before.clone();
    expected.remove(LEFTOVER);
    expected.remove(ORPHAN);
    assert_eq!(after, expected);
    let again = rt
        .block_on(hudi_keeper_core::audit::audit(
            &table,
            &AuditOptions::default(),
        ))
        .unwrap();
    assert_eq!(again.count(Class::RollbackLeftover).files, 0);
    assert_eq!(again.count(Class::Orphan).files, 0);
}

#[test]
fn a_floor_under_an_hour_is_refused_before_anything() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV6, Duration::from_secs(7200));
    let table = rt.block_on(open(&f));
    let before = rt.block_on(f.snapshot());
    let err = rt
        .block_on(repair(
            &table,
            &options(Duration::from_secs(3599)),
            &AuditOptions::default(),
        ))
        .unwrap_err();
    assert!(matches!(err, Error::RepairRefused { .. }), "{err}");
    assert!(err.to_string().contains("1 hour"), "{err}");
    assert_eq!(rt.block_on(f.snapshot()), before);
}

#[test]
fn a_file_the_metadata_table_may_list_stays() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV8, Duration::from_secs(7200));
    // The metadata table completed a deltacommit of the orphan's instant: it may list it.
    rt.block_on(f.put(
        ".hoodie/metadata/.hoodie/hoodie.properties",
        b"hoodie.table.name=fx_metadata\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n",
    ));
    for name in [
        "20231201000000000.deltacommit.requested",
        "20231201000000000.deltacommit.inflight",
        "20231201000000000_20231201000001000.deltacommit",
    ] {
        rt.block_on(f.put(&format!(".hoodie/metadata/.hoodie/timeline/{name}"), b""));
    }
    let table = rt.block_on(open(&f));
    let r = repair_an_hour_on(&rt, &table);
    assert_eq!(removed_paths(&r), vec![LEFTOVER]);
    assert_eq!(r.kept.len(), 1, "{:?}", r.kept);
    assert_eq!(r.kept[0].path, ORPHAN);
    assert!(r.kept[0].reason.contains("metadata table"), "{:?}", r.kept);
    assert!(dir.path().join(ORPHAN).exists());
}

#[test]
fn a_quarantine_gets_each_file_before_it_is_deleted() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let quarantine = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::MorV9, Duration::from_secs(7200));
    let table = rt.block_on(open(&f));
    let mut o = options(Duration::from_secs(3600));
    o.quarantine = Some(
        Storage::open(
            quarantine.path().to_str().unwrap(),
            &StorageOptions::default(),
        )
        .unwrap(),
    );
    let r = rt
        .block_on(repair(&table, &o, &AuditOptions::default()))
        .unwrap();
    assert_eq!(r.removed.len(), 2, "{:?}", r.kept);
    for p in [LEFTOVER, ORPHAN] {
        assert!(!dir.path().join(p).exists(), "{p} still in the table");
        assert_eq!(std::fs::read(quarantine.path().join(p)).unwrap(), b"stray");
    }
}

/// Writes a completed commit of the orphan's instant the moment the table lock is taken: a
/// writer that committed between the audit and the lock.
#[derive(Debug)]
struct CommitsOnLock(std::path::PathBuf);

impl hudi_keeper_core::storage::Interceptor for CommitsOnLock {
    fn before(
        &self,
        _: hudi_keeper_core::storage::OpKind,
        _: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        Ok(())
    }

    fn after(
        &self,
        op: hudi_keeper_core::storage::OpKind,
        path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        if op.is_mutation() && path.as_str() == ".hoodie/lock" {
            let timeline = self.0.join(".hoodie/timeline");
            for name in [
                "20231201000000000.commit.requested",
                "20231201000000000.commit.inflight",
                "20231201000000000_20231201000001000.commit",
            ] {
                let _ = std::fs::write(timeline.join(name), b"");
            }
        }
        Ok(())
    }
}

#[test]
fn each_file_is_classified_again_under_the_lock() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV8, Duration::from_secs(7200));
    let hook = std::sync::Arc::new(CommitsOnLock(dir.path().to_path_buf()));
    let table = rt
        .block_on(hudi_keeper_core::Table::open_storage(
            f.storage().with_interceptor(hook),
        ))
        .unwrap();
    let r = repair_an_hour_on(&rt, &table);
    assert_eq!(removed_paths(&r), vec![LEFTOVER]);
    assert_eq!(r.kept.len(), 1, "{:?}", r.kept);
    assert!(
        r.kept[0].reason.starts_with("now committed"),
        "{:?}",
        r.kept
    );
    assert!(dir.path().join(ORPHAN).exists());
}

#[test]
fn a_cut_off_repair_is_resumed_from_its_journal() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV8, Duration::from_secs(7200));
    // The second delete fails: the first file is gone, the second not.
    let fail = std::sync::Arc::new(FailNth::new(&[OpKind::Delete], 2));
    let cut = rt
        .block_on(hudi_keeper_core::Table::open_storage(
            f.storage().with_interceptor(fail.clone()),
        ))
        .unwrap();
    let err = rt
        .block_on(repair(
            &cut,
            &options(Duration::from_secs(3600)),
            &AuditOptions::default(),
        ))
        .unwrap_err();
    assert!(fail.fired(), "{err}");
    let mut snap = rt.block_on(f.snapshot());
    let journals = journals_in(&mut snap);
    assert_eq!(journals.len(), 1, "{journals:?}");
    assert!(journals[0].finished.is_none(), "{:?}", journals[0]);
    let gone: Vec<&str> = [LEFTOVER, ORPHAN]
        .into_iter()
        .filter(|p| !dir.path().join(p).exists())
        .collect();
    assert_eq!(gone.len(), 1, "one file went before the cut");
    assert!(
        !dir.path().join(".hoodie/lock").exists(),
        "the cut-off repair released its lock"
    );

    // The next repair resumes the journal: the file gone counts as removed by the cut-off run.
    let table = rt.block_on(open(&f));
    let r = repair_an_hour_on(&rt, &table);
    assert_eq!(r.resumed_journals, vec![journals[0].id.clone()]);
    let mut removed: Vec<(&str, bool)> = r
        .removed
        .iter()
        .map(|x| (x.path.as_str(), x.already_gone))
        .collect();
    removed.sort();
    let mut expected: Vec<(&str, bool)> = [ORPHAN, LEFTOVER]
        .into_iter()
        .map(|p| (p, gone.contains(&p)))
        .collect();
    expected.sort();
    assert_eq!(removed, expected, "{:?}", r.kept);
    assert!(!dir.path().join(LEFTOVER).exists());
    assert!(!dir.path().join(ORPHAN).exists());
    let mut snap = rt.block_on(f.snapshot());
    let journals = journals_in(&mut snap);
    assert!(
        journals.iter().all(|j| j.finished.is_some()),
        "{journals:?}"
    );
}

#[test]
fn a_journal_with_another_quarantine_or_unreadable_refuses_before_anything() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = table_with_leftovers(&rt, dir.path(), Kind::CowV6, Duration::from_secs(7200));
    let table = rt.block_on(open(&f));
    // A cut-off repair that quarantined to somewhere else.
    let quarantine = tempfile::tempdir().unwrap();
    let q = Storage::open(
        quarantine.path().to_str().unwrap(),
        &StorageOptions::default(),
    )
    .unwrap();
    let audit = rt
        .block_on(hudi_keeper_core::audit::audit(
            &table,
            &AuditOptions {
                collect: true,
                ..AuditOptions::default()
            },
        ))
        .unwrap();
    let j = Journal::new(&audit.candidates, Some(&q));
    rt.block_on(j.create(table.storage())).unwrap();
    let before = rt.block_on(f.snapshot());
    let err = rt
        .block_on(repair(
            &table,
            &options(Duration::from_secs(3600)),
            &AuditOptions::default(),
        ))
        .unwrap_err();
    assert!(matches!(err, Error::RepairRefused { .. }), "{err}");
    assert!(err.to_string().contains("--quarantine"), "{err}");
    assert_eq!(rt.block_on(f.snapshot()), before);

    // A journal that cannot be parsed: what it names is unknown, so nothing goes.
    rt.block_on(f.put(&format!("{JOURNAL_DIR}/{}.json", j.id), b"{ not json"));
    let before = rt.block_on(f.snapshot());
    let mut o = options(Duration::from_secs(3600));
    o.quarantine = Some(q);
    let err = rt
        .block_on(repair(&table, &o, &AuditOptions::default()))
        .unwrap_err();
    assert!(matches!(err, Error::Journal { .. }), "{err}");
    assert_eq!(rt.block_on(f.snapshot()), before);
}
