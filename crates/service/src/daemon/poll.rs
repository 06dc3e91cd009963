//! A poll of one table: read (open the table, list its timeline, judge its pending writes),
//! record (metrics and status), act (roll back the failed writes, or finish a restore this
//! daemon started).

use std::collections::BTreeMap;
use std::sync::Arc;

use hudi_keeper_core::exec::restore::{restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{
    assess_table, RollbackDone, RollbackOptions, Selection, TableAssessment,
};
use hudi_keeper_core::protocol::detect::{Verdict, WritersReport};
use hudi_keeper_core::storage::Storage;
use hudi_keeper_core::timeline::Timeline;
use hudi_keeper_core::Table;
use tracing::{error, info, warn};

use super::config::PolicySetting;
use super::error::PollError;
use super::table_state::{now_ms, ChangeAction, TimelineChange};
use super::{deadline, metrics, own_changes};
use super::{Daemon, RollbackView, Source, TableState, WritersStatus};

impl Daemon {
    /// Poll a table once, holding its mutex (`cached`) and a poll slot (`permit`, given back
    /// before a rollback starts); `false` when the poll failed.
    pub(super) async fn poll(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> bool {
        let name = &*state.entry.name;
        let started = std::time::Instant::now();
        state.update(|s| s.last_poll_started_ms = Some(now_ms()));
        let result = self.poll_inner(state, cached, permit).await;
        if result.is_err() {
            // Open the table afresh next time: it may have been moved, re-created or upgraded.
            state.keep(cached, None);
        }
        let elapsed = started.elapsed();
        self.metrics.poll_duration.observe(elapsed.as_secs_f64());
        state.metrics.last_poll_duration.set(elapsed.as_secs_f64());
        state
            .metrics
            .last_poll_timestamp
            .set(now_ms() as f64 / 1000.0);
        let halt_after = self.config.server.halt_after_failures;
        let mut halted_now = false;
        state.update(|s| {
            s.polls += 1;
            s.last_poll_finished_ms = Some(now_ms());
            s.last_poll_duration_ms = Some(elapsed.as_millis() as u64);
            s.last_poll_ok = Some(result.is_ok());
            match &result {
                Ok(()) => {
                    s.consecutive_failures = 0;
                    s.last_error = None;
                }
                Err(e) => {
                    s.consecutive_failures += 1;
                    s.last_error = Some(e.to_string());
                    if s.consecutive_failures >= halt_after && !s.halted {
                        s.halted = true;
                        s.halted_reason = Some(format!(
                            "{} consecutive failed polls; last: {e}",
                            s.consecutive_failures
                        ));
                        halted_now = true;
                    }
                }
            }
        });
        let outcome = if result.is_ok() { "ok" } else { "error" };
        state.metrics.poll(outcome);
        if let Err(e) = &result {
            warn!(table = %name, error = %e, "poll failed");
        }
        if halted_now {
            error!(table = %name, "table halted after repeated failures; resume it with POST /api/v1/tables/{name}/resume");
            state
                .metrics
                .halted
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.refresh_halted().await;
        }
        result.is_ok()
    }

    /// Open the table (its `hoodie.properties`), through the store client its bucket shares.
    pub(super) async fn open(&self, state: &TableState) -> Result<Table, PollError> {
        self.open_through(state, self.metrics.request_counter(&state.entry.name))
            .await
    }

    /// Open the table as [`Daemon::open`] does, every request going through `interceptor`
    /// (which counts it for the table's metrics).
    pub(super) async fn open_through(
        &self,
        state: &TableState,
        interceptor: Arc<dyn hudi_keeper_core::storage::Interceptor>,
    ) -> Result<Table, PollError> {
        // Where it is now (a folder may have been swapped for a link since it was registered).
        match state.source {
            Source::Config => Ok(()),
            Source::Api => self.config.check_table_location(&state.entry.uri, true),
            Source::Discovered(_) => {
                self.config
                    .check_found_location(&state.entry.uri)
                    .map_err(|e| {
                        format!(
                        "not opened, its location is no longer one its source may register: {e}"
                    )
                    })
            }
        }
        .map_err(PollError::Refused)?;
        let storage = Storage::open_with(
            &state.entry.uri,
            &state.settings.storage_options,
            Some(&self.stores),
        )?
        .with_interceptor(interceptor);
        Ok(Table::open_storage(storage).await?)
    }

    /// Read the table (its timeline, then its pending writes), record what was read, and act
    /// on it.
    async fn poll_inner(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(), PollError> {
        // The reads end by the poll deadline (they change nothing: a late one is dropped).
        let limit = self.config.server.poll_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        let (table, timeline) = self.read_timeline(state, cached, deadline).await?;
        // Only when the next poll comes (`activity`); nothing below reads it.
        state.activity.observe(
            super::activity::digest(&timeline),
            timeline.pending().next().is_some(),
        );
        record_pending(state, &timeline);
        self.forget_finished_changes(state, &timeline).await;
        if timeline.pending().next().is_none() {
            record_idle(state);
            self.guard_periodically(state, &table, &timeline, permit)
                .await;
            return Ok(());
        }
        // One listing of the heartbeat folder (in `assess_table`).
        let judged = deadline::within(deadline, limit, async {
            Ok(assess_table(&table, &timeline, &state.detection_options()).await?)
        })
        .await?;
        self.note_heartbeats(state, &judged.writers).await;
        let failed = record_judged(state, &judged);
        self.act(state, &table, &timeline, failed, permit).await
    }

    /// The table (opened now unless `cached`, and cached) and its timeline, by `deadline`.
    async fn read_timeline(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<Table>, Timeline), PollError> {
        let limit = self.config.server.poll_timeout;
        if cached.is_none() {
            let opened = deadline::within(deadline, limit, self.open(state)).await?;
            state.keep(cached, Some(opened));
        }
        let Some(table) = cached.clone() else {
            return Err(PollError::NotOpened);
        };
        let listed =
            deadline::within(deadline, limit, async { Ok(table.timeline().await) }).await?;
        match listed {
            Ok(timeline) => Ok((table, timeline)),
            Err(e) => {
                // Re-open next time: the table may have moved or been re-created.
                state.keep(cached, None);
                Err(e.into())
            }
        }
    }

    /// Act on what a poll read: finish a restore this daemon started, or wait for another's;
    /// else roll back the failed writes (`failed` of them) and finish pending rollbacks, unless
    /// the table is observed only. The poll slot (`permit`) goes back before a change starts.
    async fn act(
        &self,
        state: &TableState,
        table: &Table,
        timeline: &Timeline,
        failed: usize,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(), PollError> {
        if let Some(r) = timeline
            .pending()
            .find(|i| i.action == hudi_keeper_core::timeline::Action::Restore)
        {
            let own = self
                .own_changes
                .get(&state.entry.name, &state.entry.uri)
                .into_iter()
                .find(|c| {
                    c.kind == own_changes::ChangeKind::Restore && c.instant == r.requested_time
                });
            let options = state
                .rollback_options()
                .filter(|_| state.settings.failed_writes_policy != PolicySetting::Observe);
            if let (Some(own), Some(options)) = (own, options) {
                // This daemon started it and was stopped (killed, or cut off at a safe point):
                // nobody else runs it, so it is finished now.
                drop(permit);
                return self.resume_own_restore(state, table, own, options).await;
            }
            // The table is between states until the restore finishes (its writers refuse to
            // write too); its pending instants belong to the restore. Not a failed poll.
            warn!(table = %state.entry.name, restore = %r.requested_time, "a restore is pending: automatic rollbacks are paused until it is finished (run the restore again, or POST /api/v1/tables/{{name}}/restore)");
            return Ok(());
        }
        let pending_rollback = timeline
            .pending()
            .any(|i| i.action == hudi_keeper_core::timeline::Action::Rollback);
        if failed == 0 && !pending_rollback {
            self.guard_periodically(state, table, timeline, permit)
                .await;
            return Ok(());
        }
        if state.settings.failed_writes_policy == PolicySetting::Observe {
            return Ok(());
        }
        let Some(options) = state.rollback_options() else {
            return Ok(());
        };
        let options = self.journaled(state, options, false);
        // The reads are over: the poll slot goes back before the change, which may run up to
        // server.mutation_timeout (+ shutdown_grace) and must not keep other tables from
        // their polls. The table's mutex stays held, so one change per table at most.
        drop(permit);
        let started = std::time::Instant::now();
        match self
            .rollback_recorded(state, table, &Selection::AllFailed, &options, "auto")
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                self.record_failure(state, "auto", "(failed writes)", &e.to_string(), started);
                Err(PollError::Change(e))
            }
        }
    }

    /// Finish a restore this daemon started and did not finish (it was killed or stopped at a
    /// safe point): the same restore point, resumed with the restore's own plan.
    pub(super) async fn resume_own_restore(
        &self,
        state: &TableState,
        table: &Table,
        own: own_changes::OwnChange,
        options: RollbackOptions,
    ) -> Result<(), PollError> {
        let name = &state.entry.name;
        info!(table = %name, restore_instant = %own.instant, target = %own.target, "resuming the restore this daemon started before it stopped");
        let options = RestoreOptions {
            rollback: self.journaled(state, options, own.require_savepoint),
            require_savepoint: own.require_savepoint,
        };
        let started = std::time::Instant::now();
        let (target, options) = (&own.target, &options);
        match self
            .mutate(table, |t| async move {
                restore(&t, target, options, None).await
            })
            .await
        {
            Ok(done) => {
                info!(table = %name, target = %target, restore_instant = %done.restore_instant, undone = done.undone.len(), "resumed restore finished");
                Ok(())
            }
            Err(e) => {
                let what = format!("(restore {})", own.instant);
                self.record_failure(state, "auto", &what, &e.to_string(), started);
                Err(PollError::Change(e))
            }
        }
    }

    /// Heartbeat files on the table prove it has LAZY writers: remember that in `state_dir`
    /// (once), for the writers report (`seen_before`) when no heartbeat file is left, after
    /// restarts too. It never makes a write failed. A failed write of the state is retried at
    /// the next poll that sees heartbeat files.
    pub(super) async fn note_heartbeats(&self, state: &TableState, writers: &WritersReport) {
        if writers.heartbeat_files.unwrap_or(0) == 0 || state.heartbeats_first_seen_ms().is_some() {
            return;
        }
        let name = &*state.entry.name;
        match self.evidence.record(name, &state.entry.uri, now_ms()).await {
            Ok(e) => {
                state.heartbeats_seen_ms.set(e.heartbeats_first_seen_ms);
                info!(table = %name, "heartbeat files seen: the table has LAZY writers; a pending write of it without heartbeat file is an EAGER writer's or lost its heartbeat, and is left alone unless assume_lazy_writers or max_write_duration says otherwise");
            }
            Err(e) => {
                warn!(table = %name, error = %format!("{e:#}"), "could not keep the heartbeat evidence in state_dir; retried at the next poll")
            }
        }
    }

    pub(super) fn record_rollback(
        &self,
        state: &TableState,
        d: &RollbackDone,
        trigger: &'static str,
    ) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = &*state.entry.name;
        state.metrics.rollback(true, trigger);
        self.metrics
            .rollback_duration
            .observe(d.duration_ms as f64 / 1000.0);
        let changes = state.metrics.count_changes();
        changes
            .files_deleted
            .fetch_add(d.files_deleted as u64, Relaxed);
        if d.lock_wait_ms > 0 {
            changes.lock_waits.fetch_add(1, Relaxed);
            changes.lock_wait_ms.fetch_add(d.lock_wait_ms, Relaxed);
        }
        info!(table = %name, instant = %d.instant, rollback_instant = %d.rollback_instant, files = d.files_deleted, trigger, "rolled back a failed write");
        state.update(|s| {
            s.rollbacks += 1;
            s.pending.retain(|a| a.requested_time != d.instant);
            s.last_rollback = Some(Box::new(RollbackView {
                instant: d.instant.clone(),
                rollback_instant: Some(d.rollback_instant.clone()),
                at_ms: now_ms(),
                outcome: "success",
                trigger,
                files_deleted: d.files_deleted,
                duration_ms: d.duration_ms,
                error: None,
            }))
        });
    }

    pub(super) fn record_failure(
        &self,
        state: &TableState,
        trigger: &'static str,
        instant: &str,
        error: &str,
        started: std::time::Instant,
    ) {
        state.metrics.rollback(false, trigger);
        state.update(|s| {
            s.last_rollback = Some(Box::new(RollbackView {
                instant: instant.to_string(),
                rollback_instant: None,
                at_ms: now_ms(),
                outcome: "failure",
                trigger,
                files_deleted: 0,
                duration_ms: started.elapsed().as_millis() as u64,
                error: Some(error.to_string()),
            }))
        });
    }

    /// Forget the recorded changes of `state`'s table that are no longer pending. Called with
    /// the table's mutex held (no change of this daemon runs on it meanwhile).
    pub(super) async fn forget_finished_changes(&self, state: &TableState, timeline: &Timeline) {
        let pending: std::collections::BTreeSet<&str> = timeline
            .pending()
            .map(|i| i.requested_time.as_str())
            .collect();
        let (name, uri) = (&state.entry.name, &state.entry.uri);
        if let Err(e) = self.own_changes.retain_pending(name, uri, &pending).await {
            warn!(table = %name, error = %format!("{e:#}"), "could not update state_dir/own-changes; retried at the next poll");
        }
    }
}

/// Record a poll that found no pending instant (nothing was listed but the timeline).
fn record_idle(state: &TableState) {
    // Zeros, which a table whose polls never found anything reads without them.
    if let Some(p) = state.metrics.pending_if_any() {
        p.oldest_pending_age.set(0.0);
        p.stalest_heartbeat_age.set(0.0);
        p.failed_instants
            .store(0, std::sync::atomic::Ordering::Relaxed);
        p.rollbacks_in_progress
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }
    let writers = state.idle_writers();
    state
        .metrics
        .set_writers(writers.left_alone.by_reason(), false);
    state.update(|s| {
        s.pending.clear();
        s.writers = writers;
    });
}

/// Record how a poll judged the table's pending writes (metrics, status); how many failed.
fn record_judged(state: &TableState, judged: &TableAssessment) -> usize {
    let assessments = &judged.assessments;
    let oldest = assessments
        .iter()
        .filter(|a| {
            !matches!(
                a.verdict,
                Verdict::NotACandidate | Verdict::RollbackInProgress
            )
        })
        .filter_map(|a| a.instant_age_ms)
        .max()
        .unwrap_or(0);
    // Writes' heartbeats only (a pending rollback's is its executor's).
    let stalest = assessments
        .iter()
        .filter(|a| a.action != hudi_keeper_core::timeline::Action::Rollback)
        .filter_map(|a| a.heartbeat_age_ms)
        .max()
        .unwrap_or(0);
    let failed = assessments.iter().filter(|a| a.verdict.is_failed()).count();
    let in_progress = assessments
        .iter()
        .filter(|a| a.verdict == Verdict::RollbackInProgress)
        .count();
    let p = state.metrics.count_pending();
    p.rollbacks_in_progress
        .store(in_progress as i64, std::sync::atomic::Ordering::Relaxed);
    p.oldest_pending_age.set(oldest.max(0) as f64 / 1000.0);
    p.stalest_heartbeat_age.set(stalest.max(0) as f64 / 1000.0);
    p.failed_instants
        .store(failed as i64, std::sync::atomic::Ordering::Relaxed);
    state.metrics.set_writers(
        judged.writers.left_alone.by_reason(),
        judged.writers.eager_writer_suspected,
    );
    let writers = WritersStatus::new(&judged.writers, state.heartbeats_first_seen_ms());
    state.update(|s| {
        s.pending = assessments.clone();
        s.writers = writers;
    });
    failed
}

/// Count a table's pending instants by action, for `hudi_keeper_pending_instants`.
pub(super) fn record_pending(state: &TableState, timeline: &Timeline) {
    let mut counts: BTreeMap<&'static str, i64> = BTreeMap::new();
    for i in timeline.pending() {
        let a = i.action.as_str();
        let label = metrics::ACTIONS
            .iter()
            .find(|x| **x == a)
            .copied()
            .unwrap_or("other");
        *counts.entry(label).or_default() += 1;
    }
    state.metrics.set_pending(counts.into_iter().collect());
    let change = newest_change(timeline);
    state.update(|s| s.last_timeline_change = change);
}

/// The newest completed rollback or restore of `timeline` (by requested time), and when it
/// completed.
fn newest_change(timeline: &Timeline) -> Option<TimelineChange> {
    use hudi_keeper_core::timeline::{Action, State};
    timeline.instants().iter().rev().find_map(|i| {
        let action = match i.action {
            Action::Rollback => ChangeAction::Rollback,
            Action::Restore => ChangeAction::Restore,
            _ => return None,
        };
        let completed = i.file(State::Completed)?;
        Some(TimelineChange {
            action,
            completed_ms: completed.last_modified.timestamp_millis(),
        })
    })
}
