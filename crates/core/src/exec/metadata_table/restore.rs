//! What a restore does to the metadata table: restore it to the same point as Hudi does (1.x;
//! table version 6 as Hudi 0.15, with [`super::v6_restore`]), or delete it (its partitions
//! cleared in `hoodie.properties`) for the next writer to rebuild.

use std::time::Instant as Clock;

use serde::Serialize;
use tracing::{info, warn};

use super::sync::{start_sync_deltacommit, SyncDeltacommit};
use crate::exec::restore_steps::{
    pending_restores, prepare_children, refusal, remove_rollbacks, RestoreRun,
};
use crate::exec::steps::{avro_err, delete_folder, refused, RollbackOptions};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::restore::RestorePlan;
use crate::plan::restore::{plan_restore, PlannedRestore, RestoreInput, RestoreRefusal};
use crate::protocol::detect::{Assessment, Verdict};
use crate::storage::{RelPath, StorageError, SMALL_FILE_MAX_READ};
use crate::table::{Table, TableVersion, METADATA_TABLE_PATH};
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// What a restore does to the metadata table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataTableAction {
    /// The table has no metadata table in use.
    NotInUse,
    /// It is restored to the same point, as Hudi restores it: its own restore, then (1.x) the
    /// partitions Hudi drops on restore dropped and an empty deltacommit, or (table version 6,
    /// as Hudi 0.15) a deltacommit bringing its file lists in line with storage.
    Restored,
    /// It is deleted (and its partitions cleared in `hoodie.properties`); the next Hudi writer
    /// with the metadata table enabled rebuilds it from storage.
    Deleted,
    /// Table version 5, as Hudi 0.13: the restore is recorded in it (one deltacommit at the
    /// restore instant with the files-partition records of every child rollback).
    Recorded,
}

/// A metadata table is in use, or left behind (a restore interrupted while deleting it, a
/// writer that disabled it): either way the restore deletes it.
pub(crate) async fn metadata_table_action(table: &Table) -> Result<MetadataTableAction, Error> {
    let storage = table.storage();
    let backup = RelPath::parse(PROPERTIES_BACKUP).map_err(StorageError::from)?;
    let found =
        table.config().metadata_table_enabled() || storage.head(&backup).await?.is_some() || {
            let top = storage
                .list_dir(&RelPath::parse(METADATA_TABLE_PATH).map_err(StorageError::from)?)
                .await?;
            !top.files.is_empty() || !top.dirs.is_empty()
        };
    Ok(if found {
        MetadataTableAction::Deleted
    } else {
        MetadataTableAction::NotInUse
    })
}

pub(in crate::exec) const PROPERTIES_BACKUP: &str = ".hoodie/hoodie.properties.backup";

/// How a restore handles the metadata table, decided before anything changes.
#[derive(Debug, Clone)]
pub(in crate::exec) struct MetadataTablePlan {
    pub(in crate::exec) action: MetadataTableAction,
    /// Why it is deleted rather than restored.
    pub(in crate::exec) why: Option<String>,
    /// Metadata-table partitions kept (the others are dropped, as Hudi drops them on restore).
    keep: &'static [&'static str],
}

impl MetadataTablePlan {
    pub(in crate::exec) fn not_in_use() -> Self {
        Self {
            action: MetadataTableAction::NotInUse,
            why: None,
            keep: &[],
        }
    }

    fn delete(why: impl Into<String>) -> Self {
        Self {
            action: MetadataTableAction::Deleted,
            why: Some(why.into()),
            keep: &[],
        }
    }
}

/// The metadata-table partitions Hudi keeps through a restore: 1.1 (table version 9) drops every
/// partition but `files`, `column_stats` and `record_index`; 1.0 (version 8) keeps only `files`
/// and `record_index`.
fn kept_partitions(version: TableVersion) -> &'static [&'static str] {
    match version {
        TableVersion::V8 => &["files", "record_index"],
        _ => &["files", "column_stats", "record_index"],
    }
}

/// Hudi's choice (restoreToSavepoint): restore the metadata table along with the data table,
/// unless the restore point is at or before its oldest compaction or before its timeline starts,
/// in which case it is deleted and rebuilt by the next writer. hudi-keeper also deletes it when
/// it cannot restore it as Hudi would (its timeline refuses a restore, the schema its sync
/// deltacommit records cannot be read, or on table version 6 what
/// [`super::v6_restore::refusal`] names). `restore` is the data table's pending restore being
/// continued (`None` for a new one): only its own metadata-table restore
/// ([`own_metadata_restore`]) skips the checks.
pub(in crate::exec) async fn metadata_table_plan(
    table: &Table,
    target: &str,
    restore: Option<&str>,
) -> Result<MetadataTablePlan, Error> {
    let config = table.config();
    let action = metadata_table_action(table).await?;
    if action == MetadataTableAction::NotInUse {
        return Ok(MetadataTablePlan::not_in_use());
    }
    if config.version == TableVersion::V5 {
        // A metadata table in use is recorded in as Hudi 0.13 records a restore. What one left
        // behind (a folder without its hoodie.properties, a hoodie.properties backup, a metadata
        // table hoodie.properties does not list) is not deleted or restored: what Hudi 0.13
        // does with it has not been checked.
        if config.metadata_table_enabled() {
            if let Some(mdt) = table.metadata_table().await? {
                if let Some(why) = super::v5::restore_refusal(table, &mdt, target, restore).await? {
                    return Err(refused(table, target, why));
                }
                return Ok(MetadataTablePlan {
                    action: MetadataTableAction::Recorded,
                    why: None,
                    keep: &[],
                });
            }
        }
        return Err(refused(
            table,
            target,
            "this table version 5 (Hudi 0.12/0.13) table has what a metadata table left behind (.hoodie/metadata/ without its hoodie.properties, a metadata table hoodie.properties lists no partition of, or .hoodie/hoodie.properties.backup); hudi-keeper does not restore such a table, since what Hudi 0.13 does with them has not been checked: restore it with Hudi 0.13, or remove them first",
        ));
    }
    if !config.metadata_table_enabled() {
        return Ok(MetadataTablePlan::delete(
            "the table config lists no metadata partition",
        ));
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(MetadataTablePlan::delete(
            "left-overs of a metadata table without its properties",
        ));
    };

    let tl = mdt.timeline().await?;
    let already = own_metadata_restore(&mdt, &tl, target, restore)
        .await?
        .is_some();
    let keep = kept_partitions(config.version);
    let restored = MetadataTablePlan {
        action: MetadataTableAction::Restored,
        why: None,
        keep,
    };
    if already {
        // An earlier attempt of this restore got there: finish it.
        return Ok(restored);
    }
    let compactions = tl
        .completed()
        .filter(|i| i.action == Action::Commit)
        .map(|i| i.requested_time.as_str())
        .min();
    if let Some(c) = compactions {
        if target <= c {
            return Ok(MetadataTablePlan::delete(format!(
                "the restore point is at or before the metadata table's oldest compaction {c}"
            )));
        }
    }
    let first = tl.commits().map(|i| i.requested_time.as_str()).next();
    if first.is_none_or(|f| target < f) {
        return Ok(MetadataTablePlan::delete(
            "the restore point is before the metadata table's timeline starts",
        ));
    }
    if let Err(why) = plan_metadata_restore(&mdt, &tl, target).await {
        return Ok(MetadataTablePlan::delete(format!(
            "its timeline cannot be restored as Hudi would: {why}"
        )));
    }
    if config.version.is_0x() {
        // Hudi 0.15's own conditions, and what hudi-keeper needs to do it as Hudi does.
        if let Some(why) = super::v6_restore::refusal(table, &mdt, &tl, target).await? {
            return Ok(MetadataTablePlan::delete(why));
        }
        return Ok(restored);
    }
    if sync_schema(&mdt, &tl).await?.is_none() {
        return Ok(MetadataTablePlan::delete(
            "no completed metadata-table deltacommit records its schema",
        ));
    }
    Ok(restored)
}

/// Make the child plans of the metadata table's own restore (unless an earlier attempt of the
/// data table's restore `restore` completed it), so that one that cannot be made refuses the
/// restore before it changes anything. Reads only; they are made again when the metadata table
/// is restored.
pub(in crate::exec) async fn check_metadata_children(
    table: &Table,
    target: &str,
    restore: Option<&str>,
) -> Result<(), Error> {
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(());
    };
    let tl = mdt.timeline().await?;
    if let Some((_, true)) = own_metadata_restore(&mdt, &tl, target, restore).await? {
        return Ok(());
    }
    let planned = plan_metadata_restore(&mdt, &tl, target)
        .await
        .map_err(|r| refusal(&mdt, target, r))?;
    prepare_children(&mdt, &tl, &planned.undo).await?;
    Ok(())
}

/// The metadata-table restore of the data table's restore `restore` to `target`, when an
/// earlier attempt of it got that far: a metadata-table restore scheduled after `restore` (it
/// always is: its time is new against both timelines) whose plan restores to `target`. The
/// metadata-table restore of an earlier restore of the data table (to another point, or to the
/// same point before later writes) is not it, and neither is one whose plan cannot be read.
/// `None` when the data table's restore is new. Returns its instant and whether it completed.
async fn own_metadata_restore(
    mdt: &Table,
    timeline: &Timeline,
    target: &str,
    restore: Option<&str>,
) -> Result<Option<(String, bool)>, Error> {
    let Some(r) = restore else {
        return Ok(None);
    };
    let candidates: Vec<_> = timeline
        .after(r)
        .filter(|i| i.action == Action::Restore)
        .collect();
    for i in candidates.into_iter().rev() {
        let Some(f) = i.file(State::Requested) else {
            continue;
        };
        let bytes = mdt.storage().get(&f.path).await?;
        match RestorePlan::from_avro(&bytes) {
            Ok(plan) if plan.savepoint_to_restore_timestamp.as_deref() == Some(target) => {
                return Ok(Some((i.requested_time.clone(), !i.is_pending())));
            }
            Ok(_) => {}
            Err(e) => {
                warn!(restore = %i.requested_time, error = %e, "unreadable metadata-table restore plan");
            }
        }
    }
    Ok(None)
}

/// The metadata table's own restore plan: every instant after the point is undone (its writer
/// is the data table's, whose lock is held), in Hudi's order.
async fn plan_metadata_restore(
    mdt: &Table,
    timeline: &Timeline,
    target: &str,
) -> Result<PlannedRestore, RestoreRefusal> {
    let assessments: Vec<Assessment> = timeline
        .pending()
        .filter(|i| i.action.is_write())
        .map(|i| Assessment {
            requested_time: i.requested_time.clone(),
            action: i.action,
            state: i.state,
            heartbeat_age_ms: None,
            instant_age_ms: None,
            verdict: Verdict::Expired,
            reason: "a metadata-table instant after the restore point".into(),
        })
        .collect();
    let pending = pending_restores(mdt, timeline)
        .await
        .map_err(|e| RestoreRefusal(e.to_string()))?;
    plan_restore(&RestoreInput {
        timeline,
        layout: mdt.config().timeline_layout,
        target,
        require_savepoint: false,
        assessments: &assessments,
        pending_restores: &pending,
        earliest_retained: None,
    })
}

/// The schema the metadata table's deltacommits record (`extraMetadata.schema` of its latest
/// completed deltacommit), for the empty deltacommit that closes its restore.
async fn sync_schema(mdt: &Table, timeline: &Timeline) -> Result<Option<String>, Error> {
    let Some(latest) = timeline
        .completed()
        .filter(|i| i.action == Action::DeltaCommit)
        .filter_map(|i| i.file(State::Completed))
        .max_by(|a, b| a.name.requested_time.cmp(&b.name.requested_time))
    else {
        return Ok(None);
    };
    let bytes = mdt.storage().get(&latest.path).await?;
    Ok(crate::format::commit::schema_of(&bytes))
}

/// Restore the metadata table to `target` as Hudi 1.x does, after the data table's instants
/// are undone: drop the partitions Hudi drops, run the metadata table's own restore (plan,
/// children, completed restore, rollbacks after the point removed), then an empty deltacommit.
/// Each step is skipped when an earlier attempt of the data table's restore `r` finished it.
pub(in crate::exec) async fn restore_metadata_table(
    table: &Table,
    target: &str,
    r: &str,
    plan: &MetadataTablePlan,
    options: &RollbackOptions,
) -> Result<(), Error> {
    let Some(mdt) = table.metadata_table().await? else {
        return Err(refused(
            table,
            target,
            "the metadata table disappeared during the restore; run the restore again",
        ));
    };
    let tl = mdt.timeline().await?;
    let done = own_metadata_restore(&mdt, &tl, target, Some(r))
        .await?
        .filter(|(_, completed)| *completed)
        .map(|(m, _)| m);
    let m = match done {
        Some(m) => {
            remove_rollbacks(&mdt, target).await?;
            m
        }
        None => {
            if !table.config().version.is_0x() {
                // (Hudi 0.15 drops no metadata-table partition on restore.)
                drop_metadata_partitions(table, plan.keep).await?;
            }
            let planned = plan_metadata_restore(&mdt, &tl, target)
                .await
                .map_err(|r| refusal(&mdt, target, r))?;
            let parent = table.timeline().await?;
            let children = prepare_children(&mdt, &tl, &planned.undo).await?;
            // (Boxed: the metadata table's restore is the same procedure, one level down.)
            // After every time of the metadata table and of the data table (whose restore is
            // pending, its instant recorded by the caller's journal: none is kept for this one).
            let new_instant = new_instant_time(&[&tl, &parent], mdt.zone());
            let run = RestoreRun {
                table: &mdt,
                target,
                planned: &planned,
                options,
                progress: None,
                started: Clock::now(),
            };
            Box::pin(run.execute(&new_instant, children)).await?
        }
    };
    if table.config().version.is_0x() {
        return super::v6_restore::sync(table, &mdt, &m).await;
    }
    sync_deltacommit(table, &mdt, &m).await
}

/// The empty deltacommit Hudi writes into the metadata table after its restore (a new instant
/// after the metadata table's restore `m`), reusing an earlier attempt's.
async fn sync_deltacommit(table: &Table, mdt: &Table, m: &str) -> Result<(), Error> {
    let tl = mdt.timeline().await?;
    let s = match start_sync_deltacommit(table, mdt, &tl, m, "").await? {
        SyncDeltacommit::Completed(_) => return Ok(()),
        SyncDeltacommit::Started(s) => s,
    };
    let config = mdt.config();
    let inflight = timeline_file(config, &s, None, Action::DeltaCommit, State::Inflight)?;
    let Some(schema) = sync_schema(mdt, &tl).await? else {
        return Err(refused(
            table,
            &s,
            "no completed metadata-table deltacommit records its schema",
        ));
    };
    let bytes = crate::format::commit::empty_commit_metadata(&schema, "UPSERT_PREPPED")
        .map_err(|e| avro_err(mdt, &s, &inflight, e))?;
    let now = mdt.timeline().await?;
    let parent = table.timeline().await?;
    let c = new_instant_time(&[&now, &parent], mdt.zone());
    let path = timeline_file(config, &s, Some(&c), Action::DeltaCommit, State::Completed)?;
    create_if_absent(mdt.storage(), &path, bytes).await?;
    info!(deltacommit = %s, "metadata table synced after its restore");
    Ok(())
}

/// Drop the metadata-table partitions Hudi drops on restore: first out of the table config
/// (`hoodie.table.metadata.partitions`), then their files. (Hudi moves the folder aside as a
/// backup; on object stores a move is a copy of every file, and the partition is rebuilt by
/// the next writer, so hudi-keeper deletes it.)
async fn drop_metadata_partitions(table: &Table, keep: &[&str]) -> Result<(), Error> {
    let storage = table.storage();
    let props = RelPath::parse(crate::table::TableConfig::PATH).map_err(StorageError::from)?;
    let text = String::from_utf8_lossy(&storage.get_capped(&props, SMALL_FILE_MAX_READ).await?)
        .into_owned();
    let rewritten = keep_metadata_partitions(&text, keep);
    let dropped: Vec<String> = table
        .config()
        .metadata_partitions
        .iter()
        .filter(|p| !keep.contains(&p.as_str()))
        .cloned()
        .collect();
    if rewritten != text {
        rewrite_properties(table, &text, rewritten).await?;
    }
    // Also the backup an interrupted earlier attempt left.
    storage
        .delete(&RelPath::parse(PROPERTIES_BACKUP).map_err(StorageError::from)?)
        .await?;
    // The dropped partitions' folders (also those an interrupted attempt left behind).
    let listing = storage
        .list_dir(&RelPath::parse(METADATA_TABLE_PATH).map_err(StorageError::from)?)
        .await?;
    for dir in listing.dirs {
        let name = dir.rsplit('/').next().unwrap_or(&dir).to_string();
        if name.starts_with('.') || keep.contains(&name.as_str()) {
            continue;
        }
        delete_folder(
            storage,
            &RelPath::parse(&format!("{METADATA_TABLE_PATH}/{name}"))
                .map_err(StorageError::from)?,
        )
        .await?;
    }
    if !dropped.is_empty() {
        info!(partitions = ?dropped, "dropped metadata-table partitions, as Hudi does on restore");
    }
    Ok(())
}

/// Delete the metadata table as Hudi does when a restore cannot keep it: clear its partitions in
/// `hoodie.properties` (Hudi's update protocol: backup, rewrite, drop the backup), then remove
/// `.hoodie/metadata`. Each step is idempotent.
pub(crate) async fn delete_metadata_table(table: &Table) -> Result<(), Error> {
    let storage = table.storage();
    let props = RelPath::parse(crate::table::TableConfig::PATH).map_err(StorageError::from)?;
    let text = String::from_utf8_lossy(&storage.get_capped(&props, SMALL_FILE_MAX_READ).await?)
        .into_owned();
    let rewritten = clear_metadata_partitions(&text);
    if rewritten != text {
        rewrite_properties(table, &text, rewritten).await?;
    }
    // Also the backup an interrupted earlier attempt left.
    let backup = RelPath::parse(PROPERTIES_BACKUP).map_err(StorageError::from)?;
    storage.delete(&backup).await?;
    let mdt = RelPath::parse(METADATA_TABLE_PATH).map_err(StorageError::from)?;
    delete_folder(storage, &mdt).await?;
    info!(table = %table.uri(), "metadata table deleted; the next writer rebuilds it");
    Ok(())
}

/// Replace `hoodie.properties` as Hudi's update protocol does: a backup first (readers fall back
/// to it), the new file, then the backup removed.
async fn rewrite_properties(table: &Table, old: &str, new: String) -> Result<(), Error> {
    let storage = table.storage();
    let props = RelPath::parse(crate::table::TableConfig::PATH).map_err(StorageError::from)?;
    let backup = RelPath::parse(PROPERTIES_BACKUP).map_err(StorageError::from)?;
    storage
        .put(&backup, bytes::Bytes::from(old.to_string().into_bytes()))
        .await?;
    if table.uri().starts_with("file:") {
        // Hadoop's checksum of the old bytes would make Hudi's reader reject the new ones.
        let crc = RelPath::parse(".hoodie/.hoodie.properties.crc").map_err(StorageError::from)?;
        storage.delete(&crc).await?;
    }
    storage
        .put(&props, bytes::Bytes::from(new.into_bytes()))
        .await?;
    storage.delete(&backup).await?;
    Ok(())
}

/// `hoodie.properties` text with only the `keep` metadata partitions listed, everything else
/// kept byte for byte.
fn keep_metadata_partitions(text: &str, keep: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        match body.split_once('=') {
            Some((key, value)) if key.trim() == "hoodie.table.metadata.partitions" => {
                let kept: Vec<&str> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|p| keep.contains(p))
                    .collect();
                out.push_str(key);
                out.push('=');
                out.push_str(&kept.join(","));
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// `hoodie.properties` text with the metadata-table partition lists emptied, everything else
/// (comments, order, the checksum, which covers only the table name) kept byte for byte.
fn clear_metadata_partitions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let key = body.split(['=', ':']).next().unwrap_or("").trim();
        if key == "hoodie.table.metadata.partitions"
            || key == "hoodie.table.metadata.partitions.inflight"
        {
            out.push_str(key);
            out.push('=');
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clearing_metadata_partitions_keeps_every_other_line() {
        let text = "#Updated at 2026\nhoodie.table.name=t\nhoodie.table.metadata.partitions=files,column_stats\nhoodie.table.metadata.partitions.inflight=\nhoodie.table.checksum=123\n";
        assert_eq!(
            clear_metadata_partitions(text),
            "#Updated at 2026\nhoodie.table.name=t\nhoodie.table.metadata.partitions=\nhoodie.table.metadata.partitions.inflight=\nhoodie.table.checksum=123\n"
        );
    }
}
