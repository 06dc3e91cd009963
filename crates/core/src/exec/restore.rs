//! Restoring a table to an earlier commit as Hudi does (hudi-format.md §6, observed with Hudi
//! 0.15, 1.0 and 1.1 in `tests/interop/observations/savepoint-restore.md`).
//!
//! Under the table lock, held for the whole restore:
//! 1. plan (`plan::restore`) from the timeline read under the lock, every child rollback plan
//!    included; decide the metadata table's fate as Hudi's `restoreToSavepoint` does: restore
//!    it, or delete it (restore point at or before its oldest compaction, before its timeline,
//!    or what `metadata_table::restore::metadata_table_plan` names); refuse before any change;
//! 2. the change journal's entry (the daemon's), before anything is written to the table;
//! 3. `R.restore.requested` (the plan), empty `R.restore.inflight`: the first change;
//! 4. the metadata table, when deleted: its partitions cleared in `hoodie.properties`,
//!    `.hoodie/metadata` removed, rebuilt by the next writer;
//! 5. one child rollback per instant, in plan order, each `r.rollback.requested` (a
//!    listing-based plan) and `r.rollback.inflight`, the instant's completed file first, then its
//!    files (v6 MOR: rollback command blocks for log files it appended to), then its inflight and
//!    requested files; children are never completed;
//! 6. the metadata table, when restored: (1.x) the partitions Hudi drops on restore dropped,
//!    then the same procedure (3, 5, 7, 8) one level down, then the deltacommit Hudi writes
//!    after it (1.x: empty; version 6: `files` records syncing it with storage);
//! 7. the completed restore (`HoodieRestoreMetadata`);
//! 8. every rollback instant after the restore point removed, newest first (marker folder,
//!    completed file, inflight, requested), as Hudi does.
//!
//! Every step is resumable, and every change is made with the restore pending on the timeline:
//! a pending restore (ours or Hudi's) is continued with its own plan and instant, a pending
//! child rollback with its own plan, and instants already undone are skipped. Hudi's
//! `restoreToSavepoint` deletes the metadata table before it schedules the restore (step 4
//! before 3); hudi-keeper schedules first, so that a run stopped during the deletion leaves a
//! pending restore whose rerun (it decides the metadata table's fate again, and a metadata table
//! partly deleted is deleted) finishes the deletion. The two orders differ only while a run is
//! stopped between the two steps, and end in the same state; Hudi's readers accept a table whose
//! metadata table was deleted.
//!
//! This module plans, checks and decides (1, 2) and runs the rest as the phases of the restore
//! procedure the metadata table's own restore shares (`exec::restore_steps`): schedule (3),
//! undo (5) and complete (7, 8), calling the metadata table's deletion (4) or restore (6)
//! (`exec::metadata_table::restore`) between them.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info, info_span, Instrument};

use super::metadata_table::restore::{
    check_metadata_children, delete_metadata_table, metadata_table_plan, restore_metadata_table,
    MetadataTablePlan,
};
pub use super::metadata_table::MetadataTableAction;
pub use super::restore_steps::UndoneInstant;
use super::restore_steps::{
    child_inputs, child_plan, pending_restores, prepare_children, refusal, remove_rollbacks,
    Children, RestoreRun,
};
use super::rollback::assess_table;
use super::savepoint::earliest_retained;
use super::steps::changes::{refuse_links, Changes};
use super::steps::claim::live_rollback_heartbeat;
use super::steps::RollbackOptions;
use super::steps::{left_pending, locked, pending_rollbacks, plan_err, refused, Progress};
use super::timeline_ops::{new_instant_time, timeline_file};
use crate::format::restore::RestorePlan;
use crate::plan::restore::{plan_restore, rollbacks_to_remove, PlannedRestore, RestoreInput};
use crate::plan::rollback::resolve_plan;
use crate::protocol::markers::marker_dir;
use crate::storage::RelPath;
use crate::table::files::BasePath;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// How a restore runs.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    /// Heartbeat thresholds (to tell dead pending writes from live ones), delete concurrency
    /// and the table lock.
    pub rollback: RollbackOptions,
    /// Refuse a restore point without a savepoint (`--savepoint`; Hudi's `restoreToSavepoint`).
    /// Off, any completed commit on the active timeline (`--to-instant`; `restoreToInstant`).
    pub require_savepoint: bool,
}

/// One instant a restore undoes, as `--dry-run` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct UndoPreview {
    /// The instant.
    pub instant: String,
    /// Its action.
    pub action: Action,
    /// Its state now.
    pub state: State,
    /// Its completion time (layout 2).
    pub completion_time: Option<String>,
    /// The pending child rollback that would be resumed.
    pub resumes_rollback: Option<String>,
    /// Files to delete.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Log files that get a rollback command block (v6 MOR).
    pub log_blocks: usize,
}

/// A restore that would run.
#[derive(Debug, Clone, Serialize)]
pub struct RestorePreview {
    /// The restore point.
    pub target: String,
    /// Whether the restore point is savepointed.
    pub savepointed: bool,
    /// The pending restore that would be continued.
    pub resumes: Option<String>,
    /// The instants to undo, in order.
    pub instants: Vec<UndoPreview>,
    /// Rollback instants after the restore point that are removed at the end.
    pub rollbacks_removed: Vec<String>,
    /// The rollback instants the restore makes, one for each instant it undoes that has none
    /// yet; they are removed at the end with `rollbacks_removed`.
    pub rollbacks_made: usize,
    /// What happens to the metadata table.
    pub metadata_table: MetadataTableAction,
    /// Total files to delete.
    pub files: usize,
    /// Total bytes to delete.
    pub bytes: u64,
    /// The plan as Hudi stores it.
    pub plan: RestorePlan,
}

/// A finished restore.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreDone {
    /// The restore point.
    pub target: String,
    /// The restore instant.
    pub restore_instant: String,
    /// Whether a pending restore was continued.
    pub resumed: bool,
    /// What this run undid, in order.
    pub undone: Vec<UndoneInstant>,
    /// Rollback instants removed at the end.
    pub rollbacks_removed: usize,
    /// Total files deleted.
    pub files_deleted: usize,
    /// What happened to the metadata table.
    pub metadata_table: MetadataTableAction,
    /// Wall time.
    pub duration_ms: u64,
    /// How long taking the table lock waited.
    pub lock_wait_ms: u64,
}

async fn make_restore_plan(
    table: &Table,
    timeline: &Timeline,
    target: &str,
    options: &RestoreOptions,
) -> Result<PlannedRestore, Error> {
    let assessments = assess_table(table, timeline, &options.rollback)
        .await?
        .assessments;
    let pending = pending_restores(table, timeline).await?;
    let retained = earliest_retained(table, timeline).await?;
    let planned = plan_restore(&RestoreInput {
        timeline,
        layout: table.config().timeline_layout,
        target,
        require_savepoint: options.require_savepoint,
        assessments: &assessments,
        pending_restores: &pending,
        earliest_retained: retained.as_deref(),
    })
    .map_err(|r| refusal(table, target, r))?;
    v5_pending_deltacommit_refusal(table, timeline, &planned).await?;
    Ok(planned)
}

/// Table version 5, merge-on-read: a restore that would undo a *pending* deltacommit is refused
/// before anything changes. Hudi 0.13 plans that child rollback from the deltacommit's inflight
/// file (`ListingBasedRollbackStrategy`, write stats of the workload), which depends on the engine
/// that wrote it: Hudi 0.13.1's Java client leaves the failed write's log blocks without a command
/// block there (seen in the interop harness), its Spark client writes a workload without file
/// paths. Rolling the failed write back first (`hudi-keeper rollback`, as Hudi 0.13 rolls it back
/// from its markers) leaves the restore only completed instants. A resumed restore is no
/// exception, unless the child rollback of that deltacommit was planned already (its plan is
/// followed as written); else Hudi 0.13 finishes it.
async fn v5_pending_deltacommit_refusal(
    table: &Table,
    timeline: &Timeline,
    planned: &crate::plan::restore::PlannedRestore,
) -> Result<(), Error> {
    let config = table.config();
    if config.version != crate::config::TableVersion::V5
        || config.table_type != crate::table::TableType::MergeOnRead
    {
        return Ok(());
    }
    let failed: Vec<&str> = planned
        .undo
        .iter()
        .filter(|u| u.action == Action::DeltaCommit && u.state == State::Inflight)
        .map(|u| u.instant.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    let (planned_rollbacks, _) = pending_rollbacks(table, timeline).await?;
    let Some(instant) = failed
        .into_iter()
        .find(|t| !planned_rollbacks.contains_key(*t))
    else {
        return Ok(());
    };
    let reason = match &planned.resumes {
        None => format!(
            "this restore would undo the failed deltacommit {instant} of a table of version 5 (Hudi 0.12/0.13), whose restore plans it differently by the engine that wrote it; roll it back first (`hudi-keeper rollback`), then restore"
        ),
        Some(r) => format!(
            "the pending restore {r} would go on to undo the failed deltacommit {instant} of a table of version 5 (Hudi 0.12/0.13), whose restore plans it differently by the engine that wrote it, and its rollback is not planned yet; finish the restore with Hudi 0.13"
        ),
    };
    Err(refused(table, instant, reason))
}

/// Preview a restore to `target`, changing nothing.
pub async fn preview_restore(
    table: &Table,
    target: &str,
    options: &RestoreOptions,
) -> Result<RestorePreview, Error> {
    let timeline = table.timeline().await?;
    let planned = make_restore_plan(table, &timeline, target, options).await?;
    let (pending_rb, _) = pending_rollbacks(table, &timeline).await?;
    let inputs = child_inputs(table, &timeline, &planned.undo, &pending_rb).await?;
    let sizes: BTreeMap<&RelPath, u64> = inputs.files.iter().map(|f| (&f.path, f.size)).collect();
    let base = BasePath::from_uri(table.uri());
    let mut instants = Vec::new();
    let mut changes = restore_changes(table, &timeline, target, &planned)?;
    for u in &planned.undo {
        let pending = pending_rb.get(&u.instant);
        let plan = match pending {
            Some(p) => p.plan.clone(),
            None => child_plan(table, u, &inputs)?,
        };
        let resolved = resolve_plan(&plan, &base).map_err(|e| plan_err(table, e))?;
        changes.add_plan(&resolved)?;
        let deletes: Vec<&RelPath> = resolved
            .deletes
            .values()
            .flat_map(|v| v.iter().map(|(_, rel)| rel))
            .collect();
        instants.push(UndoPreview {
            instant: u.instant.clone(),
            action: u.action,
            state: u.state,
            completion_time: timeline
                .find(&u.instant)
                .find_map(|i| i.completion_time.clone()),
            resumes_rollback: pending.map(|p| p.instant.clone()),
            files: deletes.len(),
            bytes: deletes.iter().filter_map(|d| sizes.get(d)).sum(),
            log_blocks: resolved.log_blocks.iter().map(|b| b.3.len()).sum(),
        });
    }
    // The dry run names a link on the way as the run would: before anything changes.
    refuse_links(table, target, &changes).await?;
    let savepointed = timeline
        .find(target)
        .any(|i| i.action == Action::Savepoint && !i.is_pending());
    Ok(RestorePreview {
        target: target.to_string(),
        savepointed,
        resumes: planned.resumes.clone(),
        files: instants.iter().map(|i| i.files).sum(),
        bytes: instants.iter().map(|i| i.bytes).sum(),
        rollbacks_made: instants
            .iter()
            .filter(|i| i.resumes_rollback.is_none())
            .count(),
        instants,
        rollbacks_removed: rollbacks_to_remove(&timeline, target),
        metadata_table: metadata_table_plan(table, target, planned.resumes.as_deref())
            .await?
            .action,
        plan: planned.plan,
    })
}

/// Restore the table to `target`, holding the table lock throughout. Stops at the first
/// failure; a rerun continues where it stopped.
pub async fn restore(
    table: &Table,
    target: &str,
    options: &RestoreOptions,
    progress: Option<&dyn Progress>,
) -> Result<RestoreDone, Error> {
    let started = Clock::now();
    let span = info_span!("restore", table = %table.uri(), target = %target);
    let (mut done, waited) = locked(table, &options.rollback, |fenced| async move {
        run(&fenced, target, options, progress, started)
            .instrument(span)
            .await
    })
    .await?;
    done.lock_wait_ms = waited.as_millis() as u64;
    Ok(done)
}

/// The restore under the lock: planned, checked before any change, then its phases
/// ([`RestoreRun`]) with the metadata table's deletion or restore between them.
async fn run(
    table: &Table,
    target: &str,
    options: &RestoreOptions,
    progress: Option<&dyn Progress>,
    started: Clock,
) -> Result<RestoreDone, Error> {
    let timeline = table.timeline().await?;
    let planned = make_restore_plan(table, &timeline, target, options).await?;
    if planned.undo.is_empty() && planned.resumes.is_none() {
        return finish_completed(table, &timeline, target, &planned, started).await;
    }
    let children =
        check_before_changes(table, &timeline, target, &planned, &options.rollback).await?;
    // The metadata table's fate, decided before the first change. Deleting it comes right after
    // the restore instant is written, before the children; restoring it comes after the data
    // table's instants are undone, before the data table's restore completes, as in Hudi.
    let resumes = planned.resumes.as_deref();
    let mdt = metadata_table_plan(table, target, resumes).await?;
    if mdt.action == MetadataTableAction::Restored {
        check_metadata_children(table, target, resumes).await?;
    }
    let new_instant =
        new_restore_instant(table, &timeline, target, &planned, &mdt, options).await?;

    let phases = RestoreRun {
        table,
        target,
        planned: &planned,
        options: &options.rollback,
        progress,
        started,
    };
    let r = phases.schedule(&new_instant).await?;
    if mdt.action == MetadataTableAction::Deleted {
        delete_metadata_table_of(table, target, &r, &mdt).await?;
    }
    let undone = phases.undo(&r, children).await?;
    if mdt.action == MetadataTableAction::Recorded {
        table.stop_point(
            &format!("restore {r}, before recording it in the metadata table"),
            Some(target),
        )?;
        record_restore_in_metadata_table(table, target, &r, &undone)
            .await
            .map_err(|e| left_pending(e, target))?;
    }
    let restored = mdt.action == MetadataTableAction::Restored;
    if restored {
        table.stop_point(
            &format!("restore {r}, before the metadata table's restore"),
            Some(target),
        )?;
        let span = info_span!("metadata_table");
        restore_metadata_table(table, target, &r, &mdt, &options.rollback)
            .instrument(span)
            .await
            .map_err(|e| left_pending(e, target))?;
    }
    let removed = phases.complete(&r, &undone, restored).await?;
    Ok(RestoreDone {
        target: target.to_string(),
        restore_instant: r,
        resumed: planned.resumes.is_some(),
        files_deleted: undone.instants.iter().map(|u| u.files_deleted).sum(),
        undone: undone.instants,
        rollbacks_removed: removed,
        metadata_table: mdt.action,
        duration_ms: started.elapsed().as_millis() as u64,
        lock_wait_ms: 0,
    })
}

/// Nothing after the restore point. A restore that completed but stopped before its final
/// clean-up is finished here; otherwise there is nothing to do.
async fn finish_completed(
    table: &Table,
    timeline: &Timeline,
    target: &str,
    planned: &PlannedRestore,
    started: Clock,
) -> Result<RestoreDone, Error> {
    let Some(done) = timeline
        .after(target)
        .filter(|i| i.action == Action::Restore && !i.is_pending())
        .last()
    else {
        return Err(refused(
            table,
            target,
            "there is no commit after this instant; nothing to restore and nothing was changed",
        ));
    };
    refuse_links(
        table,
        target,
        &restore_changes(table, timeline, target, planned)?,
    )
    .await?;
    let removed = remove_rollbacks(table, target).await?;
    Ok(RestoreDone {
        target: target.to_string(),
        restore_instant: done.requested_time.clone(),
        resumed: true,
        undone: vec![],
        rollbacks_removed: removed,
        files_deleted: 0,
        metadata_table: MetadataTableAction::NotInUse,
        duration_ms: started.elapsed().as_millis() as u64,
        lock_wait_ms: 0,
    })
}

/// Every check before the restore's first change: every child rollback plan made (one that
/// cannot be made refuses the restore while the table is as it was), no delete or write through
/// a symbolic link below the table's base path, nor in a table folder swapped for one since it
/// was opened (checked under the lock for every child plan). Returns the children.
async fn check_before_changes(
    table: &Table,
    timeline: &Timeline,
    target: &str,
    planned: &PlannedRestore,
    options: &RollbackOptions,
) -> Result<Children, Error> {
    let children = prepare_children(table, timeline, &planned.undo).await?;
    // A child rollback another process runs (its rollback heartbeat is fresh) is left to it.
    for (t, p) in &children.pending {
        if let Some(why) = live_rollback_heartbeat(table, &p.instant, options).await? {
            return Err(refused(
                table,
                t,
                format!("{why}; the restore was not continued and nothing was changed"),
            ));
        }
    }
    let mut changes = restore_changes(table, timeline, target, planned)?;
    let base = BasePath::from_uri(table.uri());
    let plans = children
        .pending
        .values()
        .map(|p| &p.plan)
        .chain(children.plans.values());
    for plan in plans {
        changes.add_plan(&resolve_plan(plan, &base).map_err(|e| plan_err(table, e))?)?;
    }
    refuse_links(table, target, &changes).await?;
    table.stop_point(
        "under the lock, before the restore changes anything",
        planned.resumes.as_ref().map(|_| target),
    )?;
    Ok(children)
}

/// The instant of a new restore, recorded in the change journal before the first change (the
/// restore instant, which the metadata table's deletion follows): a journal that cannot be
/// written refuses the restore with the table as it was. A new restore's time sorts after every
/// time of the metadata table it restores too: a metadata-table restore after it is then its
/// own (an earlier restore's is before it).
async fn new_restore_instant(
    table: &Table,
    timeline: &Timeline,
    target: &str,
    planned: &PlannedRestore,
    mdt: &MetadataTablePlan,
    options: &RestoreOptions,
) -> Result<String, Error> {
    let mdt_timeline = match (mdt.action, &planned.resumes) {
        (MetadataTableAction::Restored | MetadataTableAction::Recorded, None) => {
            match table.metadata_table().await? {
                Some(m) => Some(m.timeline().await?),
                None => None,
            }
        }
        _ => None,
    };
    let mut timelines = vec![timeline];
    timelines.extend(mdt_timeline.iter());
    let new_instant = new_instant_time(&timelines, table.zone());
    if planned.resumes.is_none() {
        super::journal_start(
            options.rollback.journal.as_ref(),
            table,
            super::StartedChange {
                action: Action::Restore,
                instant: new_instant.clone(),
                target: target.to_string(),
            },
        )
        .await?;
    }
    Ok(new_instant)
}

/// Table version 5: restore `r` recorded in the metadata table after its children
/// ([`MetadataTableAction::Recorded`]), before it completes, as Hudi 0.13 records it.
async fn record_restore_in_metadata_table(
    table: &Table,
    target: &str,
    r: &str,
    undone: &crate::exec::restore_steps::Undone,
) -> Result<(), Error> {
    let Some(mdt) = table.metadata_table().await? else {
        return Err(refused(
            table,
            target,
            format!("the metadata table is gone while restore {r} was running; the restore stays pending"),
        ));
    };
    super::metadata_table::v5::record_restore(&mdt, target, r, undone.rollbacks())
        .instrument(info_span!("metadata_table"))
        .await
}

/// Delete the metadata table, once restore `r` is on the timeline: a run stopped during (or
/// right before) its deletion leaves a pending restore, which a rerun continues; its plan,
/// recomputed then, names the deletion again (the metadata table is untouched, or partly
/// deleted, which `metadata_table_plan` deletes), and deleting is idempotent. Before the restore
/// instant, a stop would leave the metadata table gone with nothing recorded to finish the
/// restore. (Hudi's restoreToSavepoint deletes it before scheduling the restore: the orders
/// differ only while a run is stopped in between, and end alike.)
async fn delete_metadata_table_of(
    table: &Table,
    target: &str,
    r: &str,
    mdt: &MetadataTablePlan,
) -> Result<(), Error> {
    table.stop_point(
        &format!("restore {r}, before deleting the metadata table"),
        Some(target),
    )?;
    if let Some(why) = &mdt.why {
        info!(reason = %why, "deleting the metadata table");
    }
    delete_metadata_table(table)
        .await
        .map_err(|e| left_pending(e, target))
}

/// What a restore to `target` changes besides its child plans' files: its timeline files, the
/// marker folder and heartbeat of every instant it undoes, the marker folders of the rollbacks
/// it removes, and the metadata table.
fn restore_changes(
    table: &Table,
    timeline: &Timeline,
    target: &str,
    planned: &PlannedRestore,
) -> Result<Changes, Error> {
    let mut changes = Changes::around(table, target, None)?;
    for u in &planned.undo {
        let child = Changes::around(table, &u.instant, None)?;
        changes.deletes.extend(child.deletes);
        changes.trees.extend(child.trees);
    }
    for rb in rollbacks_to_remove(timeline, target) {
        changes.trees.push(marker_dir(&rb)?);
    }
    changes.writes.push(timeline_file(
        table.config(),
        target,
        None,
        Action::Restore,
        State::Requested,
    )?);
    Ok(changes)
}
