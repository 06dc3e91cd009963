//! Rollback heartbeats (Hudi 1.2's multi-writer rollback protocol): a pending rollback whose
//! heartbeat is fresh is another process's, whatever its age; hudi-keeper's own rollbacks claim
//! the heartbeat while they run and delete it when done (a cut-off run leaves it to expire);
//! heartbeats of rollbacks are no evidence of LAZY writers; one plan per failed instant.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::fixtures::{build_local, Fixture, Kind, TF};
use hudi_keeper_core::exec::rollback::{assess_table, preview, rollback, Selection};
use hudi_keeper_core::protocol::detect::Verdict;
use hudi_keeper_core::storage::testing::FailNth;
use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use hudi_keeper_core::Table;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{open, rollback_options as opts};
use hudi_keeper_test_support::set_mtime;

const R: &str = "20240101030000000";

/// The failed write's rollback plan, scheduled as `R` by "another process".
async fn schedule_elsewhere(f: &Fixture, table: &Table) {
    let plan = preview(table, &Selection::AllFailed, &opts())
        .await
        .unwrap()[0]
        .plan
        .to_avro()
        .unwrap();
    f.put(&format!(".hoodie/timeline/{R}.rollback.requested"), &plan)
        .await;
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_pending_rollback_with_a_fresh_heartbeat_is_never_resumed_whatever_its_age() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = build_local(&rt, dir.path(), Kind::CowV8);
    let table = rt.block_on(open(&f));
    rt.block_on(schedule_elsewhere(&f, &table));
    // Its timeline file is an hour old: by age alone it would be taken over at once.
    common::age_all(dir.path(), Duration::from_secs(3600));
    rt.block_on(f.put(&format!(".hoodie/.heartbeat/{R}"), b""));
    let before = rt.block_on(f.snapshot());

    let timeline = rt.block_on(table.timeline()).unwrap();
    let judged = rt
        .block_on(assess_table(&table, &timeline, &opts()))
        .unwrap();
    let a = judged
        .assessments
        .iter()
        .find(|a| a.requested_time == R)
        .expect("the pending rollback is assessed");
    assert_eq!(a.verdict, Verdict::RollbackInProgress, "{}", a.reason);
    assert!(a.heartbeat_age_ms.is_some());

    let done = rt
        .block_on(rollback(&table, &Selection::AllFailed, &opts(), None))
        .unwrap();
    assert!(done.is_empty(), "{done:?}");
    let mut forced = opts();
    forced.force = true;
    let err = rt
        .block_on(rollback(
            &table,
            &Selection::Instant(TF.into()),
            &forced,
            None,
        ))
        .unwrap_err();
    assert!(
        err.to_string().contains("running in another process"),
        "{err}"
    );
    assert_eq!(rt.block_on(f.snapshot()), before);

    // Its heartbeat expired: whoever ran it is gone, and it is resumed with its own plan.
    set_mtime(
        &dir.path().join(format!(".hoodie/.heartbeat/{R}")),
        SystemTime::now() - Duration::from_secs(3600),
    );
    let done = rt
        .block_on(rollback(&table, &Selection::AllFailed, &opts(), None))
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].rollback_instant, R);
    assert!(done[0].resumed);
    let after = rt.block_on(f.snapshot());
    assert!(!after.contains_key(&format!(".hoodie/.heartbeat/{R}")));
}

/// Records each mutating request's kind and path, in order.
#[derive(Debug, Default)]
struct Writes(Mutex<Vec<(OpKind, String)>>);

impl Interceptor for Writes {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op.is_mutation() {
            self.0.lock().unwrap().push((op, path.to_string()));
        }
        Ok(())
    }
}

#[tokio::test]
async fn our_rollback_claims_its_heartbeat_before_its_first_delete_and_deletes_it_when_done() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let writes = Arc::new(Writes::default());
    let table = Table::open_storage(f.storage().with_interceptor(writes.clone()))
        .await
        .unwrap();
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    let r = &done[0].rollback_instant;
    let hb = format!(".hoodie/.heartbeat/{r}");
    let writes = writes.0.lock().unwrap().clone();
    let requested = writes
        .iter()
        .position(|(_, p)| *p == format!(".hoodie/timeline/{r}.rollback.requested"))
        .expect("the rollback was scheduled");
    let claimed = writes
        .iter()
        .position(|(op, p)| *p == hb && *op != OpKind::Delete)
        .expect("the rollback's heartbeat was written");
    let first_data_delete = writes
        .iter()
        .position(|(op, p)| *op == OpKind::Delete && p.starts_with("p"))
        .expect("data files were deleted");
    assert!(
        requested < claimed && claimed < first_data_delete,
        "{writes:?}"
    );
    let released = writes
        .iter()
        .rposition(|(op, p)| *p == hb && *op == OpKind::Delete)
        .expect("the heartbeat was deleted");
    let completed = writes
        .iter()
        .position(|(_, p)| p.starts_with(&format!(".hoodie/timeline/{r}_")))
        .expect("the rollback was completed");
    assert!(completed < released, "{writes:?}");
    assert!(!f.snapshot().await.contains_key(&hb));
}

#[tokio::test]
async fn a_cut_off_rollback_leaves_its_heartbeat_so_nobody_takes_it_over_before_it_expires() {
    let f = Fixture::build(Kind::CowV8, false).await;
    // The first delete (a data file) fails: the rollback is scheduled, claimed, and stops.
    let fail = Arc::new(FailNth::new(&[OpKind::Delete], 1));
    let cut = Table::open_storage(f.storage().with_interceptor(fail.clone()))
        .await
        .unwrap();
    rollback(&cut, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(fail.fired());
    let snap = f.snapshot().await;
    let r = snap
        .keys()
        .find_map(|k| {
            k.strip_prefix(".hoodie/timeline/")
                .and_then(|n| n.strip_suffix(".rollback.requested"))
        })
        .expect("the rollback is pending")
        .to_string();
    assert!(
        snap.contains_key(&format!(".hoodie/.heartbeat/{r}")),
        "the heartbeat stays"
    );
    // A rerun right away (even one that would take over any pending rollback by age) leaves
    // it: its heartbeat is fresh.
    let table = open(&f).await;
    let done = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert!(done.is_empty(), "{done:?}");
    assert_eq!(f.snapshot().await, snap);
}

#[tokio::test]
async fn heartbeats_of_rollbacks_are_no_evidence_of_lazy_writers() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let done = rollback(&open(&f).await, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    let r = done[0].rollback_instant.clone();
    // A writer's write without heartbeat file, and a heartbeat left by the completed rollback.
    let t = common::fixtures::instant_now(-3_600_000);
    f.start_write(&t).await;
    f.put(&format!(".hoodie/.heartbeat/{r}"), b"").await;
    let table = open(&f).await;
    let timeline = table.timeline().await.unwrap();
    let mut o = opts();
    o.lazy_writers = None;
    let judged = assess_table(&table, &timeline, &o).await.unwrap();
    assert!(!judged.writers.lazy_writers_known, "{:?}", judged.writers);
    let a = judged
        .assessments
        .iter()
        .find(|a| a.requested_time == t)
        .unwrap();
    assert_ne!(a.verdict, Verdict::EagerWriterSuspected, "{}", a.reason);
}

#[tokio::test]
async fn no_second_rollback_is_scheduled_beside_a_pending_one_whose_plan_cannot_be_read() {
    let f = Fixture::build(Kind::CowV8, false).await;
    // A pending rollback whose plan is garbage: it may be the failed write's.
    f.put(
        &format!(".hoodie/timeline/{R}.rollback.requested"),
        b"not avro",
    )
    .await;
    let before = f.snapshot().await;
    let table = open(&f).await;
    let err = rollback(&table, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot be read"), "{err}");
    assert_eq!(f.snapshot().await, before);
}

#[test]
fn an_expired_clustering_is_rolled_back_only_with_clustering_expirations_on() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let f = build_local(&rt, dir.path(), Kind::CowV8);
    // A clustering job that died two hours ago: its plan, inflight, one file, its marker and
    // its (expired) heartbeat, as Hudi 1.2 leaves them with clustering expirations on.
    let c = "20240101023000000";
    let file = format!("p1/cl-0_0-1-1_{c}.parquet");
    rt.block_on(async {
        f.put(
            &format!(".hoodie/timeline/{c}.clustering.requested"),
            b"plan",
        )
        .await;
        f.put(&format!(".hoodie/timeline/{c}.clustering.inflight"), b"")
            .await;
        f.put(&file, b"clustered").await;
        f.put(&format!(".hoodie/.temp/{c}/{file}.marker.CREATE"), b"")
            .await;
        f.put(&format!(".hoodie/.heartbeat/{c}"), b"").await;
    });
    common::age_all(dir.path(), Duration::from_secs(2 * 3600));
    let table = rt.block_on(open(&f));
    let timeline = rt.block_on(table.timeline()).unwrap();
    let verdict = |o: &hudi_keeper_core::exec::rollback::RollbackOptions| {
        let judged = rt.block_on(assess_table(&table, &timeline, o)).unwrap();
        judged
            .assessments
            .iter()
            .find(|a| a.requested_time == c)
            .map(|a| a.verdict)
            .unwrap()
    };
    assert_eq!(verdict(&opts()), Verdict::NotACandidate);
    let mut on = opts();
    on.clustering_expiration = Some(Duration::from_secs(3600));
    assert_eq!(verdict(&on), Verdict::Expired);
    // Off (Hudi's default): named, it is refused as a table service.
    let err = rt
        .block_on(rollback(
            &table,
            &Selection::Instant(c.into()),
            &opts(),
            None,
        ))
        .unwrap_err();
    assert!(err.to_string().contains("clustering"), "{err}");
    let done = rt
        .block_on(rollback(&table, &Selection::Instant(c.into()), &on, None))
        .unwrap();
    assert_eq!(done[0].action, "clustering", "{done:?}");
    let after = rt.block_on(f.snapshot());
    assert!(!after.contains_key(&file));
    assert!(!after.contains_key(&format!(".hoodie/timeline/{c}.clustering.requested")));
    assert!(!after.contains_key(&format!(".hoodie/timeline/{c}.clustering.inflight")));
}
