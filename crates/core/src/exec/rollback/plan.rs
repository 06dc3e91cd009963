//! A fresh rollback's plan: the target's markers, cross-checked against a listing of the
//! partitions its workload names (or of the whole table).

use std::collections::BTreeSet;

use tracing::{info, warn};

use super::select::Work;
use crate::exec::steps::changes::{refuse_links, Changes};
use crate::exec::steps::{list_data_files, list_partitions, plan_err, RollbackOptions, Wanted};
use crate::format::commit::workload_partitions;
use crate::plan::rollback::{
    listing_scope, plan_rollback, ListingScope, PlanInput, PlanTarget, PlannedRollback,
};
use crate::protocol::markers::read_markers;
use crate::table::files::BasePath;
use crate::table::{Table, TableVersion};
use crate::timeline::State;
use crate::Error;

/// The partitions the workload in the target's inflight file names (see
/// [`workload_partitions`]): `Ok(None)` without inflight file or workload, `Err` with why it
/// does not read. A read error is an error; an inflight file gone since the timeline was read
/// (the instant moved on) has no workload, and the re-check under the lock stops the rollback.
async fn read_workload(
    table: &Table,
    work: &Work,
) -> Result<Result<Option<BTreeSet<String>>, String>, Error> {
    let Some(path) = &work.inflight else {
        return Ok(Ok(None));
    };
    let Some(bytes) = table.storage().get_opt(path).await? else {
        return Ok(Ok(None));
    };
    let workload = workload_partitions(&bytes);
    if let Err(why) = &workload {
        warn!(table = %table.uri(), instant = %work.target, path = %path, %why, "the inflight file does not read as commit metadata; the whole table is listed");
    }
    Ok(workload)
}

pub(super) async fn make_plan(
    table: &Table,
    work: &Work,
    options: &RollbackOptions,
) -> Result<(PlannedRollback, ListingScope), Error> {
    let cross_check = options.listing_cross_check;
    let mut scope = ListingScope::None;
    let (markers, data_files) = match work.state {
        State::Requested => (None, vec![]),
        _ if cross_check => {
            // The markers first: the listing then keeps only what the plan uses, the files
            // named with the instant and those its markers name (on v6 merge-on-read tables,
            // log files of older slices it appended to).
            let markers = read_markers(table.storage(), &work.target).await?;
            let named = markers.markers.iter().filter_map(|m| m.data_path().ok());
            let mut wanted = Wanted::of([work.target.clone()], named);
            if table.config().version == TableVersion::V5 {
                wanted = wanted.with_v5_append_slices(&markers);
            }
            let workload = read_workload(table, work).await?;
            scope = listing_scope(
                markers.kind.is_some().then_some(&markers),
                workload
                    .as_ref()
                    .map(Option::as_ref)
                    .map_err(String::as_str),
            );
            let files = match &scope {
                ListingScope::Partitions { partitions, .. } => {
                    list_partitions(table.storage(), partitions, &wanted).await?
                }
                _ => list_data_files(table.storage(), &wanted).await?,
            };
            info!(table = %table.uri(), instant = %work.target, listing = %scope, "cross-check listing");
            (markers.kind.is_some().then_some(markers), files)
        }
        _ => {
            let markers = read_markers(table.storage(), &work.target).await?;
            // Without a listing, only the sizes of appended log files are needed (on table
            // version 5, the log files of the slices APPEND markers name).
            let mut files = Vec::new();
            if table.config().version == TableVersion::V5 {
                let wanted = Wanted::of([], []).with_v5_append_slices(&markers);
                let folders: BTreeSet<_> = markers
                    .markers
                    .iter()
                    .filter(|m| m.io_type == crate::protocol::markers::IoType::Append)
                    .filter_map(|m| m.data_path().ok().map(|p| p.parent()))
                    // Never `.hoodie` (the plan refuses such a marker).
                    .filter(|p| p.segments().next() != Some(".hoodie"))
                    .collect();
                files.extend(list_partitions(table.storage(), &folders, &wanted).await?);
            }
            for m in markers
                .markers
                .iter()
                .filter(|m| m.io_type == crate::protocol::markers::IoType::Append)
            {
                let path = m.data_path()?;
                if let Some(meta) = table.storage().head(&path).await? {
                    files.push(meta);
                }
            }
            (markers.kind.is_some().then_some(markers), files)
        }
    };
    let base = BasePath::from_uri(table.uri());
    let target = PlanTarget {
        requested_time: work.target.clone(),
        action: work.action,
        state: work.state,
    };
    let planned = plan_rollback(&PlanInput {
        version: table.config().version,
        table_type: table.config().table_type,
        base: &base,
        target: &target,
        markers: markers.as_ref(),
        data_files: &data_files,
        cross_check,
    })
    .map_err(|e| plan_err(table, e))?;
    // The dry run names a link on the way as the run would: before anything changes.
    refuse_links(
        table,
        &work.target,
        &planned_changes(table, &work.target, &planned)?,
    )
    .await?;
    Ok((planned, scope))
}

/// What a fresh rollback of `t` planned as `planned` changes.
pub(super) fn planned_changes(
    table: &Table,
    t: &str,
    planned: &PlannedRollback,
) -> Result<Changes, Error> {
    let mut changes = Changes::around(table, t, None)?;
    changes
        .deletes
        .extend(planned.deletes.iter().map(|d| d.path.clone()));
    changes
        .writes
        .extend(planned.log_blocks.iter().map(|(_, log)| log.clone()));
    Ok(changes)
}
