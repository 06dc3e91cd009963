//! One rollback run through its steps: scheduled under the table lock, its plan applied outside
//! it, finished under the lock (the metadata table, the target's timeline files, the completed
//! rollback).

use std::collections::BTreeMap;
use std::time::{Duration, Instant as Clock};

use serde::Serialize;
use tracing::{info, info_span, Instrument};

use super::plan::{make_plan, planned_changes};
use super::select::Work;
use crate::exec::metadata_table::rollback::{metadata_table_refusal, rollback_metadata_table};
use crate::exec::metadata_table::MetadataTableOutcome;
use crate::exec::steps::apply::{apply_plan, rollback_metadata, write_completed_rollback};
use crate::exec::steps::changes::{refuse_links, Changes};
use crate::exec::steps::claim::RollbackClaim;
use crate::exec::steps::{
    action_of_plan, avro_err, delete_folder, delete_newest_first, left_pending, locked,
    pending_rollbacks, plan_err, refused, Progress, RollbackOptions,
};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::rollback::{RollbackMetadata, RollbackPlan};
use crate::plan::rollback::{resolve_plan, PlannedRollback, ResolvedPlan};
use crate::protocol::heartbeat::heartbeat_path;
use crate::protocol::markers::marker_dir;
use crate::table::files::BasePath;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// A finished rollback.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackDone {
    /// The rolled-back instant.
    pub instant: String,
    /// Its action.
    pub action: String,
    /// The rollback instant.
    pub rollback_instant: String,
    /// Whether an earlier pending rollback was resumed.
    pub resumed: bool,
    /// Files the plan deletes (already-missing files count as deleted).
    pub files_deleted: usize,
    /// Rollback command blocks written (v6 MOR).
    pub log_blocks_written: usize,
    /// What happened in the metadata table.
    pub metadata_table: MetadataTableOutcome,
    /// Wall time.
    pub duration_ms: u64,
    /// How long taking the table lock waited for other holders (scheduling and finishing).
    pub lock_wait_ms: u64,
}

/// Under the lock: re-check that the instant is still pending, in the same state, with no
/// rollback scheduled meanwhile; then write `R.rollback.requested`. Returns `R`.
async fn schedule(
    table: &Table,
    work: &Work,
    planned: &PlannedRollback,
    options: &RollbackOptions,
) -> Result<String, Error> {
    let config = table.config();
    let storage = table.storage();
    let t = work.target.as_str();
    // Re-check right before the first mutation: still pending, in the same state, and
    // nobody scheduled a rollback of it meanwhile.
    let timeline = table.timeline().await?;
    let still = timeline
        .find(t)
        .find(|i| i.is_pending() && i.state == work.state);
    if still.is_none() {
        return Err(refused(
            table,
            t,
            "the instant changed state while the rollback was planned; nothing was changed, try again",
        ));
    }
    // One plan per failed instant (Hudi 1.2's `hoodie.rollback.avoid.duplicate.plan`, always):
    // never a second rollback of an instant with a pending one, nor beside a pending rollback
    // whose plan cannot be read (it may be this instant's).
    let (pending, unreadable) = pending_rollbacks(table, &timeline).await?;
    if let Some(p) = pending.get(t) {
        return Err(refused(
            table,
            t,
            format!("rollback {} of this instant was scheduled meanwhile; nothing was changed, run again to resume it", p.instant),
        ));
    }
    if let Some((r, why)) = unreadable.first() {
        return Err(refused(
            table,
            t,
            format!("rollback {r} is pending but its plan cannot be read ({why}), so it may be this instant's: a second rollback of one instant is never scheduled. Nothing was changed; inspect `{r}`"),
        ));
    }
    if let Some(reason) = metadata_table_refusal(table, t, None).await? {
        return Err(refused(table, t, format!("{reason}; nothing was changed")));
    }
    // The table folder and the way to every path again, under the lock: the folder may have
    // been swapped for a link since the table was opened, or since the plan was made.
    refuse_links(table, t, &planned_changes(table, t, planned)?).await?;
    let mdt_timeline = match table.metadata_table().await? {
        Some(m) if config.metadata_table_enabled() => Some(m.timeline().await?),
        _ => None,
    };
    let mut timelines = vec![&timeline];
    if let Some(m) = &mdt_timeline {
        timelines.push(m);
    }
    let r = new_instant_time(&timelines, table.zone());
    let path = timeline_file(config, &r, None, Action::Rollback, State::Requested)?;
    let bytes = planned
        .plan
        .to_avro()
        .map_err(|e| avro_err(table, t, &path, e))?;
    table.stop_point("before scheduling the rollback", None)?;
    crate::exec::journal_start(
        options.journal.as_ref(),
        table,
        crate::exec::StartedChange {
            action: Action::Rollback,
            instant: r.clone(),
            target: t.to_string(),
        },
    )
    .await?;
    if !create_if_absent(storage, &path, bytes).await? {
        return Err(refused(
            table,
            t,
            format!("rollback instant {r} already exists; nothing was changed, try again"),
        ));
    }
    Ok(r)
}

/// Roll back `work`; `completed` is handed the rollback as soon as it is complete (before the
/// clean-up after it, which may still fail).
pub(super) async fn run_one(
    table: &Table,
    work: Work,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
    completed: &(dyn Fn(&RollbackDone) + Send + Sync),
) -> Result<RollbackDone, Error> {
    let started = Clock::now();
    let t = work.target.clone();
    let resumed = work.pending.is_some();
    table.stop_point(
        &format!("before rolling back {t}"),
        resumed.then_some(t.as_str()),
    )?;

    // A new rollback is scheduled and claimed under one hold of the table lock; a resumed one
    // is claimed by `execute` once it passed its checks. The rollback's heartbeat is this
    // run's from then until it is done, or left to expire if the run stops.
    let (scheduled, schedule_wait) = match work.pending.clone() {
        Some(p) => ((p.instant, p.plan, p.state, None), Duration::ZERO),
        None => {
            let (planned, _) = make_plan(table, &work, options).await?;
            let (w, p, beats) = (&work, &planned, table.storage());
            let ((r, claim), waited) = locked(table, options, |l| async move {
                let r = schedule(&l, w, p, options).await?;
                let claim = RollbackClaim::take(&l, beats, &w.target, &r, true, options).await?;
                Ok((r, claim))
            })
            .await?;
            info!(rollback_instant = %r, files = planned.deletes.len(), "scheduled rollback");
            ((r, planned.plan, State::Requested, Some(claim)), waited)
        }
    };
    let (r, plan, r_state, claim) = scheduled;

    // From here on the rollback is pending: a stop leaves it for a rerun to resume.
    let span = info_span!("execute", rollback_instant = %r);
    let run = RollbackRun {
        t: &t,
        r: &r,
        plan: &plan,
        action: action_of_plan(&plan),
        options,
        progress,
        completed,
        started,
        schedule_wait,
    };
    let result = execute(table, &run, r_state, claim).instrument(span).await;
    result.map_err(|e| left_pending(e, &t))
}

/// One scheduled rollback of `t` at `r` under way: what its steps read.
struct RollbackRun<'a> {
    /// The instant rolled back.
    t: &'a str,
    /// The rollback instant.
    r: &'a str,
    /// The rollback's plan (as on its requested file).
    plan: &'a RollbackPlan,
    /// The action of `t`, as the plan names it.
    action: Action,
    options: &'a RollbackOptions,
    progress: Option<&'a dyn Progress>,
    /// Told of the rollback once it is complete.
    completed: &'a (dyn Fn(&RollbackDone) + Send + Sync),
    /// When this run of the rollback started (its metadata records the time taken).
    started: Clock,
    /// How long scheduling it waited for the table lock.
    schedule_wait: Duration,
}

impl RollbackRun<'_> {
    /// What this run did, once complete.
    fn done(
        &self,
        resumed: bool,
        files_deleted: usize,
        log_blocks_written: usize,
        metadata_table: MetadataTableOutcome,
        lock_waited: Duration,
    ) -> RollbackDone {
        RollbackDone {
            instant: self.t.to_string(),
            action: self.action.as_str().to_string(),
            rollback_instant: self.r.to_string(),
            resumed,
            files_deleted,
            log_blocks_written,
            metadata_table,
            duration_ms: self.started.elapsed().as_millis() as u64,
            lock_wait_ms: (self.schedule_wait + lock_waited).as_millis() as u64,
        }
    }
}

/// Run scheduled rollback `run.r` (in `r_state`). `claim` is its heartbeat when this run just
/// scheduled it; a rollback an earlier run scheduled (`None`) is checked before anything
/// changes and claimed then (refused, the table is as it was). Then, fenced by the claim,
/// [`run_claimed`]; the claim is released when the rollback is done or was withdrawn, else
/// left to expire.
async fn execute(
    table: &Table,
    run: &RollbackRun<'_>,
    r_state: State,
    claim: Option<RollbackClaim>,
) -> Result<RollbackDone, Error> {
    let (t, r) = (run.t, run.r);
    let resumed = claim.is_none();
    let base = BasePath::from_uri(table.uri());
    let resolved = match resolve_plan(run.plan, &base) {
        Ok(resolved) => resolved,
        Err(e) => {
            if let Some(c) = claim {
                c.abandon().await;
            }
            return Err(plan_err(table, e));
        }
    };
    let claim = match claim {
        Some(c) => c,
        None => {
            check_resumed(table, run, &resolved, r_state).await?;
            let beats = table.storage();
            locked(table, run.options, |l| async move {
                RollbackClaim::take(&l, beats, t, r, false, run.options).await
            })
            .await?
            .0
        }
    };
    let claimed = claim.fence(table, run.options);
    let result = run_claimed(&claimed, run, &resolved, r_state, resumed).await;
    match &result {
        Ok(_) => claim.release().await,
        Err(_) => {
            claim.abandon().await;
            // Withdrawn (nothing was deleted): its heartbeat goes with it.
            let requested =
                timeline_file(table.config(), r, None, Action::Rollback, State::Requested)?;
            if let Ok(None) = table.storage().head(&requested).await {
                let _ = table.storage().delete(&heartbeat_path(r)?).await;
            }
        }
    }
    result
}

/// The claimed rollback: the checks before its first delete, the plan's deletes and command
/// blocks, the target's markers and heartbeat, then [`finish`] under the table lock, then the
/// rollback's own markers.
async fn run_claimed(
    table: &Table,
    run: &RollbackRun<'_>,
    resolved: &ResolvedPlan,
    r_state: State,
    resumed: bool,
) -> Result<RollbackDone, Error> {
    let (t, r) = (run.t, run.r);
    let storage = table.storage();
    table.stop_point(&format!("rollback {r} is scheduled"), Some(t))?;
    start(table, run, r_state, resumed).await?;

    let rollback_log_files = apply_plan(table, t, r, resolved, run.options, run.progress).await?;

    // The target's markers and heartbeat: the plan is all a rerun needs, so they go now,
    // before completing (a crash leaves nothing a rerun would not clean) and outside the lock.
    delete_folder(storage, &marker_dir(t)?).await?;
    storage.delete(&heartbeat_path(t)?).await?;

    // Finishing, under the table lock as Hudi does: the metadata table, then the target's
    // timeline files, then the completed rollback.
    table.stop_point("after the deletes, before finishing", None)?;
    let blocks = resolved.log_blocks.len();
    // Set once the completed rollback is written: releasing the lock may still fail after it.
    let finished = std::sync::Mutex::new(None);
    let (resolved_ref, log_files, slot) = (resolved, &rollback_log_files, &finished);
    let locked_result = locked(table, run.options, |fenced| async move {
        let (mdt, metadata) = finish(&fenced, run, resolved_ref, log_files).await?;
        let files = metadata.total_files_deleted as usize;
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some((mdt, files));
        Ok((mdt, files))
    })
    .await;
    let done = match locked_result {
        Ok(((mdt, files), waited)) => run.done(resumed, files, blocks, mdt, waited),
        Err(e) => {
            // Complete, though the lock's release failed: it counts, and the error stands.
            if let Some((mdt, files)) = finished.into_inner().unwrap_or_else(|e| e.into_inner()) {
                (run.completed)(&run.done(resumed, files, blocks, mdt, Duration::ZERO));
            }
            return Err(e);
        }
    };
    (run.completed)(&done);

    // The rollback's own markers (v6 MOR command blocks); a crash here leaves them for
    // `sweep` to find.
    delete_folder(storage, &marker_dir(r)?).await?;
    Ok(done)
}

/// Before a resumed rollback changes anything: refuse what must not go on.
async fn check_resumed(
    table: &Table,
    run: &RollbackRun<'_>,
    resolved: &ResolvedPlan,
    r_state: State,
) -> Result<(), Error> {
    let (t, r) = (run.t, run.r);
    let timeline = table.timeline().await?;
    if let Some(reason) = refusal_before_changes(table, &timeline, t, Some((r, r_state))).await? {
        return Err(refused(table, t, reason));
    }
    let mut changes = Changes::around(table, t, Some(r))?;
    changes.add_plan(resolved)?;
    refuse_links(table, t, &changes).await
}

/// Up to the first delete: before this run changes anything, refuse what must not go on (a
/// rollback this run scheduled is withdrawn then: nothing was deleted yet); the inflight file;
/// for a fresh rollback, a last look at the target.
async fn start(
    table: &Table,
    run: &RollbackRun<'_>,
    r_state: State,
    resumed: bool,
) -> Result<(), Error> {
    let (t, r) = (run.t, run.r);
    // A resumed rollback was checked before its claim (`check_resumed`).
    let refusal = match resumed {
        true => None,
        false => metadata_table_refusal(table, t, Some(r)).await?,
    };
    if let Some(reason) = refusal {
        withdraw(table, r).await?;
        return Err(refused(
            table,
            t,
            format!("{reason}; rollback {r} was withdrawn and nothing was deleted"),
        ));
    }

    if r_state == State::Requested {
        let inflight = timeline_file(table.config(), r, None, Action::Rollback, State::Inflight)?;
        create_if_absent(table.storage(), &inflight, Vec::new()).await?;
    }

    // Last look before the first delete of a fresh rollback: if the writer completed the
    // instant after all, withdraw the rollback; nothing was deleted yet.
    if !resumed {
        let timeline = table.timeline().await?;
        if timeline.find(t).any(|i| !i.is_pending()) {
            withdraw(table, r).await?;
            return Err(refused(
                table,
                t,
                format!("the instant completed while rollback {r} was being scheduled; the rollback was withdrawn and nothing was deleted"),
            ));
        }
    }
    Ok(())
}

/// The end of a rollback, under the lock: the metadata table's rollback, the target's
/// inflight then requested file, the completed rollback.
async fn finish(
    table: &Table,
    run: &RollbackRun<'_>,
    resolved: &ResolvedPlan,
    rollback_log_files: &BTreeMap<String, BTreeMap<String, i64>>,
) -> Result<(MetadataTableOutcome, RollbackMetadata), Error> {
    let (t, r, action) = (run.t, run.r, run.action);
    let storage = table.storage();
    let config = table.config();
    table.stop_point("under the lock, before finishing", None)?;
    // Under the lock, before finishing changes anything: another process may have finished
    // this rollback, the writer may have completed the instant after all, the metadata table
    // may have compacted meanwhile.
    let timeline = table.timeline().await?;
    if rollback_completed(&timeline, r) {
        return Err(refused(table, t, completed_elsewhere(r)));
    }
    if timeline.find(t).any(|i| !i.is_pending()) {
        return Err(refused(
            table,
            t,
            format!("the instant completed while rollback {r} was running; its rollback stays pending for an operator to look at"),
        ));
    }
    if let Some(reason) = metadata_table_refusal(table, t, Some(r)).await? {
        return Err(refused(
            table,
            t,
            format!("{reason}; rollback {r} stays pending"),
        ));
    }
    // The metadata table, before the data table's timeline changes. Table versions 5 and 6
    // record the rollback in the metadata table's `files` partition, from the rollback
    // metadata (the same that is completed below).
    let recorded = rollback_metadata(
        r,
        t,
        action,
        run.plan,
        resolved,
        rollback_log_files,
        run.started,
    );
    let mdt = rollback_metadata_table(table, t, r, &recorded, run.options).await?;
    table.stop_point("after the metadata table's rollback", None)?;

    // The target's own timeline files: inflight first, then requested.
    let timeline = table.timeline().await?;
    let own: Vec<_> = timeline
        .find(t)
        .filter(|i| i.is_pending() && i.action.completed_action() == action.completed_action())
        .flat_map(|i| i.files.clone())
        .collect();
    delete_newest_first(storage, own).await?;

    // The completed rollback.
    let metadata = rollback_metadata(
        r,
        t,
        action,
        run.plan,
        resolved,
        rollback_log_files,
        run.started,
    );
    let completion = match config.timeline_layout {
        crate::table::TimelineLayout::V1 => None,
        crate::table::TimelineLayout::V2 => {
            let timeline = table.timeline().await?;
            Some(new_instant_time(&[&timeline], table.zone()))
        }
    };
    write_completed_rollback(table, t, r, completion.as_deref(), &metadata).await?;
    info!(files = metadata.total_files_deleted, "rollback completed");

    Ok((mdt, metadata))
}

/// Whether rollback `r` has a completed file on `timeline`.
fn rollback_completed(timeline: &Timeline, r: &str) -> bool {
    timeline
        .find(r)
        .any(|i| i.action == Action::Rollback && !i.is_pending())
}

fn completed_elsewhere(r: &str) -> String {
    format!("rollback {r} was completed by another process meanwhile; there is nothing left to do and nothing more was written")
}

/// Why a rollback of `t` must not change anything now, checked right before its first change
/// (and by the dry run). `pending` is the pending rollback being resumed, with its state.
///
/// A pending rollback whose instant has completed since (its writer was alive after all) is
/// refused. Hudi's writers resume every pending rollback (`getPendingRollbackInfos`) and
/// roll the completed commit back with it (`revertToInflight`, then the plan's deletes):
/// hudi-keeper never undoes a completed commit that way, and says how to get out.
pub(super) async fn refusal_before_changes(
    table: &Table,
    timeline: &Timeline,
    t: &str,
    pending: Option<(&str, State)>,
) -> Result<Option<String>, Error> {
    if let Some((r, r_state)) = pending {
        if rollback_completed(timeline, r) {
            return Ok(Some(completed_elsewhere(r)));
        }
        if timeline.find(t).any(|i| !i.is_pending()) {
            let requested =
                timeline_file(table.config(), r, None, Action::Rollback, State::Requested)?;
            let inflight =
                timeline_file(table.config(), r, None, Action::Rollback, State::Inflight)?;
            let way_out = match r_state {
                State::Requested => format!(
                    "It never started, so no file was deleted: remove `{requested}` (before the next Hudi write or clean, which would resume it)"
                ),
                _ => format!(
                    "It had started, so files of the commit may be gone: check the commit, and restore the table to a commit before it if it is damaged (`hudi-keeper restore --to-instant`, which also removes the rollback), or remove `{inflight}` and `{requested}` if it is intact (before the next Hudi write or clean, which would resume it)"
                ),
            };
            return Ok(Some(format!(
                "rollback {r} of this instant is pending, but the instant has completed since (its writer was alive after all). Resuming the rollback would delete files of a completed commit, as Hudi would when it resumes it; nothing was changed. {way_out}"
            )));
        }
    }
    Ok(metadata_table_refusal(table, t, pending.map(|(r, _)| r))
        .await?
        .map(|reason| format!("{reason}; nothing was changed")))
}

/// Delete a rollback this run scheduled (inflight, then requested), before anything of its
/// plan was deleted.
async fn withdraw(table: &Table, r: &str) -> Result<(), Error> {
    for state in [State::Inflight, State::Requested] {
        let path = timeline_file(table.config(), r, None, Action::Rollback, state)?;
        table.storage().delete(&path).await?;
    }
    Ok(())
}
