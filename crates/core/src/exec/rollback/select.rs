//! Which instants a rollback takes on: the pending instants judged, a named instant refused
//! when it must not be rolled back, pending rollbacks resumed.

use std::collections::BTreeMap;

use tracing::{info, warn};

use crate::exec::steps::{
    action_of_plan, pending_rollbacks, refused, PendingRollback, RollbackOptions,
};
use crate::inspect::observe;
use crate::protocol::detect::{
    assess, non_candidate_reason, Assessment, DetectionInput, NamedRollback, Verdict, WritersReport,
};
use crate::storage::RelPath;
use crate::table::Table;
use crate::timeline::{Action, Instant, State, Timeline};
use crate::Error;

/// What to roll back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every instant the policy calls failed, plus every pending rollback (newest first).
    AllFailed,
    /// One pending instant.
    Instant(String),
}

/// The pending instants of a table judged, and what is known about its writers.
#[derive(Debug, Clone)]
pub struct TableAssessment {
    /// Every pending instant, newest first.
    pub assessments: Vec<Assessment>,
    /// What is known about the writers (heartbeat files seen now included), and the writes
    /// left alone.
    pub writers: WritersReport,
}

/// Assess the pending instants of a table (heartbeats read now: one listing of the heartbeat
/// folder when a pending write is there to judge).
pub async fn assess_table(
    table: &Table,
    timeline: &Timeline,
    options: &RollbackOptions,
) -> Result<TableAssessment, Error> {
    let observed = observe(table, timeline, options.clustering_expiration.is_some()).await?;
    let lazy_writers = observed.lazy_writers(options.lazy_writers);
    let input = DetectionInput {
        now_ms: chrono::Utc::now().timestamp_millis(),
        policy: options.policy,
        heartbeat: options.heartbeat,
        heartbeats: &observed.heartbeats,
        replace_kinds: &observed.replace_kinds,
        lazy_writers,
        max_write_duration: options.max_write_duration,
        clustering_expiration: options.clustering_expiration,
    };
    let assessments = assess(timeline, &input);
    let writers = WritersReport::new(
        options.policy,
        lazy_writers,
        options.max_write_duration,
        observed.heartbeat_files,
        &assessments,
    );
    Ok(TableAssessment {
        assessments,
        writers,
    })
}

/// One unit of work: a target and, if it has one, its pending rollback.
#[derive(Debug, Clone)]
pub(super) struct Work {
    pub(super) target: String,
    pub(super) action: Action,
    pub(super) state: State,
    pub(super) reason: String,
    pub(super) pending: Option<PendingRollback>,
    /// The target's inflight file, if it has one (its workload narrows the cross-check).
    pub(super) inflight: Option<RelPath>,
}

impl Work {
    /// Resume pending rollback `p` of `target`.
    fn resuming(target: &str, p: &PendingRollback) -> Self {
        Self {
            target: target.to_string(),
            action: action_of_plan(&p.plan),
            state: State::Inflight,
            reason: format!("resuming pending rollback {}", p.instant),
            pending: Some(p.clone()),
            inflight: None,
        }
    }
}

/// The inflight file of the pending instant `t`, if it has one.
fn inflight_file(timeline: &Timeline, t: &str) -> Option<RelPath> {
    timeline
        .find(t)
        .find(|i| i.is_pending())
        .and_then(|i| i.file(State::Inflight))
        .map(|f| f.path.clone())
}

/// What the selection is made from: the timeline, its pending rollbacks by target, its pending
/// instants judged, and the time they were judged at.
struct Seen {
    timeline: Timeline,
    pending: BTreeMap<String, PendingRollback>,
    assessments: Vec<Assessment>,
    now_ms: i64,
}

impl Seen {
    /// Whether pending rollback `p` may be resumed by this run, or why not: never while its
    /// rollback heartbeat is live (another process runs it, whatever its age; `--force` does
    /// not change that); once it expired, at once; without one, by
    /// [`PendingRollback::is_stale`], or when `force`d (an operator naming its target).
    fn resumable(
        &self,
        p: &PendingRollback,
        options: &RollbackOptions,
        force: bool,
    ) -> Result<(), String> {
        let judged = self
            .assessments
            .iter()
            .find(|a| a.requested_time == p.instant && a.action == Action::Rollback);
        match judged {
            Some(a) if a.verdict == Verdict::RollbackInProgress => Err(format!(
                "rollback {} of this instant is running in another process: {}",
                p.instant, a.reason
            )),
            // A rollback heartbeat that expired: whoever ran it is gone.
            Some(a) if a.heartbeat_age_ms.is_some() => Ok(()),
            _ if force || p.is_stale(options, self.now_ms) => Ok(()),
            _ => Err(format!(
                "rollback {} of this instant was written moments ago and may still be running in another process; pass --force to resume it now",
                p.instant
            )),
        }
    }
}

/// Decide what to roll back: refuses (with the reason) a named instant that must not be.
pub(super) async fn select(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<Vec<Work>, Error> {
    let timeline = table.timeline().await?;
    if let Some(r) = timeline.pending().find(|i| i.action == Action::Restore) {
        // Hudi's writers refuse to write then; its child rollbacks belong to the restore.
        return Err(refused(
            table,
            &r.requested_time,
            "a restore is pending: the table is in between states until it finishes. Run `hudi-keeper restore` to that instant again (or let Hudi finish it); nothing was rolled back",
        ));
    }
    let (pending, unreadable) = pending_rollbacks(table, &timeline).await?;
    for (r, why) in &unreadable {
        warn!(table = %table.uri(), rollback = %r, error = %why, "pending rollback with an unreadable plan is left alone");
    }
    let assessments = assess_table(table, &timeline, options).await?.assessments;
    let seen = Seen {
        timeline,
        pending,
        assessments,
        now_ms: chrono::Utc::now().timestamp_millis(),
    };
    match selection {
        Selection::Instant(t) => select_named(table, &seen, t, options),
        Selection::AllFailed => Ok(select_failed(table, &seen, options)),
    }
}

/// The named instant `t`, or why it is not rolled back.
fn select_named(
    table: &Table,
    seen: &Seen,
    t: &str,
    options: &RollbackOptions,
) -> Result<Vec<Work>, Error> {
    if let Some(p) = seen.pending.get(t) {
        seen.resumable(p, options, options.force)
            .map_err(|why| refused(table, t, why))?;
        return Ok(vec![Work::resuming(t, p)]);
    }
    let instants: Vec<&Instant> = seen.timeline.find(t).collect();
    let Some(instant) = instants.iter().find(|i| i.is_pending()).copied() else {
        return match instants.first() {
            Some(_) => Err(refused(
                table,
                t,
                "the instant is completed; undoing completed commits is a restore (`hudi-keeper restore`)",
            )),
            None => Err(refused(table, t, "the instant is not on the active timeline")),
        };
    };
    let a = seen
        .assessments
        .iter()
        .find(|a| a.requested_time == *t)
        .ok_or_else(|| refused(table, t, "the instant was not assessed"))?;
    // A table service is never rolled back, but for an expired clustering (clustering
    // expirations on, as Hudi 1.2 rolls those back).
    if let Some(reason) = non_candidate_reason(instant.action).filter(|_| !a.verdict.is_failed()) {
        return Err(refused(
            table,
            t,
            format!("{reason}; hudi-keeper will not roll it back"),
        ));
    }
    // Naming an instant is the operator's decision for a write nothing proves dead
    // (left alone without heartbeat); one whose writer may be alive needs --force.
    let named = a.verdict.named_rollback();
    let allowed = match named {
        NamedRollback::Allowed => true,
        NamedRollback::NeedsForce => options.force,
        NamedRollback::Never => false,
    };
    if !allowed {
        let hint = match named {
            NamedRollback::NeedsForce => " (pass --force if you know its writer is gone)",
            _ => "",
        };
        return Err(refused(
            table,
            t,
            format!("not rolled back: {} — {}{hint}", a.verdict, a.reason),
        ));
    }
    Ok(vec![Work {
        target: t.to_string(),
        action: instant.action,
        state: instant.state,
        reason: a.reason.clone(),
        pending: None,
        inflight: instant.file(State::Inflight).map(|f| f.path.clone()),
    }])
}

/// Every pending rollback left long enough ago, and every instant the policy calls failed
/// without one, newest first.
fn select_failed(table: &Table, seen: &Seen, options: &RollbackOptions) -> Vec<Work> {
    let pending = &seen.pending;
    let mut work = Vec::new();
    for (t, p) in pending {
        // `--force` is for one named instant: it never resumes every recent rollback at once.
        match seen.resumable(p, options, false) {
            Ok(()) => work.push(Work::resuming(t, p)),
            Err(why) => {
                info!(table = %table.uri(), instant = %t, rollback = %p.instant, why = %why, "pending rollback left for a later run")
            }
        }
    }
    for a in seen.assessments.iter().filter(|a| a.verdict.is_failed()) {
        // A target with a pending rollback is that rollback's, resumed or not.
        if !pending.contains_key(&a.requested_time) {
            work.push(Work {
                target: a.requested_time.clone(),
                action: a.action,
                state: a.state,
                reason: a.reason.clone(),
                pending: None,
                inflight: inflight_file(&seen.timeline, &a.requested_time),
            });
        }
    }
    work.sort_by(|a, b| b.target.cmp(&a.target));
    work
}
