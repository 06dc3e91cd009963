//! The metadata table of a table-version-6 table (Hudi 0.14/0.15) in a data-table rollback of
//! instant T at rollback instant R, as Hudi 0.15's `HoodieBackedTableMetadataWriter.update(
//! HoodieRollbackMetadata, R)` does it (`../shared/v6-metadata-table.md`, checked against Hudi
//! 0.15's own rollbacks in the interop harness):
//!
//! 1. a metadata-table deltacommit at R (requested, inflight, completed): for a merge-on-read
//!    rollback that appended log files, one HFile data block of files-partition records (each
//!    data partition's rollback log files and the failed commit's log files) appended to the
//!    `files` file slice as a new log version; for a copy-on-write rollback, no block, and the
//!    deltacommit is completed with no write stats;
//! 2. when the metadata table holds a completed deltacommit T, its own rollback at `R006`:
//!    listing-based, a rollback command block for each log file T appended (a new log version),
//!    T's files deleted, T's timeline files removed, `R006.rollback` completed.
//!
//! Before both, when the writer died inside its metadata-table write, its pending
//! metadata-table deltacommit T is rolled back first at a fresh instant (Hudi's EAGER pre-step).
//!
//! Every step is resumable: a completed deltacommit R is skipped, a block an earlier attempt
//! wrote is found through its APPEND marker and reused, a pending `R006` rollback is resumed
//! with its own plan.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use tracing::{info, info_span, Instrument};

use super::execute::{
    execute_mdt, revert_to_inflight, schedule_and_execute_mdt, MetadataTableOutcome,
};
use super::files_log::{complete_files_deltacommit, files_slice, FILES};
use crate::exec::steps::{
    avro_err, delete_folder, list_data_files, pending_rollbacks, refused, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, timeline_file};
use crate::format::commit::json_write_stats;
use crate::format::metadata_record::files_record;
use crate::format::rollback::RollbackPlan;
use crate::plan::metadata_table::{plan_completed_deltacommit_rollback, ROLLBACK_SUFFIX};
use crate::protocol::markers::marker_dir;
use crate::storage::RelPath;
use crate::table::files::BasePath;
use crate::table::Table;
use crate::timeline::{Action, Instant, State, Timeline};
use crate::Error;

/// Suffixed metadata-table instants of the indexer, which Hudi's EAGER pre-step leaves alone.
const INDEXER_SUFFIX: &str = "004";

/// The metadata table's own rollback instant for data-table rollback `r`.
pub(in crate::exec) fn mdt_rollback_instant(r: &str) -> String {
    format!("{r}{ROLLBACK_SUFFIX}")
}

/// Why the metadata table cannot take the rollback of `t` (at `r`, when it is known) now, read
/// before anything changes (and again under the lock right before the metadata table changes):
/// - a metadata-table write of another instant is pending (Hudi 0.15 rolls every pending
///   metadata-table deltacommit back first under its EAGER policy; hudi-keeper does that only
///   for `t`'s own, whose writer is known dead: another one may be a live writer's);
/// - a metadata-table compaction completed after its completed deltacommit of `t` (undoing it
///   needs a restore);
/// - the `files` partition has no single file slice to append to.
pub(in crate::exec) async fn refusal(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    r: Option<&str>,
) -> Result<Option<String>, Error> {
    let own_rollback = r.map(mdt_rollback_instant);
    let (pending_rbs, _) = pending_rollbacks(mdt, timeline).await?;
    let resuming_own = pending_rbs.contains_key(t);
    for i in timeline.pending() {
        let x = i.requested_time.as_str();
        if Some(x) == r && i.action == Action::DeltaCommit {
            continue; // ours, from an earlier attempt
        }
        if x == t && i.action == Action::DeltaCommit {
            // The failed write's own: reverted to inflight by its pending rollback, or left
            // pending by a writer that died inside its metadata-table write (rolled back
            // first, as Hudi's EAGER pre-step does).
            continue;
        }
        let resumed = pending_rbs.get(t).is_some_and(|p| p.instant == x);
        if i.action == Action::Rollback && (Some(x) == own_rollback.as_deref() || resumed) {
            continue; // the metadata table's own rollback of t
        }
        if x.len() > 17 && x.ends_with(INDEXER_SUFFIX) {
            continue;
        }
        let what = match i.action {
            Action::Commit | Action::Compaction => "compaction",
            Action::DeltaCommit => "deltacommit",
            other => other.as_str(),
        };
        return Ok(Some(format!(
            "the metadata table has a pending {what} {x} (a writer stopped during its metadata-table write, or a table service is running). Hudi 0.15 rolls pending metadata-table deltacommits back before it records a rollback there; hudi-keeper leaves that to Hudi: the next Hudi write to this table does it, after which hudi-keeper can roll this instant back"
        )));
    }
    if let Some(reason) = compacted_after_v6(timeline, t) {
        return Ok(Some(reason));
    }
    if let Err(why) = files_slice(mdt).await? {
        return Ok(Some(why));
    }
    if !resuming_own {
        // The plan of its rollback of t must be possible before anything changes.
        if let Some(Err(why)) = deltacommit_rollback_plan(mdt, timeline, t).await? {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

/// The plan of the metadata table's rollback of its completed deltacommit `t` (`None` when it
/// has none), or why it cannot be made: its write stats unreadable, a file not of `t`.
async fn deltacommit_rollback_plan(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
) -> Result<Option<Result<(Instant, RollbackPlan), String>>, Error> {
    let Some(instant) = timeline
        .find(t)
        .find(|i| i.action == Action::DeltaCommit && !i.is_pending())
    else {
        return Ok(None);
    };
    let Some(done) = instant.file(State::Completed) else {
        return Ok(None);
    };
    let bytes = mdt.storage().get(&done.path).await?;
    let stats = match json_write_stats(&bytes) {
        Ok(s) => s,
        Err(why) => {
            return Ok(Some(Err(format!(
                "the metadata table's deltacommit `{}` is unreadable ({why}), so the blocks it appended cannot be found",
                done.path
            ))))
        }
    };
    let named = list_data_files(mdt.storage(), &Wanted::of([t.to_string()], [])).await?;
    let named: Vec<RelPath> = named.into_iter().map(|f| f.path).collect();
    let base = BasePath::from_uri(mdt.uri());
    Ok(Some(
        plan_completed_deltacommit_rollback(t, &stats, &named, &base)
            .map(|plan| (instant.clone(), plan))
            .map_err(|e| e.to_string()),
    ))
}

/// Whether a metadata-table compaction (`<instant>001` in 0.x) completed after the metadata
/// table's completed deltacommit of `t`: its records may be in the compacted base file, which
/// no rollback block reaches. (Hudi 0.15's own check compares equal-length times only, and a
/// suffixed compaction time never has the length of a data-table instant; hudi-keeper compares
/// the compaction's data-table part.)
fn compacted_after_v6(timeline: &Timeline, t: &str) -> Option<String> {
    let completed = timeline
        .find(t)
        .any(|i| i.action == Action::DeltaCommit && !i.is_pending());
    if !completed {
        return None;
    }
    let c = timeline
        .completed()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time.clone())
        .filter(|c| c.get(..t.len()).is_some_and(|p| p >= t))
        .max()?;
    Some(format!("the metadata table compacted at {c}, after this instant's deltacommit; undoing it needs a restore (`hudi-keeper restore --to-instant` to a commit before it)"))
}

/// The metadata table's part of rolling back `t` at `r` (see the module docs). `records` are
/// the files-partition records of the data table's rollback
/// ([`crate::plan::metadata_table::rollback_file_records`]).
pub(in crate::exec) async fn roll_back(
    table: &Table,
    mdt: &Table,
    t: &str,
    r: &str,
    records: &BTreeMap<String, BTreeMap<String, i64>>,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    let timeline = mdt.timeline().await?;
    if let Some(reason) = refusal(mdt, &timeline, t, Some(r)).await? {
        return Err(refused(table, t, reason));
    }
    let files_enabled = table
        .config()
        .metadata_partitions
        .iter()
        .any(|p| p == FILES);
    let none = BTreeMap::new();
    let records = if files_enabled { records } else { &none };
    let own = mdt_rollback_instant(r);
    let pre_step = roll_back_pending_deltacommit(table, mdt, t, &own, options).await?;
    mdt.stop_point(
        "after the metadata table's pending deltacommit was rolled back",
        None,
    )?;
    let timeline = mdt.timeline().await?;
    record_deltacommit(mdt, &timeline, t, r, records)
        .instrument(info_span!("metadata_table", deltacommit = %r))
        .await?;
    mdt.stop_point("after the metadata table's deltacommit", None)?;

    let outcome = match undo_deltacommit(table, mdt, t, &own, options).await? {
        MetadataTableOutcome::Recorded if pre_step => MetadataTableOutcome::RolledBack,
        o => o,
    };
    // The marker folders of the deltacommit at R, of R006, and of the failed write's own
    // metadata-table write (Hudi removes it with the pending deltacommit), also those a run
    // stopped after completing left behind.
    for instant in [r, own.as_str(), t] {
        delete_folder(mdt.storage(), &marker_dir(instant)?).await?;
    }
    Ok(outcome)
}

/// Hudi 0.15's EAGER pre-step for the failed write's own metadata-table deltacommit: when the
/// writer died inside its metadata-table write, that pending deltacommit is rolled back before
/// the rollback is recorded, at a fresh instant, listing-based (files named with `t` deleted;
/// blocks it appended to older slices stay, and are never read: `t` never completes on the
/// metadata table). A run stopped inside it resumes it. Whether it did anything.
async fn roll_back_pending_deltacommit(
    table: &Table,
    mdt: &Table,
    t: &str,
    own: &str,
    options: &RollbackOptions,
) -> Result<bool, Error> {
    let timeline = mdt.timeline().await?;
    let (pending, _) = pending_rollbacks(mdt, &timeline).await?;
    let started = Clock::now();
    if let Some(p) = pending.get(t).filter(|p| p.instant != own) {
        execute_mdt(mdt, t, &p.instant, &p.plan, p.state, options, started)
            .instrument(info_span!("metadata_table", rollback_instant = %p.instant))
            .await?;
        return Ok(true);
    }
    let instants: Vec<&Instant> = timeline.find(t).collect();
    let pending_only = !instants.is_empty()
        && instants
            .iter()
            .all(|i| i.is_pending() && i.action == Action::DeltaCommit);
    if !pending_only {
        return Ok(false);
    }
    let named = list_data_files(mdt.storage(), &Wanted::of([t.to_string()], [])).await?;
    let named: Vec<RelPath> = named.into_iter().map(|f| f.path).collect();
    let base = BasePath::from_uri(mdt.uri());
    let plan = plan_completed_deltacommit_rollback(t, &[], &named, &base)
        .map_err(|e| refused(mdt, t, e.to_string()))?;
    schedule_and_execute_mdt(table, mdt, &timeline, t, &plan, options, started).await?;
    Ok(true)
}

/// The metadata table's rollback of its completed deltacommit `t` at `own` (resumed when
/// pending; nothing when `t` never completed there).
async fn undo_deltacommit(
    table: &Table,
    mdt: &Table,
    t: &str,
    own: &str,
    options: &RollbackOptions,
) -> Result<MetadataTableOutcome, Error> {
    let timeline = mdt.timeline().await?;
    let (pending, _) = pending_rollbacks(mdt, &timeline).await?;
    let started = Clock::now();
    if let Some(p) = pending.get(t) {
        execute_mdt(mdt, t, &p.instant, &p.plan, p.state, options, started)
            .instrument(info_span!("metadata_table", rollback_instant = %p.instant))
            .await?;
        return Ok(MetadataTableOutcome::RolledBack);
    }
    if timeline
        .find(own)
        .any(|i| i.action == Action::Rollback && !i.is_pending())
    {
        return Ok(MetadataTableOutcome::RolledBack);
    }
    let (instant, plan) = match deltacommit_rollback_plan(mdt, &timeline, t).await? {
        None => return Ok(MetadataTableOutcome::Recorded),
        Some(Ok(p)) => p,
        Some(Err(why)) => return Err(refused(table, t, why)),
    };
    let path = timeline_file(mdt.config(), own, None, Action::Rollback, State::Requested)?;
    let plan_bytes = plan.to_avro().map_err(|e| avro_err(mdt, t, &path, e))?;
    mdt.stop_point("before the metadata table's rollback", None)?;
    create_if_absent(mdt.storage(), &path, plan_bytes).await?;
    revert_to_inflight(mdt, &instant).await?;
    execute_mdt(mdt, t, own, &plan, State::Requested, options, started)
        .instrument(info_span!("metadata_table", rollback_instant = %own))
        .await?;
    Ok(MetadataTableOutcome::RolledBack)
}

/// The metadata-table deltacommit at `r` that records the rollback (skipped when it is
/// completed already).
async fn record_deltacommit(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    r: &str,
    records: &BTreeMap<String, BTreeMap<String, i64>>,
) -> Result<(), Error> {
    if timeline
        .find(r)
        .any(|i| i.action == Action::DeltaCommit && !i.is_pending())
    {
        return Ok(());
    }
    let storage = mdt.storage();
    let config = mdt.config();
    for state in [State::Requested, State::Inflight] {
        let path = timeline_file(config, r, None, Action::DeltaCommit, state)?;
        create_if_absent(storage, &path, Vec::new()).await?;
    }
    let rows: BTreeMap<String, Vec<u8>> = records
        .iter()
        .map(|(key, files)| files_record(key, files))
        .collect();
    complete_files_deltacommit(mdt, timeline, t, r, &rows).await?;
    info!(
        records = records.len(),
        "rollback recorded in the metadata table"
    );
    Ok(())
}
