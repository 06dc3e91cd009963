//! The table audit in the daemon (issue #33): each table audited every `audit_interval` (the
//! first spread over up to an hour after it is registered), off the poll path. An audit opens
//! its own handle of the table (no table mutex, no lock: it only reads), waits for one of
//! `server.max_concurrent_audits` slots of its own (never a poll slot), counts its requests
//! through the storage seam into the table's `hudi_keeper_object_store_requests_total`, and
//! stops when its budget (`audit_max_requests`) is spent: cut short, its counts not used (the
//! last complete audit's stand). Only the table's owner audits it. At shutdown a running audit
//! is dropped at once (it changes nothing, so any point is a safe one).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hudi_keeper_core::audit::{audit, AuditOptions, AuditReport};
use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use tracing::{info, info_span, warn, Instrument};

use super::audit_view::{AuditOutcome, AuditRun, AuditSummary};
use super::scheduler::{jitter, run_timer_heap};
use super::table_state::now_ms;
use super::{Daemon, TableError, TableState};

/// The longest the first audit of a table waits after it is registered (or its interval, if
/// shorter): spread at random, so that a fleet's first audits do not all start at once.
pub const FIRST_AUDIT_WITHIN: Duration = Duration::from_secs(3600);

/// Counts an audit's requests (and passes them on to the table's request counter); refuses
/// every request past the budget, remembering that it did.
#[derive(Debug)]
pub(super) struct Budget {
    inner: Arc<dyn Interceptor>,
    uri: String,
    max: u64,
    used: AtomicU64,
    spent: AtomicBool,
}

impl Budget {
    pub(super) fn new(inner: Arc<dyn Interceptor>, uri: &str, max: u64) -> Self {
        Self {
            inner,
            uri: uri.to_string(),
            max,
            used: AtomicU64::new(0),
            spent: AtomicBool::new(false),
        }
    }

    /// Requests sent (those refused not counted).
    pub(super) fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed).min(self.max)
    }

    /// Whether a request was refused for the budget.
    pub(super) fn spent(&self) -> bool {
        self.spent.load(Ordering::Relaxed)
    }
}

impl Interceptor for Budget {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if self.used.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.spent.store(true, Ordering::Relaxed);
            return Err(StorageError::Fenced {
                uri: self.uri.clone(),
                op,
                path: path.to_string(),
                reason: format!(
                    "the audit's request budget (audit_max_requests = {}) is spent",
                    self.max
                ),
            });
        }
        self.inner.before(op, path)
    }

    fn after(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        self.inner.after(op, path)
    }
}

/// How an audit ended, before it is recorded.
pub(super) fn outcome_of(
    result: Result<AuditReport, String>,
    budget: &Budget,
) -> (AuditOutcome, Option<String>, Option<AuditSummary>) {
    // A request refused for the budget may have been taken for a part that could not be read
    // (an archive location): the report, even if one came, did not see everything.
    if budget.spent() {
        let why = format!(
            "its request budget (audit_max_requests = {}) was spent before it finished; its counts are not used, the last complete audit's stand",
            budget.max
        );
        return (AuditOutcome::CutShort, Some(why), None);
    }
    match result {
        Ok(report) => (
            AuditOutcome::Complete,
            None,
            Some(AuditSummary::of(&report)),
        ),
        Err(e) => (AuditOutcome::Failed, Some(e), None),
    }
}

impl Daemon {
    /// Put `state` on the audits' timer heap, `after` from now (replacing any earlier entry).
    pub(super) fn schedule_audit(&self, state: &Arc<TableState>, after: Duration) {
        let generation = state.audit_generation.fetch_add(1, Ordering::Relaxed) + 1;
        let due = tokio::time::Instant::now() + after;
        let _ = self.audit_timer.send((due, generation, state.clone()));
    }

    /// Schedule the first audit of a newly registered table, at a random time within its
    /// interval or [`FIRST_AUDIT_WITHIN`], whichever is shorter (none with `audit_interval = 0`).
    pub(super) fn schedule_first_audit(&self, state: &Arc<TableState>) {
        if let Some(ms) = state.settings.audit_interval_ms {
            let within = Duration::from_millis(ms).min(FIRST_AUDIT_WITHIN);
            self.schedule_audit(state, jitter(within / 2, 1.0));
        }
    }

    /// The audits' scheduler: one timer heap for every table, as the polls' (`scheduler`).
    pub(super) async fn run_audits(
        self: Arc<Self>,
        incoming: tokio::sync::mpsc::UnboundedReceiver<super::scheduler::Due>,
    ) {
        let shutdown = self.shutdown.clone();
        run_timer_heap(shutdown, incoming, |state, generation| {
            self.clone().dispatch_audit(state, generation)
        })
        .await;
    }

    /// A table's audit came due: once an audit slot is free, audit it on its own task (or skip
    /// it if unregistered, rescheduled since, or another replica's), then schedule the next.
    async fn dispatch_audit(self: Arc<Self>, state: Arc<TableState>, generation: u64) {
        if state.audit_generation.load(Ordering::Relaxed) != generation {
            return;
        }
        let name = state.entry.name.clone();
        if !self.still_registered(&state).await {
            return;
        }
        let interval = state.settings.audit_interval_ms.map(Duration::from_millis);
        let manual = state.audit_update(|a| std::mem::take(&mut a.manual_requested));
        if !manual && interval.is_none() {
            return;
        }
        if !self.cluster().owns(&name) {
            // Its owner audits it; this replica looks again after an interval.
            if let Some(i) = interval {
                self.schedule_audit(&state, jitter(i, 0.1));
            }
            return;
        }
        let permit = tokio::select! {
            p = self.audits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = self.shutdown.cancelled() => return,
        };
        state.audit_update(|a| a.running_since_ms = Some(now_ms()));
        let daemon = self.clone();
        let trigger = if manual { "manual" } else { "scheduled" };
        self.tracker.spawn(
            async move {
                let run = tokio::select! {
                    run = daemon.audit_table(&state, trigger) => run,
                    _ = daemon.shutdown.cancelled() => {
                        state.audit_update(|a| a.running_since_ms = None);
                        return;
                    }
                };
                drop(permit);
                daemon.record_audit(&state, run);
                if let Some(i) = interval {
                    if state.audit_generation.load(Ordering::Relaxed) == generation {
                        daemon.schedule_audit(&state, jitter(i, 0.1));
                    }
                }
            }
            .instrument(info_span!("audit", table = %name)),
        );
    }

    /// Audit the table once, through a handle of its own whose requests count against the
    /// budget.
    async fn audit_table(&self, state: &TableState, trigger: &'static str) -> AuditRun {
        let name = &state.entry.name;
        let started = std::time::Instant::now();
        let started_ms = now_ms();
        let budget = Arc::new(Budget::new(
            self.metrics.request_counter(name),
            &state.entry.uri,
            state.settings.audit_max_requests,
        ));
        let limit = self.config.server.audit_timeout;
        let result = tokio::time::timeout(limit, async {
            let table = self
                .open_through(state, budget.clone())
                .await
                .map_err(|e| e.to_string())?;
            audit(&table, &AuditOptions::default())
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "timed out: the audit did not finish within server.audit_timeout ({} s)",
                limit.as_secs()
            ))
        });
        let (outcome, reason, summary) = outcome_of(result, &budget);
        AuditRun {
            trigger,
            started_ms,
            finished_ms: now_ms(),
            duration_ms: started.elapsed().as_millis() as u64,
            outcome,
            reason,
            requests: budget.used(),
            max_requests: budget.max,
            summary,
        }
    }

    /// Record an audit that ended: the table's audit state and metrics (counts only from a
    /// complete one), and a log line.
    pub(super) fn record_audit(&self, state: &TableState, run: AuditRun) {
        let name = &state.entry.name;
        state.metrics.audit_ended(run.outcome, run.summary.as_ref());
        match (&run.summary, &run.reason) {
            (Some(s), _) => {
                self.metrics
                    .audit_duration
                    .observe(run.duration_ms as f64 / 1000.0);
                let files = |c| s.classes.get(&c).map(|n| n.files).unwrap_or(0);
                use hudi_keeper_core::audit::Class;
                info!(table = %name, requests = run.requests, duration_ms = run.duration_ms,
                    data_files = s.data_files, rollback_leftover = files(Class::RollbackLeftover),
                    orphan = files(Class::Orphan), unknown = files(Class::Unknown), "audited the table");
            }
            (None, reason) => {
                let reason = reason.as_deref().unwrap_or_default();
                warn!(table = %name, outcome = run.outcome.as_str(), requests = run.requests, reason, "the table's audit did not complete; the last complete audit's counts stand");
            }
        }
        let run = Arc::new(run);
        state.audit_update(|a| {
            a.running_since_ms = None;
            a.runs += 1;
            if run.outcome == AuditOutcome::Complete {
                a.last_complete = Some(run.clone());
            }
            a.last = Some(run);
        });
    }

    /// `POST /api/v1/tables/{name}/audit`: audit the table now (on the audits' scheduler,
    /// within `server.max_concurrent_audits`), also with `audit_interval = 0`.
    pub async fn request_audit(&self, name: &str) -> Result<(), TableError> {
        let state = self.table(name).await?;
        self.check_owner(name)?;
        let running = state.audit_update(|a| {
            let running = a.running_since_ms;
            if running.is_none() {
                a.manual_requested = true;
            }
            running
        });
        if let Some(since) = running {
            return Err(TableError::Conflict(format!(
                "an audit of `{name}` runs already (since {})",
                chrono::DateTime::from_timestamp_millis(since)
                    .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
                    .unwrap_or_else(|| since.to_string())
            )));
        }
        self.schedule_audit(&state, Duration::ZERO);
        info!(table = %name, "audit requested through the API");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hudi_keeper_core::storage::RequestCounter;

    #[test]
    fn the_budget_passes_requests_on_until_it_is_spent_then_refuses_them() {
        let counter = Arc::new(RequestCounter::new());
        let b = Budget::new(counter.clone(), "memory://t", 2);
        let p = RelPath::root();
        assert!(b.before(OpKind::List, &p).is_ok());
        assert!(b.before(OpKind::Get, &p).is_ok());
        assert!(!b.spent());
        let e = b.before(OpKind::Get, &p).unwrap_err();
        assert!(e.to_string().contains("audit_max_requests = 2"), "{e}");
        assert!(b.spent());
        assert_eq!(b.used(), 2);
        // Only the requests sent reach the table's counter.
        assert_eq!(counter.snapshot().values().sum::<u64>(), 2);
    }

    #[test]
    fn a_spent_budget_makes_the_audit_cut_short_not_failed() {
        let b = Budget::new(Arc::new(RequestCounter::new()), "memory://t", 0);
        let _ = b.before(OpKind::Get, &RelPath::root());
        let (outcome, why, summary) = outcome_of(Err("x".into()), &b);
        assert_eq!(outcome, AuditOutcome::CutShort);
        assert!(why.unwrap().contains("budget"));
        assert!(summary.is_none());
        let fresh = Budget::new(Arc::new(RequestCounter::new()), "memory://t", 5);
        let (outcome, why, _) = outcome_of(Err("boom".into()), &fresh);
        assert_eq!(outcome, AuditOutcome::Failed);
        assert_eq!(why.as_deref(), Some("boom"));
    }
}
