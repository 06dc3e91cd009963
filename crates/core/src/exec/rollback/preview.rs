//! What a rollback would do, as `--dry-run` shows it, changing nothing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::plan::make_plan;
use super::run::refusal_before_changes;
use super::select::{select, Selection};
use crate::exec::steps::changes::{refuse_links, Changes};
use crate::exec::steps::{plan_err, refused, RollbackOptions};
use crate::format::rollback::RollbackPlan;
use crate::plan::rollback::{resolve_plan, ListingScope, PlannedDelete};
use crate::table::files::BasePath;
use crate::table::Table;
use crate::timeline::{Action, State};
use crate::Error;

/// A rollback that would run, as `--dry-run` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackPreview {
    /// The instant to roll back.
    pub instant: String,
    /// Its pending action.
    pub action: Action,
    /// Requested or inflight.
    pub state: State,
    /// The pending rollback that would be resumed, if any.
    pub resumes: Option<String>,
    /// Why it is rolled back.
    pub reason: String,
    /// Files to delete per partition: (count, bytes).
    pub partitions: BTreeMap<String, PartitionPreview>,
    /// Total files to delete.
    pub files: usize,
    /// Total bytes to delete (of files that exist now).
    pub bytes: u64,
    /// Log files that get a rollback command block (v6 MOR).
    pub log_blocks: usize,
    /// Files found by the listing that the markers missed.
    pub files_not_in_markers: usize,
    /// Markers naming files that never appeared.
    pub markers_without_files: usize,
    /// Where the listing cross-check looked: the partitions the instant names, or the whole
    /// table (and why); none for a resumed plan (it is final) or without the cross-check.
    pub listing: ListingScope,
    /// The plan.
    pub plan: RollbackPlan,
}

/// One partition of a preview.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PartitionPreview {
    /// Files to delete.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// How many instants [`rollback`](super::rollback) would roll back (or resume) now: the selection alone, with
/// its refusals of a named instant, without planning (no listing of the table). Changes nothing.
pub async fn count_selected(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<usize, Error> {
    Ok(select(table, selection, options).await?.len())
}

/// Preview what [`rollback`](super::rollback) would do, changing nothing.
pub async fn preview(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<Vec<RollbackPreview>, Error> {
    let mut out = Vec::new();
    for work in select(table, selection, options).await? {
        let timeline = table.timeline().await?;
        let pending = work.pending.as_ref().map(|p| (p.instant.as_str(), p.state));
        if let Some(reason) =
            refusal_before_changes(table, &timeline, &work.target, pending).await?
        {
            return Err(refused(table, &work.target, reason));
        }
        let (plan, deletes, log_blocks, missed, phantom, listing) = match &work.pending {
            Some(p) => {
                let base = BasePath::from_uri(table.uri());
                let resolved = resolve_plan(&p.plan, &base).map_err(|e| plan_err(table, e))?;
                let mut changes = Changes::around(table, &work.target, Some(&p.instant))?;
                changes.add_plan(&resolved)?;
                refuse_links(table, &work.target, &changes).await?;
                let deletes: Vec<PlannedDelete> = resolved
                    .deletes
                    .iter()
                    .flat_map(|(part, files)| {
                        files.iter().map(move |(_, rel)| PlannedDelete {
                            partition: part.clone(),
                            path: rel.clone(),
                            size: None,
                            from_markers: true,
                        })
                    })
                    .collect();
                let blocks = resolved.log_blocks.iter().map(|b| b.3.len()).sum();
                (p.plan.clone(), deletes, blocks, 0, 0, ListingScope::None)
            }
            None => {
                let (planned, listing) = make_plan(table, &work, options).await?;
                let missed = planned.deletes.iter().filter(|d| !d.from_markers).count();
                (
                    planned.plan,
                    planned.deletes,
                    planned.log_blocks.len(),
                    missed,
                    planned.markers_without_files,
                    listing,
                )
            }
        };
        let mut partitions: BTreeMap<String, PartitionPreview> = BTreeMap::new();
        for d in &deletes {
            let p = partitions.entry(d.partition.clone()).or_default();
            p.files += 1;
            p.bytes += d.size.unwrap_or(0);
        }
        out.push(RollbackPreview {
            instant: work.target.clone(),
            action: work.action,
            state: work.state,
            resumes: work.pending.as_ref().map(|p| p.instant.clone()),
            reason: work.reason.clone(),
            files: deletes.len(),
            bytes: deletes.iter().filter_map(|d| d.size).sum(),
            partitions,
            log_blocks,
            files_not_in_markers: missed,
            markers_without_files: phantom,
            listing,
            plan,
        });
    }
    Ok(out)
}
