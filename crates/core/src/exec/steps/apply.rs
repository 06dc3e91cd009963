//! A rollback plan applied: its deletes (proven gone), then its rollback command blocks (v6
//! merge-on-read), and the rollback metadata that records what was done. Shared by the data
//! table's rollbacks, a restore's child rollbacks and the metadata table's rollbacks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant as Clock;

use futures::StreamExt;

use super::{avro_err, Progress, RollbackOptions};
use crate::exec::log_append::{append_block, Slice, Versioning};
use crate::exec::timeline_ops::{create_if_absent, timeline_file};
use crate::format::log_block::{is_rollback_block_for, rollback_command_block};
use crate::format::rollback::{
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan,
};
use crate::protocol::markers::marker_dir;
use crate::storage::{RelPath, Storage};
use crate::table::files::BasePath;
use crate::table::{Table, TableVersion};
use crate::timeline::{Action, State};
use crate::Error;

/// Deletes between two safe points of a rollback (ten S3 bulk requests).
const DELETE_BATCH: usize = 10_000;

/// The write token Java uses when it rolls a log file over without a task context.
const UNKNOWN_WRITE_TOKEN: &str = "1-0-1";
/// The write token of a v8/v9 rollback's command-block log file: what Hudi's Java engine gives
/// its one task (partition 0, stage 0, attempt 0), as its rollbacks name the file.
const V8_ROLLBACK_WRITE_TOKEN: &str = "0-0-0";

/// How a rollback of `t` on table `version` names the log file of a command block for a file
/// slice whose base instant is `base_instant`: the instant in the name, the write token, and
/// the version rule.
/// * v6, as Hudi 0.15 (`BaseRollbackHelper`): the slice's base instant, the version after the
///   slice's latest log file, the roll-over token `1-0-1`.
/// * v8/v9, as Hudi 1.0.1 (`BaseRollbackHelper`) and 1.1.1 (`RollbackHelper`): the instant `t`
///   itself, the rollback task's write token, version 1 rolled over while that exact name
///   exists (a failed log file `.log.1_<other token>` leaves version 1 free).
fn command_block_naming<'a>(
    version: TableVersion,
    t: &'a str,
    base_instant: &'a str,
) -> (&'a str, &'static str, Versioning) {
    if version.is_0x() {
        (base_instant, UNKNOWN_WRITE_TOKEN, Versioning::AfterLatest)
    } else {
        (t, V8_ROLLBACK_WRITE_TOKEN, Versioning::FirstFree)
    }
}

/// The deletes of a resolved plan (a missing file counts as deleted; on the local file system
/// Hadoop's checksum side file `.<name>.crc` goes too, as Hadoop's own delete does), then the v6
/// MOR rollback command blocks. Returns the command-block log files by partition.
pub(in crate::exec) async fn apply_plan(
    table: &Table,
    t: &str,
    r: &str,
    resolved: &crate::plan::rollback::ResolvedPlan,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<BTreeMap<String, BTreeMap<String, i64>>, Error> {
    let storage = table.storage();
    let base = BasePath::from_uri(table.uri());
    let mut all: Vec<RelPath> = resolved
        .deletes
        .values()
        .flat_map(|v| v.iter().map(|(_, rel)| rel.clone()))
        .collect();
    if table.uri().starts_with("file:") {
        let sidecars: Vec<RelPath> = all
            .iter()
            .filter_map(|rel| rel.parent().join(&format!(".{}.crc", rel.file_name())).ok())
            .collect();
        all.extend(sidecars);
    }
    if let Some(p) = progress {
        p.start(t, all.len());
    }
    // In batches, with a safe point before each: any subset of the plan's deletes may be done
    // when a rerun resumes it.
    let mut deleted = Vec::with_capacity(all.len());
    let mut paths = all.into_iter();
    loop {
        let batch: Vec<RelPath> = paths.by_ref().take(DELETE_BATCH).collect();
        if batch.is_empty() {
            break;
        }
        table.stop_point("between batches of deletes", None)?;
        let results = storage
            .delete_many_with(batch, options.delete_concurrency, || {
                if let Some(p) = progress {
                    p.deleted();
                }
            })
            .await;
        for (path, result) in results {
            if let Err(source) = result {
                return Err(Error::Delete {
                    table: table.uri().to_string(),
                    instant: t.to_string(),
                    path: path.to_string(),
                    source: Box::new(source),
                });
            }
            deleted.push(path);
        }
    }
    confirm_gone(table, t, &deleted).await?;

    let mut rollback_log_files: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    // One file per request: v8/v9 plans have a request per APPEND marker, two of them may name
    // one file slice, and each gets its own block as in Hudi.
    let mut written = BTreeSet::new();
    for (partition, file_id, base_instant, _) in &resolved.log_blocks {
        let (name_instant, write_token, versioning) =
            command_block_naming(table.config().version, t, base_instant);
        let slice = Slice {
            partition,
            file_id,
            base_instant: name_instant,
            write_token,
            versioning,
        };
        let (rel, len) = write_command_block(storage, r, t, &slice, &written).await?;
        written.insert(rel.clone());
        rollback_log_files
            .entry(partition.clone())
            .or_default()
            .insert(base.render_qualified(&rel), len);
    }
    Ok(rollback_log_files)
}

/// Prove the deleted files gone: one listing of each folder they were in, a few at a time.
/// A delete counts only once the store confirmed it *and* no listing shows the key: the local
/// store and S3 confirm a delete of a key they do not have, so a wrongly addressed key would
/// look deleted while the file stays. A file still listed fails the rollback before it
/// completes.
pub(in crate::exec) async fn confirm_gone(
    table: &Table,
    t: &str,
    deleted: &[RelPath],
) -> Result<(), Error> {
    let mut by_folder: BTreeMap<RelPath, BTreeSet<String>> = BTreeMap::new();
    for p in deleted {
        by_folder
            .entry(p.parent())
            .or_default()
            .insert(p.file_name().to_string());
    }
    let storage = table.storage().clone();
    // Each listing keeps only the names it checks, however many files the folder has.
    let mut listings = futures::stream::iter(by_folder)
        .map(move |(dir, names)| {
            let storage = storage.clone();
            async move {
                storage
                    .list_dir_filtered(&dir, |p| names.contains(p.file_name()))
                    .await
            }
        })
        .buffer_unordered(8);
    while let Some(listing) = listings.next().await {
        if let Some(f) = listing?.files.first() {
            return Err(Error::StillListed {
                table: table.uri().to_string(),
                instant: t.to_string(),
                path: f.path.to_string(),
            });
        }
    }
    Ok(())
}

pub(in crate::exec) fn rollback_metadata(
    r: &str,
    t: &str,
    action: Action,
    plan: &RollbackPlan,
    resolved: &crate::plan::rollback::ResolvedPlan,
    rollback_log_files: &BTreeMap<String, BTreeMap<String, i64>>,
    started: Clock,
) -> RollbackMetadata {
    let mut partitions: BTreeMap<String, RollbackPartitionMetadata> = BTreeMap::new();
    for req in plan.requests.iter().flatten() {
        let p = partitions
            .entry(req.partition_path.clone())
            .or_insert_with(|| RollbackPartitionMetadata {
                partition_path: req.partition_path.clone(),
                rollback_log_files: Some(BTreeMap::new()),
                log_files_from_failed_commit: Some(BTreeMap::new()),
                ..Default::default()
            });
        if let Some(logs) = &req.log_blocks_to_be_deleted {
            // As Java records them: the plan's keys and sizes on table version 6 (whose requests
            // name the older slice's base instant); none from 1.x's requests for v8/v9 APPEND
            // markers (base instant = the instant itself; Hudi 1.0.1 / 1.1.1's RollbackHelper
            // fills only rollbackLogFiles).
            let v8_form = req.latest_base_instant.as_deref() == Some(t);
            if req.files_to_be_deleted.is_empty() && !v8_form {
                p.log_files_from_failed_commit
                    .get_or_insert_with(BTreeMap::new)
                    .extend(logs.iter().map(|(k, v)| (k.clone(), *v)));
            }
        }
    }
    for (partition, files) in &resolved.deletes {
        if let Some(p) = partitions.get_mut(partition) {
            p.success_delete_files
                .extend(files.iter().map(|(abs, _)| abs.clone()));
        }
    }
    for (partition, logs) in rollback_log_files {
        if let Some(p) = partitions.get_mut(partition) {
            p.rollback_log_files
                .get_or_insert_with(BTreeMap::new)
                .extend(logs.clone());
        }
    }
    let total: usize = resolved.deletes.values().map(Vec::len).sum();
    RollbackMetadata {
        start_rollback_time: r.to_string(),
        time_taken_in_millis: started.elapsed().as_millis() as i64,
        total_files_deleted: total as i32,
        commits_rollback: vec![t.to_string()],
        partition_metadata: partitions,
        version: Some(1),
        instants_rollback: vec![InstantInfo {
            commit_time: t.to_string(),
            action: action.as_str().to_string(),
        }],
    }
}

/// Write one rollback command block into a new log file of `slice`, reusing one an earlier
/// attempt of the same rollback wrote (found through its APPEND marker) and not in `written`.
async fn write_command_block(
    storage: &Storage,
    r: &str,
    t: &str,
    slice: &Slice<'_>,
    written: &BTreeSet<RelPath>,
) -> Result<(RelPath, i64), Error> {
    let block = rollback_command_block(r, t);
    append_block(
        storage,
        t,
        &marker_dir(r)?,
        slice,
        &block,
        written,
        |bytes| is_rollback_block_for(bytes, r, t),
    )
    .await
}

/// The completed rollback `r` of `t` (completed at `completion` in layout 2), recording
/// `metadata`; left as it is when it exists.
pub(in crate::exec) async fn write_completed_rollback(
    table: &Table,
    t: &str,
    r: &str,
    completion: Option<&str>,
    metadata: &RollbackMetadata,
) -> Result<(), Error> {
    let path = timeline_file(
        table.config(),
        r,
        completion,
        Action::Rollback,
        State::Completed,
    )?;
    let bytes = metadata
        .to_avro_in(table.config().version.metadata_schema())
        .map_err(|e| avro_err(table, t, &path, e))?;
    create_if_absent(table.storage(), &path, bytes).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_block_files_are_named_by_the_rule_of_the_table_version() {
        // Hudi 0.15 on v6: the slice's base instant, after its latest version, token 1-0-1.
        assert_eq!(
            command_block_naming(TableVersion::V6, "300", "100"),
            ("100", "1-0-1", Versioning::AfterLatest)
        );
        // Hudi 1.0.1 / 1.1.1 on v8 and v9: the rolled-back instant, version 1 onwards, 0-0-0.
        for v in [TableVersion::V8, TableVersion::V9] {
            assert_eq!(
                command_block_naming(v, "300", "100"),
                ("300", "0-0-0", Versioning::FirstFree),
                "{v:?}"
            );
        }
    }
}
