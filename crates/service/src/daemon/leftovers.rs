//! The leftover guard in the daemon (`hudi_keeper_core::audit::guard`): after each rollback the
//! daemon makes (automatic or through the API), the partitions it touched; and every
//! `leftover_guard_interval`, at a poll, those of every completed rollback and restore still on
//! the table's active timeline (Hudi's own included), while they are there to explain the files.
//!
//! It runs with the table's mutex held (as a change: within `server.mutation_timeout`, stopped at
//! a safe point on shutdown) and takes the table lock only when it has something to remove. A
//! failure is logged and counted, never a failed poll: the next check retries it.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use hudi_keeper_core::audit::guard::{guard, GuardOptions, GuardScope};
use hudi_keeper_core::audit::AuditOptions;
use hudi_keeper_core::exec::rollback::RollbackDone;
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::timeline::{Action, Timeline};
use hudi_keeper_core::Table;
use tracing::{info, warn};

use super::config::PolicySetting;
use super::scheduler::jitter;
use super::{Daemon, TableState};

/// The first periodic check of a table comes at a random time within this (or its interval, if
/// shorter) after the daemon started watching it, so that a fleet's checks are spread.
const FIRST_CHECK_WITHIN: Duration = Duration::from_secs(3600);

impl Daemon {
    /// After the daemon's rollbacks `done` of `table`: check the partitions they touched.
    pub(super) async fn guard_after(
        &self,
        state: &TableState,
        table: &Table,
        done: &[RollbackDone],
        lock: &LockOptions,
    ) {
        if done.is_empty() || state.settings.leftover_guard_interval_ms.is_none() {
            return;
        }
        let scope = GuardScope::Rollbacks(
            done.iter()
                .map(|d| d.rollback_instant.clone())
                .collect::<BTreeSet<_>>(),
        );
        self.run_guard(state, table, scope, lock).await;
    }

    /// At a poll that has nothing to roll back: when the periodic check is due and `timeline`
    /// has a completed rollback or restore, check every one of them (not on an observed table).
    /// The poll slot (`permit`) goes back first, as before a change.
    pub(super) async fn guard_periodically(
        &self,
        state: &TableState,
        table: &Table,
        timeline: &Timeline,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) {
        drop(permit);
        let Some(interval_ms) = state.settings.leftover_guard_interval_ms else {
            return;
        };
        if state.settings.failed_writes_policy == PolicySetting::Observe {
            return;
        }
        let Some(lock) = state.settings.lock.clone() else {
            return;
        };
        let lock = &lock;
        let interval = Duration::from_millis(interval_ms);
        let now = Instant::now();
        {
            // A table's polls run one at a time (its mutex): no other one sets it meanwhile.
            let due = &state.guard_due;
            match due.get() {
                None => {
                    due.set(now + jitter(interval.min(FIRST_CHECK_WITHIN) / 2, 1.0));
                    return;
                }
                Some(at) if now < at => return,
                Some(_) => {}
            }
            let any = timeline
                .completed()
                .any(|i| matches!(i.action, Action::Rollback | Action::Restore));
            if !any {
                // Checked again at the next poll: a rollback Hudi completes meanwhile is
                // guarded then, not an interval later.
                return;
            }
            due.set(now + jitter(interval, 0.1));
        }
        self.run_guard(state, table, GuardScope::Every, lock).await;
    }

    async fn run_guard(
        &self,
        state: &TableState,
        table: &Table,
        scope: GuardScope,
        lock: &LockOptions,
    ) {
        let options = GuardOptions {
            lock: lock.clone(),
            dry_run: false,
            max_log_read: AuditOptions::default().max_log_read,
        };
        let (scope, options) = (&scope, &options);
        let name = &*state.entry.name;
        match self
            .mutate(table, |t| async move { guard(&t, scope, options).await })
            .await
        {
            Ok(report) => {
                let changes = state.metrics.count_changes();
                changes
                    .leftovers_removed
                    .fetch_add(report.removed.len() as u64, Relaxed);
                changes
                    .leftovers_kept
                    .fetch_add(report.kept.len() as u64, Relaxed);
                for r in &report.removed {
                    info!(table = %name, path = %r.path, "leftover guard: removed a file of a rolled-back instant");
                }
                for k in &report.kept {
                    warn!(table = %name, path = %k.path, reason = %k.reason, "leftover guard: a file of a rolled-back instant kept");
                }
            }
            Err(e) => {
                warn!(table = %name, error = %e, "leftover guard failed; it is tried again at the next check")
            }
        }
    }
}

/// When the leftover guard's periodic check of a table is due next, in 8 bytes (a
/// `Mutex<Option<Instant>>` takes 32 a table): ms after the process's first use of it, plus one;
/// 0 when not yet scheduled.
#[derive(Debug, Default)]
pub(super) struct GuardDue(std::sync::atomic::AtomicU64);

impl GuardDue {
    fn origin() -> Instant {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *ORIGIN.get_or_init(Instant::now)
    }

    /// When it is due (`None`: not scheduled yet), to the millisecond below.
    pub(super) fn get(&self) -> Option<Instant> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            ms => Some(Self::origin() + Duration::from_millis(ms - 1)),
        }
    }

    pub(super) fn set(&self, at: Instant) {
        let ms = at.saturating_duration_since(Self::origin()).as_millis();
        let ms = u64::try_from(ms).unwrap_or(u64::MAX - 1) + 1;
        self.0.store(ms, std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod guard_due_tests {
    use super::*;

    #[test]
    fn a_check_is_unscheduled_until_set_then_due_at_its_millisecond() {
        let due = GuardDue::default();
        assert_eq!(due.get(), None);
        let at = Instant::now() + Duration::from_secs(90);
        due.set(at);
        let got = due.get().expect("scheduled");
        assert!(
            got <= at && at - got < Duration::from_millis(1),
            "{got:?} {at:?}"
        );
        // Set at the origin itself, it is still scheduled (not taken for unset).
        due.set(GuardDue::origin());
        assert_eq!(due.get(), Some(GuardDue::origin()));
    }
}
