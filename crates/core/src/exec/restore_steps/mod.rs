//! The restore procedure that the data table's restore ([`crate::exec::restore`]) and the
//! metadata table's own restore (one level down) share, cut into its phases:
//! [`RestoreRun::schedule`] (the plan and inflight), [`RestoreRun::undo`] (one child rollback per
//! instant, [`children`]) and [`RestoreRun::complete`] (the completed restore, the rollbacks
//! after the point removed). The data table's restore calls the metadata table's deletion or
//! restore between them; the metadata table's own restore runs them in a row
//! ([`RestoreRun::execute`]). The caller holds the table lock.
//!
//! Nothing here imports the restore or the metadata table's modules: they import it.

mod children;

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info, info_span, warn, Instrument};

use self::children::undo_one;
pub(in crate::exec) use self::children::{child_inputs, child_plan, prepare_children, Children};
use crate::exec::steps::PendingRollback;
use crate::exec::steps::{
    avro_err, delete_folder, delete_newest_first, left_pending, refused, Progress, RollbackOptions,
};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::restore::{RestoreMetadata, RestorePlan};
use crate::format::rollback::{InstantInfo, RollbackMetadata};
use crate::plan::restore::{rollbacks_to_remove, PlannedRestore, RestoreRefusal, Undo};
use crate::protocol::markers::marker_dir;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

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

pub(in crate::exec) fn refusal(table: &Table, target: &str, r: RestoreRefusal) -> Error {
    refused(table, target, format!("{}; nothing was changed", r.0))
}

/// The pending restores of a timeline with their plans (`None`: unreadable).
pub(in crate::exec) async fn pending_restores(
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

/// Remove every rollback instant after `target`, newest first: its marker folder (v6 MOR
/// command blocks), then its completed file, inflight and requested.
pub(in crate::exec) async fn remove_rollbacks(table: &Table, target: &str) -> Result<usize, Error> {
    let timeline = table.timeline().await?;
    let list = rollbacks_to_remove(&timeline, target);
    for rb in &list {
        let files: Vec<_> = timeline
            .find(rb)
            .filter(|i| i.action == Action::Rollback)
            .flat_map(|i| i.files.clone())
            .collect();
        // Its marker folder first: once its timeline files are gone, nothing names it.
        delete_folder(table.storage(), &marker_dir(rb)?).await?;
        delete_newest_first(table.storage(), files).await?;
    }
    Ok(list.len())
}

/// One restore of one table (the data table, or its metadata table) to `target`: what every
/// phase reads.
pub(in crate::exec) struct RestoreRun<'a> {
    /// The table restored, fenced by the lock its caller holds.
    pub(in crate::exec) table: &'a Table,
    /// The restore point.
    pub(in crate::exec) target: &'a str,
    /// The restore's plan, made under the lock.
    pub(in crate::exec) planned: &'a PlannedRestore,
    /// Delete concurrency (the children's deletes).
    pub(in crate::exec) options: &'a RollbackOptions,
    /// Progress of the children's deletes.
    pub(in crate::exec) progress: Option<&'a dyn Progress>,
    /// When the restore started (its metadata records the time taken).
    pub(in crate::exec) started: Clock,
}

/// What the undo phase did, for the completed restore.
#[derive(Debug, Default)]
pub(in crate::exec) struct Undone {
    /// What this run undid, in order.
    pub(in crate::exec) instants: Vec<UndoneInstant>,
    /// The child rollback's metadata of each instant undone.
    per_instant: BTreeMap<String, Vec<RollbackMetadata>>,
    /// The instants undone, as the restore metadata names them.
    infos: Vec<InstantInfo>,
}

impl Undone {
    /// The child rollbacks' metadata, in instant order.
    pub(in crate::exec) fn rollbacks(&self) -> impl Iterator<Item = &RollbackMetadata> {
        self.per_instant.values().flatten()
    }
}

impl RestoreRun<'_> {
    /// Run a planned restore in a row (the metadata table's own restore): [`Self::schedule`],
    /// [`Self::undo`], [`Self::complete`]. Returns the restore instant.
    pub(in crate::exec) async fn execute(
        &self,
        new_instant: &str,
        children: Children,
    ) -> Result<String, Error> {
        let r = self.schedule(new_instant).await?;
        let undone = self.undo(&r, children).await?;
        self.complete(&r, &undone, false).await?;
        Ok(r)
    }

    /// The first phase: the restore's plan at `new_instant` (chosen, and for the data table
    /// recorded in the caller's journal, by the caller before anything changed), unless a
    /// pending restore is continued, then its inflight file. Returns the restore instant.
    pub(in crate::exec) async fn schedule(&self, new_instant: &str) -> Result<String, Error> {
        let (table, planned) = (self.table, self.planned);
        let storage = table.storage();
        let config = table.config();
        let r = match &planned.resumes {
            Some(r) => r.clone(),
            None => {
                let r = new_instant.to_string();
                let path = timeline_file(config, &r, None, Action::Restore, State::Requested)?;
                let bytes = planned
                    .plan
                    .to_avro()
                    .map_err(|e| avro_err(table, &r, &path, e))?;
                if !create_if_absent(storage, &path, bytes).await? {
                    return Err(refused(
                        table,
                        self.target,
                        format!(
                            "restore instant {r} already exists; nothing was changed, try again"
                        ),
                    ));
                }
                info!(table = %table.uri(), restore_instant = %r, instants = planned.undo.len(), "scheduled restore");
                r
            }
        };
        let inflight = timeline_file(config, &r, None, Action::Restore, State::Inflight)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
        Ok(r)
    }

    /// The second phase, of restore `r`: one child rollback per instant, in plan order (those
    /// an earlier attempt undid are skipped).
    pub(in crate::exec) async fn undo(&self, r: &str, children: Children) -> Result<Undone, Error> {
        let (table, target) = (self.table, self.target);
        let Children {
            pending: pending_rb,
            mut inputs,
            mut plans,
        } = children;
        let mut undone = Undone::default();
        for u in &self.with_finished_children(&pending_rb) {
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
                self.options,
                self.progress,
            )
            .instrument(span)
            .await
            .map_err(|e| left_pending(e, target))?;
            let Some((rb, metadata, blocks)) = child else {
                continue;
            };
            undone.instants.push(UndoneInstant {
                instant: u.instant.clone(),
                action: u.action.as_str().to_string(),
                rollback_instant: rb,
                files_deleted: metadata.total_files_deleted as usize,
                log_blocks_written: blocks,
            });
            undone.infos.push(InstantInfo {
                commit_time: u.instant.clone(),
                action: u.action.as_str().to_string(),
            });
            undone.per_instant.insert(u.instant.clone(), vec![metadata]);
        }
        Ok(undone)
    }

    /// The instants to undo, in the plan's order: those still on the timeline, and those an
    /// earlier attempt removed entirely whose child rollback is pending (a restore completes its
    /// children only with itself). Those children are run again, every step of which finds its
    /// work done, so that the completed restore (and on table version 5 its record in the
    /// metadata table) still has their metadata.
    fn with_finished_children(&self, pending: &BTreeMap<String, PendingRollback>) -> Vec<Undo> {
        let planned = &self.planned.undo;
        let mut out: Vec<Undo> = Vec::with_capacity(planned.len());
        for i in &self.planned.plan.instants_to_rollback {
            let t = &i.commit_time;
            if out.iter().any(|u| &u.instant == t) {
                continue;
            }
            if let Some(u) = planned.iter().find(|u| &u.instant == t) {
                out.push(u.clone());
            } else if let (Some(p), Ok(action)) = (pending.get(t), i.action.parse::<Action>()) {
                debug_assert_eq!(
                    p.plan.instant_to_rollback.as_ref().map(|x| &x.commit_time),
                    Some(t)
                );
                out.push(Undo {
                    instant: t.clone(),
                    action,
                    state: State::Completed,
                });
            }
        }
        for u in planned {
            if !out.iter().any(|x| x.instant == u.instant) {
                out.push(u.clone());
            }
        }
        out
    }

    /// The last phase, of restore `r`: the completed restore (in layout 2 its completion time
    /// also sorts after the metadata table's timeline when `metadata_table_restored`), then
    /// every rollback after the restore point removed. Returns how many were removed.
    pub(in crate::exec) async fn complete(
        &self,
        r: &str,
        undone: &Undone,
        metadata_table_restored: bool,
    ) -> Result<usize, Error> {
        let table = self.table;
        let config = table.config();
        let metadata = RestoreMetadata {
            start_restore_time: r.to_string(),
            time_taken_in_millis: self.started.elapsed().as_millis() as i64,
            instants_to_rollback: undone.infos.iter().map(|i| i.commit_time.clone()).collect(),
            hoodie_restore_metadata: undone.per_instant.clone(),
            version: Some(1),
            restore_instant_info: undone.infos.clone(),
        };
        let completion = match config.timeline_layout {
            crate::table::TimelineLayout::V1 => None,
            crate::table::TimelineLayout::V2 => {
                Some(completion_time(table, metadata_table_restored).await?)
            }
        };
        let path = timeline_file(
            config,
            r,
            completion.as_deref(),
            Action::Restore,
            State::Completed,
        )?;
        let bytes = metadata
            .to_avro_in(config.version.metadata_schema())
            .map_err(|e| avro_err(table, r, &path, e))?;
        create_if_absent(table.storage(), &path, bytes).await?;
        info!(table = %table.uri(), restore_instant = %r, undone = undone.instants.len(), "restore completed");
        remove_rollbacks(table, self.target).await
    }
}

/// A completion time after every time of `table`'s timeline (and of its metadata table's,
/// when `with_metadata_table`).
async fn completion_time(table: &Table, with_metadata_table: bool) -> Result<String, Error> {
    let now = table.timeline().await?;
    let mut timelines = vec![&now];
    let inner;
    if with_metadata_table {
        if let Some(m) = table.metadata_table().await? {
            inner = m.timeline().await?;
            timelines.push(&inner);
        }
    }
    Ok(new_instant_time(&timelines, table.zone()))
}
