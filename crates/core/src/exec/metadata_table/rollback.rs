//! The metadata table's part of a data-table rollback.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info_span, Instrument};

use crate::exec::rollback::{
    apply_plan, avro_err, delete_folder, list_data_files, pending_rollbacks, plan_err, refused,
    rollback_metadata, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::rollback::RollbackPlan;
use crate::plan::rollback::{plan_rollback, resolve_plan, PlanInput, PlanTarget};
use crate::protocol::markers::marker_dir;
use crate::table::files::BasePath;
use crate::table::{Table, TableType, TableVersion, TimelineLayout};
use crate::timeline::{Action, Instant, State, Timeline};
use crate::Error;

/// What a rollback did to the metadata table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataTableOutcome {
    /// The table has no metadata table in use.
    NotInUse,
    /// The metadata table had no completed deltacommit of the instant: nothing to undo there
    /// (its own next write rolls back a pending one).
    NothingToUndo,
    /// The metadata table's deltacommit of the instant was rolled back (Hudi 1.x: with the same
    /// instant; table version 6: after a deltacommit recording the rollback, at `R006`).
    RolledBack,
    /// Table version 6: the rollback was recorded in the metadata table (a deltacommit at the
    /// rollback instant), which had no completed deltacommit of the instant to undo.
    Recorded,
}

/// Why the metadata table's deltacommit of `t` cannot be rolled back: Hudi refuses when a
/// metadata-table compaction completed after it (undoing it needs a restore). `None` when
/// there is nothing to undo there, or its rollback of `t` is pending (it is resumed).
pub(in crate::exec) async fn metadata_table_refusal(
    table: &Table,
    t: &str,
    r: Option<&str>,
) -> Result<Option<String>, Error> {
    if !table.config().metadata_table_enabled() {
        return Ok(None);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(None);
    };
    let timeline = mdt.timeline().await?;
    if table.config().version == TableVersion::V6 {
        return super::v6::refusal(&mdt, &timeline, t, r).await;
    }
    let (pending, _) = pending_rollbacks(&mdt, &timeline).await?;
    if pending.contains_key(t) {
        return Ok(None);
    }
    Ok(compacted_after(&timeline, t))
}

/// The refusal when a metadata-table compaction may include the metadata table's completed
/// deltacommit of `t` (table versions 8 and 9).
///
/// Hudi 1.1.1 (`HoodieBackedTableMetadataWriter.validateRollback`, called only for a completed
/// deltacommit) refuses when the deltacommit's *completion* time is at or before the requested
/// time of the latest completed compaction; 1.0.1 compared the instant's *requested* time and so
/// also refused a deltacommit that completed after the compaction was scheduled. The 1.1.1 rule
/// is safe because a compaction plan only takes log files whose deltacommit completed before the
/// compaction's requested time (`BaseHoodieCompactionPlanGenerator`, `isCompletedBefore`, in
/// 1.0.1 as in 1.1.1): a deltacommit that completed later is not in the compacted base file, its
/// log files belong to the file slice after the compaction, and deleting them undoes it. The
/// newest compaction has the largest requested time, so if any compaction includes the
/// deltacommit, this one is refused too. hudi-keeper is stricter than Hudi where Hudi's check
/// cannot see: a pending compaction requested after the deltacommit completed may list its files
/// (deleting them would break the compaction), so it refuses too; times of different lengths
/// (0.x's suffixed compaction times) are compared as strings instead of skipped; and without a
/// completion time it falls back to 1.0.1's rule on the requested time.
pub(in crate::exec) fn compacted_after(timeline: &Timeline, t: &str) -> Option<String> {
    let deltacommit = timeline
        .find(t)
        .find(|i| i.action == Action::DeltaCommit && !i.is_pending())?;
    // A deltacommit completes after it was requested: without its completion time, the
    // requested time is all that is known.
    let completed = deltacommit.completion_time.as_deref().unwrap_or(t);
    let latest = |pending: bool| {
        timeline
            .instants()
            .iter()
            .filter(|i| {
                if pending {
                    i.is_pending() && i.pending_action == Action::Compaction
                } else {
                    !i.is_pending() && i.action == Action::Commit
                }
            })
            .map(|i| i.requested_time.as_str())
            .max()
    };
    if let Some(c) = latest(false).filter(|c| completed <= *c) {
        return Some(format!(
            "the metadata table compacted at {c}, after this instant's metadata-table deltacommit completed ({completed}), so the compacted files may include it; undoing it needs a restore to a commit before the instant (hudi-keeper restore --to-instant)"
        ));
    }
    if let Some(c) = latest(true).filter(|c| completed <= *c) {
        return Some(format!(
            "a metadata-table compaction ({c}, pending) was scheduled after this instant's metadata-table deltacommit completed ({completed}) and may include it; let a writer complete the compaction, then restore to a commit before the instant (hudi-keeper restore --to-instant)"
        ));
    }
    None
}

/// Roll back the metadata table's deltacommit of `t` with the same rollback instant `r`, as Hudi
/// 1.x does (listing-based: its log files named with `t` are deleted); on table version 6 as
/// Hudi 0.15 does ([`super::v6`], which writes `records` into the `files` partition).
pub(in crate::exec) async fn rollback_metadata_table(
    table: &Table,
    t: &str,
    r: &str,
    records: &BTreeMap<String, BTreeMap<String, i64>>,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    if !table.config().metadata_table_enabled() {
        return Ok(MetadataTableOutcome::NotInUse);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(MetadataTableOutcome::NotInUse);
    };
    if table.config().version == TableVersion::V6 {
        return super::v6::roll_back(table, &mdt, t, r, records, options).await;
    }
    let timeline = mdt.timeline().await?;
    let (pending, _) = pending_rollbacks(&mdt, &timeline).await?;
    let started = Clock::now();
    if let Some(p) = pending.get(t) {
        // Resume the metadata table's rollback of t.
        let span = info_span!("metadata_table", rollback_instant = %p.instant);
        execute_mdt(&mdt, t, &p.instant, &p.plan, p.state, options, started)
            .instrument(span)
            .await?;
        return Ok(MetadataTableOutcome::RolledBack);
    }
    let Some(instant) = timeline
        .find(t)
        .find(|i| i.action == Action::DeltaCommit && !i.is_pending())
    else {
        return Ok(MetadataTableOutcome::NothingToUndo);
    };
    // Hudi refuses when a metadata-table compaction already covers t (checked before the
    // rollback changed anything; again here, under the lock, before its first change).
    if let Some(reason) = compacted_after(&timeline, t) {
        return Err(refused(table, t, reason));
    }
    let files = list_data_files(mdt.storage(), &Wanted::of([t.to_string()], [])).await?;
    let base = BasePath::from_uri(mdt.uri());
    let target = PlanTarget {
        requested_time: t.to_string(),
        action: Action::DeltaCommit,
        state: State::Inflight,
    };
    let planned = plan_rollback(&PlanInput {
        version: mdt.config().version,
        table_type: TableType::MergeOnRead,
        base: &base,
        target: &target,
        markers: None,
        data_files: &files,
        cross_check: true,
    })
    .map_err(|e| plan_err(&mdt, e))?;
    let path = timeline_file(mdt.config(), r, None, Action::Rollback, State::Requested)?;
    let bytes = planned
        .plan
        .to_avro()
        .map_err(|e| avro_err(&mdt, t, &path, e))?;
    mdt.stop_point("before the metadata table's rollback", None)?;
    create_if_absent(mdt.storage(), &path, bytes).await?;
    // The completed deltacommit goes back to inflight first (Hudi's revertToInflight).
    revert_to_inflight(&mdt, instant).await?;
    let span = info_span!("metadata_table", rollback_instant = %r);
    execute_mdt(
        &mdt,
        t,
        r,
        &planned.plan,
        State::Requested,
        options,
        started,
    )
    .instrument(span)
    .await?;
    Ok(MetadataTableOutcome::RolledBack)
}

/// Layout 2 `revertCompleteToInflight`: make sure requested and inflight files exist, then
/// delete the completed file.
pub(super) async fn revert_to_inflight(mdt: &Table, instant: &Instant) -> Result<(), Error> {
    let config = mdt.config();
    let t = &instant.requested_time;
    for state in [State::Requested, State::Inflight] {
        if instant.file(state).is_none() {
            let path = timeline_file(config, t, None, instant.pending_action, state)?;
            create_if_absent(mdt.storage(), &path, Vec::new()).await?;
        }
    }
    if let Some(done) = instant.file(State::Completed) {
        mdt.storage().delete(&done.path).await?;
    }
    Ok(())
}

pub(super) async fn execute_mdt(
    mdt: &Table,
    t: &str,
    r: &str,
    plan: &RollbackPlan,
    r_state: State,
    options: &RollbackOptions,
    started: Clock,
) -> Result<(), Error> {
    let storage = mdt.storage();
    let config = mdt.config();
    let base = BasePath::from_uri(mdt.uri());
    let resolved = resolve_plan(plan, &base).map_err(|e| plan_err(mdt, e))?;
    if r_state == State::Requested {
        let inflight = timeline_file(config, r, None, Action::Rollback, State::Inflight)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
    }
    // A resumed rollback may find the completed deltacommit still there.
    let timeline = mdt.timeline().await?;
    if let Some(done) = timeline.find(t).find(|i| !i.is_pending()) {
        revert_to_inflight(mdt, done).await?;
    }
    mdt.stop_point("before the metadata table's deletes", None)?;
    // Deletes (proven gone), then command blocks for the log files it appended to older file
    // slices (table version 6).
    let rollback_log_files = apply_plan(mdt, t, r, &resolved, options, None).await?;
    let timeline = mdt.timeline().await?;
    let mut own: Vec<_> = timeline
        .find(t)
        .filter(|i| i.is_pending() && i.action == Action::DeltaCommit)
        .flat_map(|i| i.files.clone())
        .collect();
    own.sort_by_key(|f| std::cmp::Reverse(f.name.state));
    for f in own {
        storage.delete(&f.path).await?;
    }
    let metadata = rollback_metadata(
        r,
        t,
        Action::DeltaCommit,
        plan,
        &resolved,
        &rollback_log_files,
        started,
    );
    let completion = match config.timeline_layout {
        TimelineLayout::V1 => None,
        TimelineLayout::V2 => Some(new_instant_time(&[&timeline], mdt.zone())),
    };
    let path = timeline_file(
        config,
        r,
        completion.as_deref(),
        Action::Rollback,
        State::Completed,
    )?;
    let bytes = metadata.to_avro().map_err(|e| avro_err(mdt, t, &path, e))?;
    create_if_absent(storage, &path, bytes).await?;
    if !rollback_log_files.is_empty() {
        delete_folder(storage, &marker_dir(r)?).await?;
    }
    Ok(())
}
