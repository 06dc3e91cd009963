//! Crash at every storage call: run an engine on a fixture once uninterrupted, counting its
//! storage calls; then, for every call, on a fresh fixture, fail that call (before it reaches
//! storage, and after it took effect), rerun, and compare the end state with the
//! uninterrupted run's.

use std::sync::Arc;

use hudi_keeper_core::storage::testing::{CountingInterceptor, FailMode, FailNth};
use hudi_keeper_core::storage::OpKind;
use hudi_keeper_core::{Error, Table};

use super::fixtures::Fixture;
use super::normalize::{names, normalize, Normalization, Snapshot};

/// What the runs are and how their end states compare.
pub struct Crash<B, R> {
    /// A fresh fixture, the same every time.
    pub build: B,
    /// The run under test (a rollback, a restore) on a table of the fixture.
    pub run: R,
    /// How the end states are normalized before they are compared.
    pub how: Normalization,
    /// The end states must also hold as many files (normalized names can coincide: a redundant
    /// extra instant would hide among them).
    pub count_files: bool,
}

/// The heartbeat files of the fixture's table and its metadata table (paths).
async fn heartbeat_files(f: &Fixture) -> Vec<String> {
    f.snapshot()
        .await
        .into_keys()
        .filter(|k| k.starts_with(".hoodie/.heartbeat/") || k.contains("/.hoodie/.heartbeat/"))
        .collect()
}

impl<B, R> Crash<B, R>
where
    B: AsyncFn() -> Fixture,
    R: AsyncFn(&Table) -> Result<(), Error>,
{
    /// Fail every call in turn, rerun, and compare; the number of injection points.
    pub async fn at_every_call(&self) -> usize {
        self.at_every_call_checking(async |_: &Fixture| (), async |_: &Fixture, (), _: &str| {})
            .await
    }

    /// As [`Self::at_every_call`], with `before` run on each fixture before the failing run and
    /// its result handed to `after_failure` (with the failure's name) once the run failed,
    /// before the rerun: what a failure must have left.
    pub async fn at_every_call_checking<T>(
        &self,
        before: impl AsyncFn(&Fixture) -> T,
        after_failure: impl AsyncFn(&Fixture, T, &str),
    ) -> usize {
        let reference = (self.build)().await;
        let counter = Arc::new(CountingInterceptor::new());
        let t = Table::open_storage(reference.storage().with_interceptor(counter.clone()))
            .await
            .unwrap();
        (self.run)(&t).await.unwrap();
        let reference_snapshot = reference.snapshot().await;
        let expected = normalize(&reference_snapshot, self.how);
        let calls = counter.total() as usize;
        assert!(calls > 10, "suspiciously few calls: {calls}");

        for (mode, n) in (1..=calls).flat_map(|n| [(FailMode::Before, n), (FailMode::After, n)]) {
            let f = (self.build)().await;
            let state = before(&f).await;
            let heartbeats_before = heartbeat_files(&f).await;
            let fail = Arc::new(FailNth::with_mode(&[], n as u64, mode));
            let first = match Table::open_storage(f.storage().with_interceptor(fail.clone())).await
            {
                Ok(t) => (self.run)(&t).await,
                Err(e) => Err(e),
            };
            assert!(
                fail.fired(),
                "call {n} of {calls} was never reached ({mode:?})"
            );
            // The one failure a run may shrug off: deleting its rollback heartbeat at the end
            // (the heartbeat then expires by itself).
            let tolerated = matches!(
                fail.struck(),
                Some((OpKind::Delete, p)) if p.contains(".hoodie/.heartbeat/")
            );
            assert!(
                first.is_err() || tolerated,
                "injected failure {mode:?} call {n} went unnoticed ({:?})",
                fail.struck()
            );
            after_failure(&f, state, &format!("{mode:?} call {n}")).await;
            // The failed run's rollback heartbeats would expire with time (a crashed process
            // keeps none fresh); the rerun here does not wait for that.
            for hb in heartbeat_files(&f).await {
                if !heartbeats_before.contains(&hb) {
                    f.delete(&hb).await;
                }
            }
            let t = Table::open_storage(f.storage())
                .await
                .expect("open fixture");
            (self.run)(&t)
                .await
                .unwrap_or_else(|e| panic!("rerun after a failure {mode:?} call {n}: {e}"));
            let raw: Snapshot = f.snapshot().await;
            if self.count_files {
                let only = |a: &Snapshot, b: &Snapshot| -> Vec<String> {
                    a.keys().filter(|k| !b.contains_key(*k)).cloned().collect()
                };
                assert_eq!(
                    raw.len(),
                    reference_snapshot.len(),
                    "file count after a failure {mode:?} call {n}: only after the rerun {:?}, only in the uninterrupted run {:?} (times differ between the runs)",
                    only(&raw, &reference_snapshot),
                    only(&reference_snapshot, &raw)
                );
            }
            let got = normalize(&raw, self.how);
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
}
