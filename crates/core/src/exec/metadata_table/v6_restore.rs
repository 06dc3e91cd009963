//! A restore of a table-version-6 table (Hudi 0.14/0.15) keeps its metadata table, as Hudi
//! 0.15's `HoodieBackedTableMetadataWriter.update(HoodieRestoreMetadata, R)` does (checked
//! against Hudi 0.15's own restore in the interop harness):
//!
//! 1. (decided before anything changes, [`refusal`]) every file group of the `files` partition
//!    has a file slice at or before the restore point (else Hudi throws "Can't restore ... no
//!    base file in MDT lesser than the commit to restore to"; hudi-keeper deletes the metadata
//!    table instead), and hudi-keeper can read that partition as Hudi does;
//! 2. the metadata table's own restore to the same point (the shared restore procedure one level
//!    down: listing-based merge-on-read child rollbacks, rollback command blocks appended to its
//!    log files; run by [`super::restore`]);
//! 3. [`sync`]: a deltacommit at `<new instant>003` whose files-partition records bring the
//!    metadata table's file lists in line with storage (files the data table's child rollbacks
//!    added, files gone, partitions gone), as one HFile data block appended to the `files` file
//!    slice; with no records, a deltacommit with no write stats.
//!
//! Resumable: a completed sync deltacommit is left alone; a pending one is finished with the
//! same instant, its block found again through its APPEND marker (the records are computed
//! again from the same state: the block of a pending deltacommit is not read).

use std::collections::BTreeMap;

use tracing::info;

use super::files_log::{complete_files_deltacommit, FILES};
use super::files_partition::{read_files_partition, ByName, ReadLimits};
use super::sync::{start_sync_deltacommit, SyncDeltacommit};
use crate::exec::steps::{delete_folder, list_data_files, refused, Wanted};
use crate::format::metadata_record::file_list_record;
use crate::plan::metadata_table::files_listing::{out_of_sync_records, partitions_on_storage};
use crate::protocol::markers::marker_dir;
use crate::storage::{RelPath, StorageError};
use crate::table::files::DataFile;
use crate::table::Table;
use crate::timeline::{Action, Timeline};
use crate::Error;

/// The suffix of the deltacommit Hudi writes after the metadata table's restore
/// (`HoodieTableMetadataUtil.createRestoreTimestamp`).
const RESTORE_SUFFIX: &str = "003";
/// The most bytes of the `files` file slice hudi-keeper reads into memory; a larger metadata
/// table is deleted by the restore instead (the next writer rebuilds it).
const MAX_FILES_SLICE_BYTES: u64 = ReadLimits::RESTORE.slice_bytes;

/// Why the v6 metadata table cannot be restored in place to `target` (then the restore deletes
/// it), or `None`. Reads only.
pub(in crate::exec) async fn refusal(
    table: &Table,
    mdt: &Table,
    mdt_timeline: &Timeline,
    target: &str,
) -> Result<Option<String>, Error> {
    if let Some(c) = mdt_timeline.pending().find(|i| {
        matches!(
            i.action,
            Action::Commit | Action::Compaction | Action::LogCompaction
        )
    }) {
        return Ok(Some(format!(
            "the metadata table has a pending compaction {}",
            c.requested_time
        )));
    }
    // Pending writes the metadata table's restore does not undo (Hudi 0.15 rolls them back
    // first under the EAGER policy; hudi-keeper leaves that to Hudi).
    if let Some(p) = mdt_timeline
        .pending()
        .find(|i| i.requested_time.as_str() <= target)
    {
        return Ok(Some(format!(
            "the metadata table has a pending {} {} at or before the restore point",
            p.action.as_str(),
            p.requested_time
        )));
    }
    // Hudi's check: every file group of `files` has a file slice at or before the point.
    let part = RelPath::parse(FILES).map_err(StorageError::from)?;
    let listing = mdt.storage().list_dir(&part).await?;
    let mut groups: BTreeMap<String, bool> = BTreeMap::new();
    let mut bytes = 0u64;
    for m in &listing.files {
        let Some(f) = DataFile::parse(m.file_name()) else {
            continue;
        };
        bytes = bytes.saturating_add(m.size);
        let ok = groups.entry(f.file_id().to_string()).or_default();
        *ok |= f.instant() <= target;
    }
    if groups.is_empty() {
        return Ok(Some("its `files` partition has no file group".into()));
    }
    if groups.values().any(|ok| !ok) {
        return Ok(Some(format!(
            "its `files` partition has no file slice at or before {target} (Hudi 0.15 refuses to restore it then)"
        )));
    }
    if bytes > MAX_FILES_SLICE_BYTES {
        return Ok(Some(format!(
            "its `files` partition holds {bytes} bytes, more than hudi-keeper reads into memory ({MAX_FILES_SLICE_BYTES})"
        )));
    }
    // It must read as Hudi reads it (now, and so after its restore).
    if let Err(why) = read_files_partition(table, mdt, ReadLimits::RESTORE, &mut ByName).await? {
        return Ok(Some(format!(
            "hudi-keeper cannot read its `files` partition as Hudi does: {why}"
        )));
    }
    Ok(None)
}

/// The sync deltacommit after the metadata table's restore `m` (see the module docs).
pub(in crate::exec) async fn sync(table: &Table, mdt: &Table, m: &str) -> Result<(), Error> {
    let tl = mdt.timeline().await?;
    let s = match start_sync_deltacommit(table, mdt, &tl, m, RESTORE_SUFFIX).await? {
        SyncDeltacommit::Completed(s) => {
            // (Its marker folder, if a run stopped right after completing it.)
            return delete_folder(mdt.storage(), &marker_dir(&s)?).await;
        }
        SyncDeltacommit::Started(s) => s,
    };

    // The records: what the metadata table lists against what storage holds.
    let merged = read_files_partition(table, mdt, ReadLimits::RESTORE, &mut ByName)
        .await?
        .map_err(|why| refused(table, &s, format!("the metadata table's `files` partition cannot be read as Hudi reads it ({why}); run the restore again, or delete the metadata table")))?;
    let files = list_data_files(table.storage(), &Wanted::every()).await?;
    let on_storage: Vec<(RelPath, i64)> = files
        .into_iter()
        .map(|f| {
            let size = i64::try_from(f.size).unwrap_or(i64::MAX);
            (f.path, size)
        })
        .collect();
    let records = out_of_sync_records(&merged, &partitions_on_storage(&on_storage));

    let rows: BTreeMap<String, Vec<u8>> = records
        .iter()
        .map(|(key, r)| {
            let entries = r.files.iter().map(|(n, i)| (n.as_str(), i.size, i.deleted));
            file_list_record(key, r.record_type, entries)
        })
        .collect();
    complete_files_deltacommit(mdt, &tl, &s, &s, &rows).await?;
    info!(deltacommit = %s, records = records.len(), "metadata table synced after its restore");
    Ok(())
}
