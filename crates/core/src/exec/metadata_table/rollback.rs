//! The metadata table's part of a data-table rollback.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info_span, Instrument};

use crate::exec::rollback::{
    avro_err, confirm_gone, list_data_files, pending_rollbacks, plan_err, refused,
    rollback_metadata, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::rollback::RollbackPlan;
use crate::plan::rollback::{plan_rollback, resolve_plan, PlanInput, PlanTarget};
use crate::storage::RelPath;
use crate::table::files::BasePath;
use crate::table::{Table, TableType};
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
    /// The metadata table's deltacommit of the instant was rolled back with the same instant.
    RolledBack,
}

/// Why the metadata table's deltacommit of `t` cannot be rolled back: Hudi refuses when a
/// metadata-table compaction completed after it (undoing it needs a restore). `None` when
/// there is nothing to undo there, or its rollback of `t` is pending (it is resumed).
pub(in crate::exec) async fn metadata_table_refusal(
    table: &Table,
    t: &str,
) -> Result<Option<String>, Error> {
    if !table.config().metadata_table_enabled() {
        return Ok(None);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(None);
    };
    let timeline = mdt.timeline().await?;
    let (pending, _) = pending_rollbacks(&mdt, &timeline).await?;
    if pending.contains_key(t) {
        return Ok(None);
    }
    Ok(compacted_after(&timeline, t))
}

/// The refusal when the metadata table (`timeline`) compacted after its completed deltacommit
/// of `t`.
pub(in crate::exec) fn compacted_after(timeline: &Timeline, t: &str) -> Option<String> {
    let completed = timeline
        .find(t)
        .any(|i| i.action == Action::DeltaCommit && !i.is_pending());
    if !completed {
        return None;
    }
    let last_compaction = timeline
        .completed()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time.clone())
        .max()?;
    (last_compaction.len() == t.len() && t <= last_compaction.as_str()).then(|| format!("the metadata table compacted at {last_compaction}, after this instant's deltacommit; undoing it needs a restore"))
}

/// Roll back the metadata table's deltacommit of `t` with the same rollback instant `r`, as Hudi
/// 1.x does (listing-based: its log files named with `t` are deleted).
pub(in crate::exec) async fn rollback_metadata_table(
    table: &Table,
    t: &str,
    r: &str,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    if !table.config().metadata_table_enabled() {
        return Ok(MetadataTableOutcome::NotInUse);
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(MetadataTableOutcome::NotInUse);
    };
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
async fn revert_to_inflight(mdt: &Table, instant: &Instant) -> Result<(), Error> {
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

async fn execute_mdt(
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
    let all: Vec<RelPath> = resolved
        .deletes
        .values()
        .flat_map(|v| v.iter().map(|(_, rel)| rel.clone()))
        .collect();
    mdt.stop_point("before the metadata table's deletes", None)?;
    let mut deleted = Vec::with_capacity(all.len());
    for (path, result) in storage
        .delete_many_with(all, options.delete_concurrency, || {})
        .await
    {
        result.map_err(|source| Error::Delete {
            table: mdt.uri().to_string(),
            instant: t.to_string(),
            path: path.to_string(),
            source: Box::new(source),
        })?;
        deleted.push(path);
    }
    confirm_gone(mdt, t, &deleted).await?;
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
        &BTreeMap::new(),
        started,
    );
    let c = new_instant_time(&[&timeline], mdt.zone());
    let path = timeline_file(config, r, Some(&c), Action::Rollback, State::Completed)?;
    let bytes = metadata.to_avro().map_err(|e| avro_err(mdt, t, &path, e))?;
    create_if_absent(storage, &path, bytes).await?;
    Ok(())
}
