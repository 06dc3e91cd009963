//! A rollback on the metadata table itself, shared by its part in a data-table rollback (Hudi
//! 1.x, [`super::rollback`]) and on table version 6 ([`super::v6`]): what it did
//! ([`MetadataTableOutcome`]), a completed deltacommit reverted to inflight, a scheduled
//! rollback run to its completion.

use std::time::Instant as Clock;

use serde::Serialize;

use crate::exec::steps::apply::{apply_plan, rollback_metadata, write_completed_rollback};
use tracing::{info_span, Instrument};

use crate::exec::steps::{avro_err, delete_folder, delete_newest_first, plan_err, RollbackOptions};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::rollback::RollbackPlan;
use crate::plan::rollback::resolve_plan;
use crate::protocol::markers::marker_dir;
use crate::table::files::BasePath;
use crate::table::{Table, TimelineLayout};
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

impl std::fmt::Display for MetadataTableOutcome {
    /// Words for an operator (the JSON has the variant's name).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MetadataTableOutcome::NotInUse => "not in use",
            MetadataTableOutcome::NothingToUndo => "nothing to undo",
            MetadataTableOutcome::RolledBack => "rolled back",
            MetadataTableOutcome::Recorded => "rollback recorded",
        })
    }
}

/// Layout 2 `revertCompleteToInflight`: make sure requested and inflight files exist, then
/// delete the completed file.
pub(in crate::exec) async fn revert_to_inflight(
    mdt: &Table,
    instant: &Instant,
) -> Result<(), Error> {
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

/// Run the metadata table's rollback `r` of its deltacommit `t` (scheduled, in `r_state`) to
/// its completion: inflight, `t` reverted if it completed, the plan's deletes and command
/// blocks, `t`'s timeline files, the completed rollback, its marker folder.
pub(in crate::exec) async fn execute_mdt(
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
    let own: Vec<_> = timeline
        .find(t)
        .filter(|i| i.is_pending() && i.action == Action::DeltaCommit)
        .flat_map(|i| i.files.clone())
        .collect();
    delete_newest_first(storage, own).await?;
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
    write_completed_rollback(mdt, t, r, completion.as_deref(), &metadata).await?;
    if !rollback_log_files.is_empty() {
        delete_folder(storage, &marker_dir(r)?).await?;
    }
    Ok(())
}

/// Hudi's EAGER pre-step for the failed write's own pending metadata-table deltacommit `t`
/// (table versions 5 and 6): `plan` scheduled as a metadata-table rollback at a fresh instant
/// after every instant of the metadata table's `timeline` and of the data table's, then run to
/// its completion.
pub(in crate::exec) async fn schedule_and_execute_mdt(
    table: &Table,
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    plan: &RollbackPlan,
    options: &RollbackOptions,
    started: Clock,
) -> Result<(), Error> {
    let parent = table.timeline().await?;
    let p = new_instant_time(&[timeline, &parent], mdt.zone());
    let path = timeline_file(mdt.config(), &p, None, Action::Rollback, State::Requested)?;
    let bytes = plan.to_avro().map_err(|e| avro_err(mdt, t, &path, e))?;
    mdt.stop_point(
        "before the metadata table's rollback of the pending deltacommit",
        None,
    )?;
    create_if_absent(mdt.storage(), &path, bytes).await?;
    execute_mdt(mdt, t, &p, plan, State::Requested, options, started)
        .instrument(info_span!("metadata_table", rollback_instant = %p))
        .await
}
