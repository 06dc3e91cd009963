//! The metadata table of a table-version-5 table (Hudi 0.12/0.13) in a data-table rollback of
//! instant T at rollback instant R, as Hudi 0.13.1 does it
//! (`tests/interop/observations/spark-0.13.md`, checked against its own rollbacks by the
//! `spark-0.13` interop harness):
//!
//! 1. when the writer died inside its metadata-table write (T pending there), the metadata
//!    table's write client rolls that deltacommit back first, under its EAGER policy, at a fresh
//!    instant R' after R: listing-based, a rollback command block appended to the `files` slice
//!    the write went to (its workload profile names it), T's timeline files removed;
//! 2. a metadata-table deltacommit at R (requested, inflight, completed) recording the
//!    rollback ([`crate::plan::metadata_table::v5::rollback_file_entries`]): the rollback's
//!    command-block log files, and the files it deleted marked deleted when T completed in the
//!    metadata table. Unlike Hudi 0.13, and as Hudi 0.14+ does, the failed write's log files a
//!    merge-on-read rollback keeps are added too (with their sizes on the store): 0.13 leaves
//!    them out, so the metadata table lacks files on disk that its cleaner then never reclaims. With no record (copy-on-write, T never there) the deltacommit has no block
//!    and no write stats. A completed metadata-table deltacommit T is *not* rolled back (Hudi
//!    0.14+ does that at `R006`): the deleted-file records cancel it.
//!
//! Blocks are HFile data blocks under Hudi 0.13's record schema
//! ([`crate::format::metadata_record::LOG_BLOCK_SCHEMA_V5`]). Every step is resumable: a
//! pending R' is resumed with its own plan, a completed deltacommit R is skipped, a block an
//! earlier attempt wrote is found through its marker and reused.
//!
//! A restore (table version 5) records itself the same way: its child rollbacks write nothing
//! to the metadata table, then one deltacommit at the restore instant records them all
//! ([`record_restore`]; `tests/interop/observations/spark-0.13-restore.md`).
//!
//! Refused before anything changes: metadata-table partitions other than `files` (not checked
//! against Hudi 0.13), another pending metadata-table instant (it may be a live writer's),
//! T older than the metadata table's timeline (Hudi 0.13 fails such a rollback), no `files`
//! slice to record in, an unreadable workload profile of a pending T.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use tracing::{info, info_span, Instrument};

use super::execute::{execute_mdt, schedule_and_execute_mdt, MetadataTableOutcome};
use super::files_log::{complete_files_deltacommit, files_slice, FILES};
use crate::exec::steps::{
    delete_folder, list_data_files, pending_rollbacks, refused, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, timeline_file};
use crate::format::commit::json_workload_stats;
use crate::format::metadata_record::{file_list_record_in, FILES_RECORD_TYPE};
use crate::format::rollback::{RollbackMetadata, RollbackPlan};
use crate::plan::metadata_table::v5::{plan_pending_deltacommit_rollback, FilesChanges};
use crate::protocol::markers::marker_dir;
use crate::storage::RelPath;
use crate::table::files::BasePath;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// Why the metadata table of a version-5 table cannot take the rollback of `t` (at `r`, when it
/// is known) now; read before anything changes, and again under the lock right before the
/// metadata table changes. See the module docs.
pub(in crate::exec) async fn refusal(
    table: &Table,
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    r: Option<&str>,
) -> Result<Option<String>, Error> {
    if let Some(why) = other_partitions(table) {
        return Ok(Some(why));
    }
    let (pending_rbs, _) = pending_rollbacks(mdt, timeline).await?;
    for i in timeline.pending() {
        let x = i.requested_time.as_str();
        if i.action == Action::DeltaCommit && (Some(x) == r || x == t) {
            // ours from an earlier attempt, or the failed write's own (rolled back first)
            continue;
        }
        if i.action == Action::Rollback && pending_rbs.get(t).is_some_and(|p| p.instant == x) {
            continue; // the metadata table's own rollback of t, resumed
        }
        let what = match i.action {
            Action::Commit | Action::Compaction => "compaction",
            Action::DeltaCommit => "deltacommit",
            other => other.as_str(),
        };
        return Ok(Some(format!(
            "the metadata table has a pending {what} {x} (a writer stopped during its metadata-table write, or a table service is running). Hudi 0.13 rolls pending metadata-table deltacommits back before it records a rollback there; hudi-keeper leaves that to Hudi: the next Hudi write to this table does it, after which hudi-keeper can roll this instant back"
        )));
    }
    if let Some(first) = first_commit(timeline).filter(|f| t < *f) {
        return Ok(Some(format!(
            "the metadata table's timeline starts at {first}, after this instant: its records of the instant were archived, and Hudi 0.13 fails such a rollback; roll it back with Hudi after rebuilding the metadata table"
        )));
    }
    if let Err(why) = files_slice(mdt).await? {
        return Ok(Some(why));
    }
    if !pending_rbs.contains_key(t) && pending_only(timeline, t) {
        if let Err(why) = pending_plan(mdt, timeline, t).await? {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

/// Whether Hudi 0.13 records the files a rollback of `t` deleted as deleted in the metadata
/// table: when its active timeline holds `t` as a completed deltacommit
/// (`HoodieTableMetadataUtil.processRollbackMetadata`, `containsInstant`). Its writer's
/// `wasSynced` (that, or a metadata-table compaction at or after `t`) can only drop them again,
/// never add them.
pub(super) fn synced(timeline: &Timeline, t: &str) -> bool {
    timeline
        .find(t)
        .any(|i| i.action == Action::DeltaCommit && !i.is_pending())
}

/// Whether the metadata table has `t` only as a pending deltacommit.
fn pending_only(timeline: &Timeline, t: &str) -> bool {
    let mut found = timeline.find(t).peekable();
    found.peek().is_some() && found.all(|i| i.is_pending() && i.action == Action::DeltaCommit)
}

/// The plan of the metadata table's rollback of its pending deltacommit `t` (Hudi 0.13's
/// listing-based plan), or why it cannot be made.
async fn pending_plan(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
) -> Result<Result<RollbackPlan, String>, Error> {
    let inflight = timeline
        .find(t)
        .filter(|i| i.action == Action::DeltaCommit)
        .find_map(|i| i.file(State::Inflight));
    let stats = match inflight {
        None => Vec::new(),
        Some(f) => match json_workload_stats(&mdt.storage().get(&f.path).await?) {
            Ok(s) => s,
            Err(why) => {
                return Ok(Err(format!(
                    "the metadata table's pending deltacommit `{}` is unreadable ({why}), so the block its writer appended cannot be found",
                    f.path
                )))
            }
        },
    };
    let slice = match files_slice(mdt).await? {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let named = list_data_files(mdt.storage(), &Wanted::of([t.to_string()], [])).await?;
    let named: Vec<RelPath> = named.into_iter().map(|f| f.path).collect();
    let latest = BTreeMap::from([((FILES.to_string(), slice.file_id), slice.base_instant)]);
    let base = BasePath::from_uri(mdt.uri());
    Ok(
        plan_pending_deltacommit_rollback(t, &[FILES.to_string()], &stats, &named, &latest, &base)
            .map_err(|e| e.to_string()),
    )
}

/// The metadata table's part of rolling back `t` at `r` on table version 5 (see the module
/// docs), with the data table's rollback `metadata` (the same that is completed after it).
pub(in crate::exec) async fn roll_back(
    table: &Table,
    mdt: &Table,
    t: &str,
    r: &str,
    metadata: &RollbackMetadata,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    let timeline = mdt.timeline().await?;
    if let Some(reason) = refusal(table, mdt, &timeline, t, Some(r)).await? {
        return Err(refused(table, t, reason));
    }
    let pre_step = roll_back_pending_deltacommit(table, mdt, t, options).await?;
    mdt.stop_point(
        "after the metadata table's pending deltacommit was rolled back",
        None,
    )?;
    let timeline = mdt.timeline().await?;
    let mut changes = FilesChanges::default();
    changes.add_rollback(metadata, synced(&timeline, t));
    add_failed_logs(table, metadata, &mut changes).await?;
    record(mdt, &timeline, t, r, &changes)
        .instrument(info_span!("metadata_table", deltacommit = %r))
        .await?;
    mdt.stop_point("after the metadata table's deltacommit", None)?;
    // The marker folders of the deltacommit at R and of the failed write's own metadata-table
    // write (Hudi removes it with the pending deltacommit), also those a run stopped after
    // completing left behind.
    for instant in [r, t] {
        delete_folder(mdt.storage(), &marker_dir(instant)?).await?;
    }
    Ok(if pre_step {
        MetadataTableOutcome::RolledBack
    } else {
        MetadataTableOutcome::Recorded
    })
}

/// The failed write's log files a merge-on-read rollback kept for its command blocks (named by
/// the plan's APPEND requests, which Hudi 0.13 sizes -1), with their sizes on the store, added
/// to `changes` (Hudi 0.14+'s rule, [`FilesChanges::add_failed_log`]). A file that is not there
/// is not added; a read error fails the rollback before the metadata table changes.
async fn add_failed_logs(
    table: &Table,
    metadata: &RollbackMetadata,
    changes: &mut FilesChanges,
) -> Result<(), Error> {
    let base = BasePath::from_uri(table.uri());
    for pm in metadata.partition_metadata.values() {
        if pm.rollback_log_files.as_ref().is_none_or(|m| m.is_empty()) {
            continue;
        }
        for path in pm
            .log_files_from_failed_commit
            .iter()
            .flatten()
            .map(|(p, _)| p)
        {
            let Ok(rel) = base.resolve(path) else {
                continue;
            };
            if let Some(meta) = table.storage().head(&rel).await? {
                let size = i64::try_from(meta.size).unwrap_or(i64::MAX);
                changes.add_failed_log(&pm.partition_path, rel.file_name(), size);
            }
        }
    }
    Ok(())
}

/// The metadata-table deltacommit `s` (a rollback's or a restore's instant) recording
/// `changes`, written for `t` (errors name it); skipped when it completed already.
async fn record(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    s: &str,
    changes: &FilesChanges,
) -> Result<(), Error> {
    if timeline
        .find(s)
        .any(|i| i.action == Action::DeltaCommit && !i.is_pending())
    {
        return Ok(());
    }
    let schema = mdt.config().version.metadata_schema();
    let rows: BTreeMap<String, Vec<u8>> = changes
        .entries()
        .iter()
        .map(|(key, files)| {
            let entries = files.iter().map(|(n, size, d)| (n.as_str(), *size, *d));
            file_list_record_in(schema, key, FILES_RECORD_TYPE, entries)
        })
        .collect();
    for state in [State::Requested, State::Inflight] {
        let path = timeline_file(mdt.config(), s, None, Action::DeltaCommit, state)?;
        create_if_absent(mdt.storage(), &path, Vec::new()).await?;
    }
    complete_files_deltacommit(mdt, timeline, t, s, &rows).await?;
    info!(records = rows.len(), "recorded in the metadata table");
    Ok(())
}

/// Why a version-5 restore to `target` cannot be recorded in the metadata table `mdt` as Hudi
/// 0.13 records it (read before anything changes; `resumes` is the pending restore continued):
/// partitions besides `files`, a pending metadata-table instant other than the restore's own
/// deltacommit, a restore point older than the metadata table's timeline (Hudi 0.13's
/// `restoreToSavepoint` deletes the metadata table then), no `files` slice to record in.
pub(in crate::exec) async fn restore_refusal(
    table: &Table,
    mdt: &Table,
    target: &str,
    resumes: Option<&str>,
) -> Result<Option<String>, Error> {
    if let Some(why) = other_partitions(table) {
        return Ok(Some(why));
    }
    let timeline = mdt.timeline().await?;
    if let Some(i) = timeline
        .pending()
        .find(|i| !(i.action == Action::DeltaCommit && Some(i.requested_time.as_str()) == resumes))
    {
        return Ok(Some(format!(
            "the metadata table has a pending {} {} (a writer stopped during its metadata-table write, or a table service is running); Hudi 0.13's restore would roll it back first; hudi-keeper leaves that to Hudi: the next Hudi write does it, after which hudi-keeper can restore",
            i.action.as_str(),
            i.requested_time
        )));
    }
    if let Some(first) = first_commit(&timeline).filter(|f| target < *f) {
        return Ok(Some(format!(
            "the restore point {target} is older than the metadata table's timeline (it starts at {first}): Hudi 0.13's restoreToSavepoint deletes the metadata table then, which hudi-keeper does not do on version 5; restore with Hudi 0.13"
        )));
    }
    if let Err(why) = files_slice(mdt).await? {
        return Ok(Some(why));
    }
    Ok(None)
}

/// Record restore `s` to `target` in the metadata table, as Hudi 0.13's restore does after its
/// child rollbacks (`children`, which write nothing there themselves): one deltacommit at `s`
/// with every child's records, each child's deleted files only when the metadata table holds a
/// completed deltacommit of the instant it undid. Skipped when it completed already.
pub(in crate::exec) async fn record_restore<'a>(
    mdt: &Table,
    target: &str,
    s: &str,
    children: impl IntoIterator<Item = &'a RollbackMetadata>,
) -> Result<(), Error> {
    let timeline = mdt.timeline().await?;
    let mut changes = FilesChanges::default();
    for child in children {
        let undid = child.commits_rollback.first().map(String::as_str);
        changes.add_rollback(child, undid.is_some_and(|t| synced(&timeline, t)));
    }
    record(mdt, &timeline, target, s, &changes)
        .instrument(info_span!("metadata_table", deltacommit = %s))
        .await?;
    delete_folder(mdt.storage(), &marker_dir(s)?).await
}

/// The first commit or deltacommit on the metadata table's active timeline.
fn first_commit(timeline: &Timeline) -> Option<&str> {
    timeline
        .instants()
        .iter()
        .filter(|i| matches!(i.action, Action::DeltaCommit | Action::Commit))
        .map(|i| i.requested_time.as_str())
        .min()
}

/// Why metadata-table partitions besides `files` are refused on version 5.
fn other_partitions(table: &Table) -> Option<String> {
    let others: Vec<&str> = table
        .config()
        .metadata_partitions
        .iter()
        .map(String::as_str)
        .filter(|p| *p != FILES)
        .collect();
    (!others.is_empty()).then(|| format!(
        "this table version 5 (Hudi 0.12/0.13) table's metadata table has partitions besides `files` ({}); what Hudi 0.13 records there has not been checked, so hudi-keeper leaves it to Hudi 0.13",
        others.join(", ")
    ))
}

/// Step 1 of the module docs: the metadata table's rollback of its pending deltacommit `t` at a
/// fresh instant after every instant of both timelines (so after R), resumed when a run
/// stopped inside it. Whether it did anything.
async fn roll_back_pending_deltacommit(
    table: &Table,
    mdt: &Table,
    t: &str,
    options: &RollbackOptions,
) -> Result<bool, Error> {
    let timeline = mdt.timeline().await?;
    let (pending, _) = pending_rollbacks(mdt, &timeline).await?;
    let started = Clock::now();
    if let Some(p) = pending.get(t) {
        execute_mdt(mdt, t, &p.instant, &p.plan, p.state, options, started)
            .instrument(info_span!("metadata_table", rollback_instant = %p.instant))
            .await?;
        return Ok(true);
    }
    if !pending_only(&timeline, t) {
        return Ok(false);
    }
    let plan = pending_plan(mdt, &timeline, t)
        .await?
        .map_err(|why| refused(table, t, why))?;
    schedule_and_execute_mdt(table, mdt, &timeline, t, &plan, options, started).await?;
    Ok(true)
}
