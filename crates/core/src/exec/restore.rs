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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info, info_span, warn, Instrument};

use super::metadata_table::restore::{
    check_metadata_children, delete_metadata_table, metadata_table_plan, restore_metadata_table,
    MetadataTablePlan,
};
pub use super::metadata_table::MetadataTableAction;
use super::rollback::assess_table;
use super::savepoint::earliest_retained;
use super::steps::apply::{apply_plan, rollback_metadata};
use super::steps::changes::{refuse_links, Changes};
use super::steps::{
    action_of_plan, avro_err, delete_folder, left_pending, list_data_files, pending_rollbacks,
    plan_err, refused, PendingRollback, Progress, RollbackOptions, Wanted,
};
use super::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::restore::{RestoreMetadata, RestorePlan};
use crate::format::rollback::{InstantInfo, RollbackMetadata, RollbackPlan};
use crate::plan::restore::{
    plan_restore, rollbacks_to_remove, PlannedRestore, RestoreInput, RestoreRefusal, Undo,
};
use crate::plan::rollback::{plan_rollback, resolve_plan, PlanInput, PlanTarget};
use crate::protocol::lock::acquire_until;
use crate::protocol::markers::{marker_dir, read_markers, IoType, Marker, MarkerKind, Markers};
use crate::storage::{FileMeta, RelPath};
use crate::table::files::{BasePath, DataFile};
use crate::table::{Table, TableType, TableVersion};
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
    /// What happens to the metadata table.
    pub metadata_table: MetadataTableAction,
    /// Total files to delete.
    pub files: usize,
    /// Total bytes to delete.
    pub bytes: u64,
    /// The plan as Hudi stores it.
    pub plan: RestorePlan,
}

/// One undone instant.
#[derive(Debug, Clone, Serialize)]
pub struct UndoneInstant {
    /// The instant.
    pub instant: String,
    /// Its action.
    pub action: String,
    /// The child rollback instant (removed at the end).
    pub rollback_instant: String,
    /// Files deleted (already-missing files count as deleted).
    pub files_deleted: usize,
    /// Rollback command blocks written (v6 MOR).
    pub log_blocks_written: usize,
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

pub(super) fn refusal(table: &Table, target: &str, r: RestoreRefusal) -> Error {
    refused(table, target, format!("{}; nothing was changed", r.0))
}

/// The pending restores of a timeline with their plans (`None`: unreadable).
pub(super) async fn pending_restores(
    table: &Table,
    timeline: &Timeline,
) -> Result<Vec<(String, Option<RestorePlan>)>, Error> {
    let mut out = Vec::new();
    for i in timeline.pending().filter(|i| i.action == Action::Restore) {
        let plan = match i.file(State::Requested) {
            Some(f) => {
                let bytes = table.storage().get(&f.path).await?;
                match RestorePlan::from_avro(&bytes) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        warn!(table = %table.uri(), restore = %i.requested_time, error = %e, "unreadable restore plan");
                        None
                    }
                }
            }
            None => None,
        };
        out.push((i.requested_time.clone(), plan));
    }
    Ok(out)
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
    plan_restore(&RestoreInput {
        timeline,
        layout: table.config().timeline_layout,
        target,
        require_savepoint: options.require_savepoint,
        assessments: &assessments,
        pending_restores: &pending,
        earliest_retained: retained.as_deref(),
    })
    .map_err(|r| refusal(table, target, r))
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
    let lock = options.rollback.lock.for_table(&table.config().name);
    let guard = acquire_until(table.storage(), &lock, table.cancel_token()).await?;
    let waited = guard.waited;
    let fence = guard.fence();
    let fenced = table.fenced(Arc::new(fence.clone()));
    let span = info_span!("restore", table = %table.uri(), target = %target);
    let result = tokio::select! {
        r = run(&fenced, target, options, progress, started).instrument(span) => r,
        lost = fence.lost() => Err(lost),
    };
    let released = guard.release().await;
    let mut done = super::after_release(result, released)?;
    done.lock_wait_ms = waited.as_millis() as u64;
    Ok(done)
}

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
        // Nothing after the restore point. A restore that completed but stopped before its
        // final clean-up is finished here; otherwise there is nothing to do.
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
            &restore_changes(table, &timeline, target, &planned)?,
        )
        .await?;
        let removed = remove_rollbacks(table, target).await?;
        return Ok(RestoreDone {
            target: target.to_string(),
            restore_instant: done.requested_time.clone(),
            resumed: true,
            undone: vec![],
            rollbacks_removed: removed,
            files_deleted: 0,
            metadata_table: MetadataTableAction::NotInUse,
            duration_ms: started.elapsed().as_millis() as u64,
            lock_wait_ms: 0,
        });
    }

    // Every child rollback plan is made before the first change: one that cannot be made
    // refuses the restore while the table is as it was.
    let children = prepare_children(table, &timeline, &planned.undo).await?;
    // No delete or write through a symbolic link below the table's base path, nor in a table
    // folder swapped for one since it was opened: checked under the lock, before the first
    // change, for every child plan.
    let mut changes = restore_changes(table, &timeline, target, &planned)?;
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
    // The metadata table's fate, decided before the first change. Deleting it comes right after
    // the restore instant is written (`execute_restore`), before the children; restoring it
    // comes after the data table's instants are undone, before the data table's restore
    // completes, as in Hudi.
    let resumes = planned.resumes.as_deref();
    let mdt = metadata_table_plan(table, target, resumes).await?;
    if mdt.action == MetadataTableAction::Restored {
        check_metadata_children(table, target, resumes).await?;
    }
    // A new restore's time sorts after every time of the metadata table it restores too: a
    // metadata-table restore after it is then its own (an earlier restore's is before it).
    let mdt_timeline = match (mdt.action, &planned.resumes) {
        (MetadataTableAction::Restored, None) => match table.metadata_table().await? {
            Some(m) => Some(m.timeline().await?),
            None => None,
        },
        _ => None,
    };
    let mut timelines = vec![&timeline];
    timelines.extend(mdt_timeline.iter());
    let new_instant = new_instant_time(&timelines, table.zone());
    if planned.resumes.is_none() {
        // Recorded before the first change (the restore instant, which the metadata table's
        // deletion follows): a journal that cannot be written refuses the restore with the
        // table as it was.
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
    let mut done = execute_restore(
        table,
        target,
        &planned,
        &options.rollback,
        progress,
        started,
        Some(&mdt),
        &new_instant,
        children,
    )
    .await?;
    done.metadata_table = mdt.action;
    Ok(done)
}

/// Run a planned restore on `table` (the data table, or its metadata table): the plan and
/// inflight, (for the data table, the metadata table's deletion,) one child per instant, (for
/// the data table, the metadata table's restore,) the completed restore, rollbacks after the
/// point removed. `mdt` is the data table's metadata-table plan (`None` for the metadata
/// table's own restore). The caller holds the lock.
#[allow(clippy::too_many_arguments)]
pub(super) async fn execute_restore(
    table: &Table,
    target: &str,
    planned: &PlannedRestore,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
    started: Clock,
    mdt: Option<&MetadataTablePlan>,
    new_instant: &str,
    children: Children,
) -> Result<RestoreDone, Error> {
    let storage = table.storage();
    let config = table.config();
    let r = match &planned.resumes {
        Some(r) => r.clone(),
        None => {
            // Chosen (and for the data table recorded in the caller's journal) by the caller,
            // before anything changed.
            let r = new_instant.to_string();
            let path = timeline_file(config, &r, None, Action::Restore, State::Requested)?;
            let bytes = planned
                .plan
                .to_avro()
                .map_err(|e| avro_err(table, &r, &path, e))?;
            if !create_if_absent(storage, &path, bytes).await? {
                return Err(refused(
                    table,
                    target,
                    format!("restore instant {r} already exists; nothing was changed, try again"),
                ));
            }
            info!(table = %table.uri(), restore_instant = %r, instants = planned.undo.len(), "scheduled restore");
            r
        }
    };
    let inflight = timeline_file(config, &r, None, Action::Restore, State::Inflight)?;
    create_if_absent(storage, &inflight, Vec::new()).await?;

    // The metadata table goes only now that the restore is on the timeline: a run stopped
    // during (or right before) its deletion leaves a pending restore, which a rerun continues;
    // its plan, recomputed then, names the deletion again (the metadata table is untouched, or
    // partly deleted, which `metadata_table_plan` deletes), and deleting is idempotent. Before
    // the restore instant, a stop would leave the metadata table gone with nothing recorded to
    // finish the restore. (Hudi's restoreToSavepoint deletes it before scheduling the restore:
    // the orders differ only while a run is stopped in between, and end alike.)
    if let Some(m) = mdt.filter(|m| m.action == MetadataTableAction::Deleted) {
        table.stop_point(
            &format!("restore {r}, before deleting the metadata table"),
            Some(target),
        )?;
        if let Some(why) = &m.why {
            info!(reason = %why, "deleting the metadata table");
        }
        delete_metadata_table(table)
            .await
            .map_err(|e| left_pending(e, target))?;
    }
    let mdt = mdt.filter(|m| m.action == MetadataTableAction::Restored);

    let Children {
        pending: pending_rb,
        mut inputs,
        mut plans,
    } = children;
    let mut undone = Vec::new();
    let mut per_instant: BTreeMap<String, Vec<RollbackMetadata>> = BTreeMap::new();
    let mut infos = Vec::new();
    for u in &planned.undo {
        let span = info_span!("undo", instant = %u.instant);
        table.stop_point(
            &format!("restore {r}, before undoing {}", u.instant),
            Some(target),
        )?;
        let child = undo_one(
            table,
            u,
            pending_rb.get(&u.instant),
            plans.remove(&u.instant),
            &mut inputs,
            options,
            progress,
        )
        .instrument(span)
        .await
        .map_err(|e| left_pending(e, target))?;
        let Some((rb, metadata, blocks)) = child else {
            continue;
        };
        undone.push(UndoneInstant {
            instant: u.instant.clone(),
            action: u.action.as_str().to_string(),
            rollback_instant: rb,
            files_deleted: metadata.total_files_deleted as usize,
            log_blocks_written: blocks,
        });
        infos.push(InstantInfo {
            commit_time: u.instant.clone(),
            action: u.action.as_str().to_string(),
        });
        per_instant.insert(u.instant.clone(), vec![metadata]);
    }

    if let Some(m) = mdt {
        table.stop_point(
            &format!("restore {r}, before the metadata table's restore"),
            Some(target),
        )?;
        let span = info_span!("metadata_table");
        restore_metadata_table(table, target, &r, m, options)
            .instrument(span)
            .await
            .map_err(|e| left_pending(e, target))?;
    }

    // The completed restore.
    let metadata = RestoreMetadata {
        start_restore_time: r.clone(),
        time_taken_in_millis: started.elapsed().as_millis() as i64,
        instants_to_rollback: infos.iter().map(|i| i.commit_time.clone()).collect(),
        hoodie_restore_metadata: per_instant,
        version: Some(1),
        restore_instant_info: infos,
    };
    let completion = match config.timeline_layout {
        crate::table::TimelineLayout::V1 => None,
        crate::table::TimelineLayout::V2 => {
            let now = table.timeline().await?;
            let mut timelines = vec![&now];
            let inner;
            if mdt.is_some() {
                if let Some(m) = table.metadata_table().await? {
                    inner = m.timeline().await?;
                    timelines.push(&inner);
                }
            }
            Some(new_instant_time(&timelines, table.zone()))
        }
    };
    let path = timeline_file(
        config,
        &r,
        completion.as_deref(),
        Action::Restore,
        State::Completed,
    )?;
    let bytes = metadata
        .to_avro()
        .map_err(|e| avro_err(table, &r, &path, e))?;
    create_if_absent(storage, &path, bytes).await?;
    info!(table = %table.uri(), restore_instant = %r, undone = undone.len(), "restore completed");

    let removed = remove_rollbacks(table, target).await?;
    Ok(RestoreDone {
        target: target.to_string(),
        restore_instant: r,
        resumed: planned.resumes.is_some(),
        files_deleted: undone.iter().map(|u| u.files_deleted).sum(),
        undone,
        rollbacks_removed: removed,
        metadata_table: MetadataTableAction::NotInUse,
        duration_ms: started.elapsed().as_millis() as u64,
        lock_wait_ms: 0,
    })
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

/// A restore's children, prepared before it changes anything (and again on every resume,
/// from the table as it is then).
pub(super) struct Children {
    /// Child rollbacks an earlier attempt scheduled, by the instant they undo.
    pending: BTreeMap<String, PendingRollback>,
    inputs: ChildInputs,
    /// The child rollback plan of every instant still to plan, made from `inputs` before the
    /// restore's first change: one that cannot be made refuses the restore up front.
    plans: BTreeMap<String, RollbackPlan>,
}

/// Read what the children of a restore undoing `undo` are made from and make every child
/// plan not yet scheduled. Reads only.
pub(super) async fn prepare_children(
    table: &Table,
    timeline: &Timeline,
    undo: &[Undo],
) -> Result<Children, Error> {
    let (pending, _) = pending_rollbacks(table, timeline).await?;
    let inputs = child_inputs(table, timeline, undo, &pending).await?;
    let mut plans = BTreeMap::new();
    for u in undo {
        if inputs.markers.contains_key(&u.instant) {
            plans.insert(u.instant.clone(), child_plan(table, u, &inputs)?);
        }
    }
    Ok(Children {
        pending,
        inputs,
        plans,
    })
}

/// What the child plans of a restore are made from.
struct ChildInputs {
    /// Per instant still to plan, what tells its files apart ([`child_markers`]).
    markers: BTreeMap<String, Option<Markers>>,
    /// The data files those plans can use: files named with an instant the restore undoes,
    /// and files the markers name. Nothing else of the table is held.
    files: Vec<FileMeta>,
    /// Whether `files` gained files an earlier child wrote (command-block log files) since
    /// the plans were made: a later instant's plan is then made again.
    grown: bool,
}

/// Read the markers of every instant of `undo` that still needs a plan (no pending child
/// rollback, still on the timeline), then list the table keeping only the files their plans
/// can use, so memory follows the instants undone, not the size of the table.
async fn child_inputs(
    table: &Table,
    timeline: &Timeline,
    undo: &[Undo],
    pending: &BTreeMap<String, PendingRollback>,
) -> Result<ChildInputs, Error> {
    let mut markers = BTreeMap::new();
    for u in undo {
        let on_timeline = timeline.find(&u.instant).any(|i| i.action.is_write());
        if pending.contains_key(&u.instant) || !on_timeline {
            continue;
        }
        markers.insert(u.instant.clone(), child_markers(table, u).await?);
    }
    let named = markers
        .values()
        .flatten()
        .flat_map(|m| m.markers.iter().filter_map(|m| m.data_path().ok()));
    let wanted = Wanted::of(undo.iter().map(|u| u.instant.clone()), named);
    let files = list_data_files(table.storage(), &wanted).await?;
    Ok(ChildInputs {
        markers,
        files,
        grown: false,
    })
}

/// What ties files to an instant a restore undoes, besides their names: on v6 merge-on-read
/// tables the log files a completed deltacommit appended to (from its commit metadata), a
/// pending instant's markers; `None` for other completed instants.
async fn child_markers(table: &Table, u: &Undo) -> Result<Option<Markers>, Error> {
    let config = table.config();
    let v6_mor = config.version == TableVersion::V6 && config.table_type == TableType::MergeOnRead;
    Ok(match u.state {
        State::Completed if v6_mor && u.action == Action::DeltaCommit => {
            Some(appended_by(table, &u.instant).await?)
        }
        State::Completed => None,
        _ => {
            let m = read_markers(table.storage(), &u.instant).await?;
            m.kind.is_some().then_some(m)
        }
    })
}

/// The rollback plan of one instant a restore undoes. A completed instant's is listing-based,
/// as Hudi's restore makes it: every data file named with the instant, and on v6 merge-on-read
/// tables the log files its commit metadata says it appended to (they get command blocks). A
/// pending instant's comes from its markers, cross-checked against the listing.
fn child_plan(
    table: &Table,
    u: &Undo,
    inputs: &ChildInputs,
) -> Result<crate::format::rollback::RollbackPlan, Error> {
    let config = table.config();
    let Some(markers) = inputs.markers.get(&u.instant) else {
        return Err(refused(
            table,
            &u.instant,
            "its markers were not read before the listing; run the restore again",
        ));
    };
    let base = BasePath::from_uri(table.uri());
    let target = PlanTarget {
        requested_time: u.instant.clone(),
        action: u.action,
        state: match u.state {
            State::Completed => State::Inflight,
            s => s,
        },
    };
    let planned = plan_rollback(&PlanInput {
        version: config.version,
        table_type: config.table_type,
        base: &base,
        target: &target,
        markers: markers.as_ref(),
        data_files: &inputs.files,
        cross_check: true,
    })
    .map_err(|e| plan_err(table, e))?;
    Ok(planned.plan)
}

/// The files a completed v6 merge-on-read deltacommit wrote, from its commit metadata (JSON in
/// layout 1), as markers: the log files it appended to older file slices are named by their
/// base instant, so only the commit metadata ties them to the instant.
async fn appended_by(table: &Table, instant: &str) -> Result<Markers, Error> {
    let timeline = table.timeline().await?;
    let file = timeline
        .find(instant)
        .find(|i| !i.is_pending())
        .and_then(|i| i.file(State::Completed).cloned())
        .ok_or_else(|| {
            refused(
                table,
                instant,
                "its completed file disappeared while planning",
            )
        })?;
    let bytes = table.storage().get(&file.path).await?;
    let bad = |why: String| {
        refused(
            table,
            instant,
            format!(
                "its commit metadata `{}` is unreadable ({why}), so the log files it appended to cannot be found; nothing was changed",
                file.path
            ),
        )
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let stats = v
        .get("partitionToWriteStats")
        .and_then(|s| s.as_object())
        .ok_or_else(|| bad("no partitionToWriteStats".into()))?;
    let mut markers = Vec::new();
    for (partition, list) in stats {
        for stat in list.as_array().into_iter().flatten() {
            let Some(path) = stat.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let name = path.rsplit('/').next().unwrap_or(path);
            let io_type = match DataFile::parse(name) {
                Some(DataFile::Log { .. }) => IoType::Append,
                Some(DataFile::Base { .. }) => IoType::Create,
                None => return Err(bad(format!("`{path}` is not a data file name"))),
            };
            markers.push(Marker {
                partition: partition.clone(),
                file_name: name.to_string(),
                io_type,
            });
        }
    }
    markers.sort_by(|a, b| (&a.partition, &a.file_name).cmp(&(&b.partition, &b.file_name)));
    markers.dedup();
    Ok(Markers {
        kind: Some(MarkerKind::Direct),
        markers,
        folders: Default::default(),
    })
}

/// Undo one instant with a child rollback that is never completed. `None` when it was undone
/// by an earlier attempt. Returns the child rollback instant, its metadata and the number of
/// command blocks written; `files` gains the command-block log files written. `planned` is the
/// plan made before the restore changed anything; it is used unless earlier children wrote
/// files since (then the plan is made again, from the inputs with those files).
async fn undo_one(
    table: &Table,
    u: &Undo,
    pending: Option<&PendingRollback>,
    planned: Option<RollbackPlan>,
    inputs: &mut ChildInputs,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<Option<(String, RollbackMetadata, usize)>, Error> {
    let started = Clock::now();
    let storage = table.storage();
    let config = table.config();
    let t = u.instant.as_str();
    let timeline = table.timeline().await?;
    let (r, plan, r_state) = match pending {
        Some(p) => (p.instant.clone(), p.plan.clone(), p.state),
        None => {
            if timeline.find(t).all(|i| !i.action.is_write()) {
                return Ok(None);
            }
            let plan = match planned {
                Some(plan) if !inputs.grown => plan,
                _ => child_plan(table, u, inputs)?,
            };
            let r = new_instant_time(&[&timeline], table.zone());
            let path = timeline_file(config, &r, None, Action::Rollback, State::Requested)?;
            let bytes = plan.to_avro().map_err(|e| avro_err(table, t, &path, e))?;
            if !create_if_absent(storage, &path, bytes).await? {
                return Err(refused(
                    table,
                    t,
                    format!("rollback instant {r} already exists; run the restore again"),
                ));
            }
            (r, plan, State::Requested)
        }
    };
    if r_state == State::Requested {
        let inflight = timeline_file(config, &r, None, Action::Rollback, State::Inflight)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
    }
    let base = BasePath::from_uri(table.uri());
    let resolved = resolve_plan(&plan, &base).map_err(|e| plan_err(table, e))?;

    // The instant's timeline files: its completed file first (from here on readers ignore it),
    // and its inflight and requested files once its data is gone.
    let mut own: Vec<_> = table
        .timeline()
        .await?
        .find(t)
        .filter(|i| i.action.is_write())
        .flat_map(|i| i.files.clone())
        .collect();
    own.sort_by_key(|f| std::cmp::Reverse(f.name.state));
    if let Some(done) = own.iter().find(|f| f.name.state == State::Completed) {
        storage.delete(&done.path).await?;
    }
    let log_files = apply_plan(table, t, &r, &resolved, options, progress).await?;
    for (partition, logs) in &log_files {
        for abs in logs.keys() {
            if let Ok(rel) = base.resolve(abs) {
                if let Some(meta) = storage.head(&rel).await? {
                    inputs.files.push(meta);
                    inputs.grown = true;
                }
            } else {
                warn!(partition, log = %abs, "command block outside the table?");
            }
        }
    }
    // Its markers go; its heartbeat stays, as Hudi's restore leaves it (a dead writer's
    // heartbeat names an instant that no longer exists, which nothing reads).
    delete_folder(storage, &marker_dir(t)?).await?;
    for f in own.iter().filter(|f| f.name.state != State::Completed) {
        storage.delete(&f.path).await?;
    }
    let metadata = rollback_metadata(
        &r,
        t,
        action_of_plan(&plan),
        &plan,
        &resolved,
        &log_files,
        started,
    );
    info!(rollback_instant = %r, files = metadata.total_files_deleted, "undone");
    Ok(Some((r, metadata, resolved.log_blocks.len())))
}

/// Remove every rollback instant after `target`, newest first: its marker folder (v6 MOR
/// command blocks), then its completed file, inflight and requested.
pub(super) async fn remove_rollbacks(table: &Table, target: &str) -> Result<usize, Error> {
    let timeline = table.timeline().await?;
    let list = rollbacks_to_remove(&timeline, target);
    for rb in &list {
        let mut files: Vec<_> = timeline
            .find(rb)
            .filter(|i| i.action == Action::Rollback)
            .flat_map(|i| i.files.clone())
            .collect();
        files.sort_by_key(|f| std::cmp::Reverse(f.name.state));
        // Its marker folder first: once its timeline files are gone, nothing names it.
        delete_folder(table.storage(), &marker_dir(rb)?).await?;
        for f in files {
            table.storage().delete(&f.path).await?;
        }
    }
    Ok(list.len())
}
