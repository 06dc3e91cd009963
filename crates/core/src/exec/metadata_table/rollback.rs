//! The metadata table's part of a data-table rollback.

use std::time::Instant as Clock;

use tracing::{info_span, Instrument};

use super::execute::{execute_mdt, revert_to_inflight, MetadataTableOutcome};
use crate::exec::steps::{
    avro_err, list_data_files, pending_rollbacks, plan_err, refused, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, timeline_file};
use crate::format::rollback::RollbackMetadata;
use crate::plan::rollback::{plan_rollback, PlanInput, PlanTarget};
use crate::table::files::BasePath;
use crate::table::{Table, TableType, TableVersion};
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// Why the metadata table's deltacommit of `t` cannot be rolled back: Hudi refuses when a
/// metadata-table compaction completed after it (undoing it needs a restore). `None` when
/// there is nothing to undo there, or its rollback of `t` is pending (it is resumed).
pub(in crate::exec) async fn metadata_table_refusal(
    table: &Table,
    t: &str,
    r: Option<&str>,
) -> Result<Option<String>, Error> {
    if !table.config().metadata_table_enabled() {
        if table.config().version == TableVersion::V5 && table.metadata_table().await?.is_some() {
            return Ok(Some(
                "this table version 5 (Hudi 0.12/0.13) table has a metadata table (.hoodie/metadata) that its hoodie.properties lists no partition of; whether Hudi 0.13 keeps that one in step has not been checked, so hudi-keeper leaves the table to Hudi 0.13".into(),
            ));
        }
        return Ok(None);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(None);
    };
    let timeline = mdt.timeline().await?;
    if table.config().version == TableVersion::V5 {
        return super::v5::refusal(table, &mdt, &timeline, t, r).await;
    }
    if table.config().version.is_0x() {
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
/// Hudi 0.15 does ([`super::v6`], which records the data table's rollback `metadata` in the
/// `files` partition), on version 5 as Hudi 0.13 does ([`super::v5`]).
pub(in crate::exec) async fn rollback_metadata_table(
    table: &Table,
    t: &str,
    r: &str,
    metadata: &RollbackMetadata,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    if !table.config().metadata_table_enabled() {
        return Ok(MetadataTableOutcome::NotInUse);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(MetadataTableOutcome::NotInUse);
    };
    if table.config().version == TableVersion::V5 {
        return super::v5::roll_back(table, &mdt, t, r, metadata, options).await;
    }
    if table.config().version.is_0x() {
        let records = crate::plan::metadata_table::rollback_file_records(metadata);
        return super::v6::roll_back(table, &mdt, t, r, &records, options).await;
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
