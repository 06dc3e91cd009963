//! Interrupted and concurrent rollbacks: a crash at any storage call, then a rerun, ends where
//! an uninterrupted rollback ends; a recent pending rollback is left to whoever runs it; one
//! whose instant has since completed is refused; finishing one another process completed
//! writes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use common::fixtures::{bump, rel, Fixture, Kind, TF};
use hudi_keeper_core::exec::rollback::{preview, rollback, RollbackOptions, Selection};
use hudi_keeper_core::storage::OpKind;
use hudi_keeper_core::{Error, Table};
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::crash::Crash;
use hudi_keeper_test_support::engine::{
    as_version_5, assert_unchanged, open, rollback_options as opts, rollback_plan_bytes,
};
use hudi_keeper_test_support::normalize::Normalization;

/// Fail the n-th storage call of a rollback, rerun, and compare with an uninterrupted run.
async fn crash_at_every_call(kind: Kind, mdt: bool) -> usize {
    crash_at_every_call_without(kind, mdt, &[]).await
}

/// [`crash_at_every_call`] on the fixture with `drop` deleted after it is built.
async fn crash_at_every_call_without(kind: Kind, mdt: bool, drop: &[&str]) -> usize {
    crash_at_every_call_of(kind, mdt, drop, false).await
}

/// [`crash_at_every_call_without`], the fixture made a table-version-5 one first when
/// `version_5`.
async fn crash_at_every_call_of(kind: Kind, mdt: bool, drop: &[&str], version_5: bool) -> usize {
    Crash {
        build: async || {
            let f = Fixture::build(kind, mdt).await;
            if version_5 {
                as_version_5(&f).await;
            }
            for p in drop {
                f.delete(p).await;
            }
            f
        },
        run: async |t: &Table| {
            rollback(t, &Selection::AllFailed, &opts(), None)
                .await
                .map(|_| ())
        },
        how: Normalization::ROLLBACK,
        count_files: false,
    }
    .at_every_call()
    .await
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

/// Table version 5 (Hudi 0.13) with a metadata table: the deltacommit at R recording the
/// deleted files; and, with the failed write's metadata-table deltacommit pending, that one's
/// rollback at a later instant first.
#[tokio::test]
async fn crash_at_any_storage_call_then_rerun_ends_like_an_uninterrupted_rollback_v5_cow_mdt() {
    let pending = format!(".hoodie/metadata/.hoodie/{TF}.deltacommit");
    for drop in [vec![], vec![pending.as_str()]] {
        let n = crash_at_every_call_of(Kind::CowV6, true, &drop, true).await;
        eprintln!("v5 cow + metadata table {drop:?}: {n} injection points");
    }
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

/// A run that fails after some of its rollbacks completed still tells of each of them
/// (`rollback_observed`): at every storage call of a run over two failed writes, what the
/// observer was told is exactly what the timeline shows rolled back afterwards, and some failure
/// comes after the first rollback completed (a daemon counts and shows those rollbacks).
#[tokio::test]
async fn a_run_that_fails_after_a_completed_rollback_still_reports_it() {
    use hudi_keeper_core::exec::rollback::{pending_rollbacks, rollback_observed};
    use hudi_keeper_core::storage::testing::FailNth;
    const TE: &str = "20240101015000000";
    let mut partial = 0;
    for n in 1..200 {
        let f = Fixture::build(Kind::CowV8, false).await;
        f.start_write(TE).await;
        let fail = Arc::new(FailNth::new(&[], n));
        let Ok(t) = Table::open_storage(f.storage().with_interceptor(fail.clone())).await else {
            continue; // a call of the table's opening
        };
        let told = std::sync::Mutex::new(Vec::new());
        let r = rollback_observed(&t, &Selection::AllFailed, &opts(), None, &|d| {
            told.lock().unwrap().push(d.instant.clone())
        })
        .await;
        let told = told.into_inner().unwrap();
        if let Ok(done) = &r {
            // No failure, or one the run may pass over (a heartbeat's clean-up).
            assert_eq!((done.len(), told.len()), (2, 2), "call {n}");
            if !fail.fired() {
                assert!(partial > 0, "no failure came after a completed rollback");
                return;
            }
            continue;
        }
        // Rolled back: no longer pending, and no rollback of it pending either.
        let table = open(&f).await;
        let timeline = table.timeline().await.unwrap();
        let (rolling, _) = pending_rollbacks(&table, &timeline).await.unwrap();
        let rolled: Vec<String> = [TE, TF]
            .into_iter()
            .filter(|t| !timeline.find(t).any(|i| i.is_pending()) && !rolling.contains_key(*t))
            .map(str::to_string)
            .collect();
        let mut told_sorted = told.clone();
        told_sorted.sort();
        assert_eq!(told_sorted, rolled, "call {n}");
        if !told.is_empty() {
            partial += 1;
        }
    }
    panic!("the run never ended without a failure");
}
