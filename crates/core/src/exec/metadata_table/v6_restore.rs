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

use apache_avro::Schema;
use bytes::Bytes;
use tracing::info;

use super::sync::{start_sync_deltacommit, SyncDeltacommit};
use super::v6::{complete_files_deltacommit, files_slice, FILES};
use crate::exec::steps::{delete_folder, list_data_files, refused, Wanted};
use crate::format::hfile;
use crate::format::log_block::{read_blocks, BLOCK_TYPE_HFILE_DATA};
use crate::format::metadata_record::{decode_files_record, file_list_record};
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;
use crate::plan::metadata_table::files_listing::{
    merge_files_partition, out_of_sync_records, partitions_on_storage, valid_instants, BlockFilter,
    FileInfo, FilesRecord, LogBlock, TimelineInstant,
};
use crate::protocol::markers::marker_dir;
use crate::storage::{RelPath, Storage, StorageError};
use crate::table::files::DataFile;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// The suffix of the deltacommit Hudi writes after the metadata table's restore
/// (`HoodieTableMetadataUtil.createRestoreTimestamp`).
const RESTORE_SUFFIX: &str = "003";
/// Log block header keys.
const HEADER_INSTANT_TIME: i32 = 0;
const HEADER_TARGET_INSTANT_TIME: i32 = 1;
const HEADER_SCHEMA: i32 = 2;
const HEADER_COMMAND_BLOCK_TYPE: i32 = 3;
const BLOCK_TYPE_COMMAND: i32 = 0;
const BLOCK_TYPE_DELETE: i32 = 1;
/// The content of a delete block with no keys (version 3, then an Avro array of 0 items), as
/// Hudi 0.15 writes it into every new metadata-table file group.
const EMPTY_DELETE_BLOCK: &[u8] = &[0, 0, 0, 3, 0, 0, 0, 1, 0];
/// The most bytes of the `files` file slice hudi-keeper reads into memory; a larger metadata
/// table is deleted by the restore instead (the next writer rebuilds it).
const MAX_FILES_SLICE_BYTES: u64 = 1 << 30;
/// The most bytes the HFiles of the `files` file slice (base file and every HFile data block of
/// every log file, together) may decompress to; past it the metadata table is deleted by the
/// restore instead, as for [`MAX_FILES_SLICE_BYTES`] (GZ blocks inflate 5-10 times, a crafted
/// one far more).
const MAX_FILES_SLICE_DECOMPRESSED_BYTES: u64 = 1 << 30;

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
    if let Err(why) = read_files_partition(table, mdt).await? {
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
    let merged = read_files_partition(table, mdt)
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

fn timeline_instants(tl: &Timeline) -> Vec<TimelineInstant> {
    tl.instants()
        .iter()
        .map(|i| TimelineInstant {
            time: i.requested_time.clone(),
            action: i.action.as_str().to_string(),
            completed: !i.is_pending(),
        })
        .collect()
}

/// The records of the metadata table's `files` partition as Hudi 0.15 reads them now, or why
/// they cannot be read so. Reads only.
async fn read_files_partition(
    table: &Table,
    mdt: &Table,
) -> Result<Result<BTreeMap<String, FilesRecord>, String>, Error> {
    let data_tl = table.timeline().await?;
    let mdt_tl = mdt.timeline().await?;
    let rolled_back = match rolled_back(table, &data_tl).await? {
        Ok(r) => r,
        Err(why) => return Ok(Err(why)),
    };
    let filter = block_filter(&data_tl, &mdt_tl, &rolled_back);

    let slice = match files_slice(mdt).await? {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let base_ok = filter.completed.contains(&slice.base_instant)
        || filter
            .completed
            .first()
            .is_some_and(|f| slice.base_instant.as_str() < f.as_str());
    if !base_ok {
        return Ok(Err(format!(
            "its latest `files` file slice starts at {}, which is not a completed instant",
            slice.base_instant
        )));
    }
    let part = RelPath::parse(FILES).map_err(StorageError::from)?;
    let mut reading = SliceReading {
        schemas: BTreeMap::new(),
        // One budget for every HFile of the slice, so that many log files cannot exceed it
        // either.
        budget: hfile::DecompressionBudget::new(MAX_FILES_SLICE_DECOMPRESSED_BYTES),
        // And one for the bytes of its files: the slice's size was checked when the restore
        // was decided, but a file read later may have grown.
        unread: MAX_FILES_SLICE_BYTES,
    };
    let base = match &slice.base_file {
        None => Vec::new(),
        Some(name) => {
            let rel = part.join(name).map_err(StorageError::from)?;
            let bytes = match read_slice_file(mdt.storage(), &rel, &mut reading.unread).await? {
                Ok(b) => b,
                Err(why) => return Ok(Err(why)),
            };
            match hfile_records(&bytes, None, &mut reading.schemas, &mut reading.budget) {
                Ok(r) => r,
                Err(why) => return Ok(Err(format!("base file `{name}`: {why}"))),
            }
        }
    };
    let mut blocks = Vec::new();
    for (_, name) in &slice.logs {
        let rel = part.join(name).map_err(StorageError::from)?;
        let bytes = match read_slice_file(mdt.storage(), &rel, &mut reading.unread).await? {
            Ok(b) => b,
            Err(why) => return Ok(Err(why)),
        };
        if let Err(why) = reading.log_blocks(name, &bytes, &mut blocks) {
            return Ok(Err(why));
        }
    }
    Ok(merge_files_partition(base, &blocks, &filter))
}

/// What the data table's completed rollbacks and restores undid, by their instant, or why one
/// cannot be read.
async fn rolled_back(
    table: &Table,
    data_tl: &Timeline,
) -> Result<Result<BTreeMap<String, Vec<String>>, String>, Error> {
    let mut rolled_back = BTreeMap::new();
    for i in data_tl
        .completed()
        .filter(|i| matches!(i.action, Action::Rollback | Action::Restore))
    {
        let Some(f) = i.file(State::Completed) else {
            continue;
        };
        let bytes = table.storage().get(&f.path).await?;
        let undone = if i.action == Action::Rollback {
            match RollbackMetadata::from_avro(&bytes) {
                Ok(m) => m.commits_rollback,
                Err(e) => return Ok(Err(format!("rollback `{}` is unreadable: {e}", f.path))),
            }
        } else {
            match RestoreMetadata::from_avro(&bytes) {
                Ok(m) => m
                    .hoodie_restore_metadata
                    .values()
                    .flatten()
                    .flat_map(|r| r.commits_rollback.iter().cloned())
                    .collect(),
                Err(e) => return Ok(Err(format!("restore `{}` is unreadable: {e}", f.path))),
            }
        };
        rolled_back.insert(i.requested_time.clone(), undone);
    }
    Ok(Ok(rolled_back))
}

/// Which blocks of the `files` slice Hudi 0.15 reads, from both timelines and what the data
/// table's rollbacks and restores undid.
fn block_filter(
    data_tl: &Timeline,
    mdt_tl: &Timeline,
    rolled_back: &BTreeMap<String, Vec<String>>,
) -> BlockFilter {
    let commits: Vec<_> = mdt_tl.commits().collect();
    BlockFilter {
        latest: mdt_tl
            .completed()
            .map(|i| i.requested_time.clone())
            .max()
            .unwrap_or_default(),
        completed: commits
            .iter()
            .filter(|i| !i.is_pending())
            .map(|i| i.requested_time.clone())
            .collect(),
        inflight: commits
            .iter()
            .filter(|i| i.state == State::Inflight)
            .map(|i| i.requested_time.clone())
            .collect(),
        valid: valid_instants(
            &timeline_instants(data_tl),
            rolled_back,
            &timeline_instants(mdt_tl),
        ),
    }
}

/// The state of reading one `files` file slice: the schemas parsed so far, and what may still
/// be decompressed and read.
struct SliceReading {
    schemas: BTreeMap<String, Schema>,
    budget: hfile::DecompressionBudget,
    unread: u64,
}

impl SliceReading {
    /// The blocks of log file `name` (its `bytes`), added to `blocks`, or why they do not read.
    fn log_blocks(
        &mut self,
        name: &str,
        bytes: &[u8],
        blocks: &mut Vec<LogBlock>,
    ) -> Result<(), String> {
        let Some(read) = read_blocks(bytes) else {
            return Err(format!(
                "log file `{name}` has blocks hudi-keeper cannot read"
            ));
        };
        for b in read {
            let get = |k: i32| {
                b.header
                    .entries
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map(|(_, v)| v.clone())
            };
            let Some(instant) = get(HEADER_INSTANT_TIME) else {
                return Err(format!("log file `{name}` has a block without an instant"));
            };
            match b.header.block_type {
                BLOCK_TYPE_COMMAND if get(HEADER_COMMAND_BLOCK_TYPE).as_deref() == Some("0") => {
                    let Some(target) = get(HEADER_TARGET_INSTANT_TIME) else {
                        return Err(format!(
                            "log file `{name}` has a rollback block without a target"
                        ));
                    };
                    blocks.push(LogBlock::Rollback { instant, target });
                }
                BLOCK_TYPE_HFILE_DATA => {
                    let schema = get(HEADER_SCHEMA);
                    let records = hfile_records(
                        b.content,
                        schema.as_deref(),
                        &mut self.schemas,
                        &mut self.budget,
                    )
                    .map_err(|why| format!("log file `{name}`, block of {instant}: {why}"))?;
                    blocks.push(LogBlock::Data { instant, records });
                }
                // The empty delete block Hudi writes when it creates a file group: no keys.
                BLOCK_TYPE_DELETE if b.content == EMPTY_DELETE_BLOCK => {
                    blocks.push(LogBlock::Data {
                        instant,
                        records: Vec::new(),
                    });
                }
                other => {
                    return Err(format!(
                        "log file `{name}` has a block of type {other}, which hudi-keeper does not read"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// One file of the `files` file slice, charged to `unread` (what may still be read of the
/// slice), or why it is not read.
async fn read_slice_file(
    storage: &Storage,
    rel: &RelPath,
    unread: &mut u64,
) -> Result<Result<Bytes, String>, Error> {
    match storage.get_capped(rel, *unread).await {
        Ok(bytes) => {
            *unread = unread.saturating_sub(bytes.len() as u64);
            Ok(Ok(bytes))
        }
        Err(StorageError::TooLarge { size, .. }) => Ok(Err(format!(
            "`{rel}` is {size} bytes, more than the {unread} bytes left of the \
             {MAX_FILES_SLICE_BYTES} hudi-keeper reads of the `files` file slice"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The `files` records of one HFile (a base file, or an HFile data block's content) written
/// under `schema` (else the HFile's own `schema` file info), decompressing within `budget`.
fn hfile_records(
    bytes: &[u8],
    schema: Option<&str>,
    schemas: &mut BTreeMap<String, Schema>,
    budget: &mut hfile::DecompressionBudget,
) -> Result<Vec<(String, FilesRecord)>, String> {
    let contents = hfile::read_with_budget(bytes, budget).map_err(|e| e.to_string())?;
    let text = match schema {
        Some(s) => s.to_string(),
        None => {
            let raw = contents
                .file_info(hfile::SCHEMA_KEY)
                .ok_or("no schema in its file info")?;
            String::from_utf8(raw.to_vec()).map_err(|e| e.to_string())?
        }
    };
    if !schemas.contains_key(&text) {
        let parsed =
            crate::format::avro::parse_schema(&text).map_err(|e| format!("its schema: {e}"))?;
        schemas.insert(text.clone(), parsed);
    }
    let schema = schemas.get(&text).ok_or("schema")?;
    let mut out = Vec::with_capacity(contents.cells.len());
    for c in &contents.cells {
        let key = String::from_utf8(c.row.clone()).map_err(|e| e.to_string())?;
        let (record_type, files) =
            decode_files_record(schema, &c.value).map_err(|e| format!("record `{key}`: {e}"))?;
        if record_type != 1 && record_type != 2 {
            return Err(format!("record `{key}` has type {record_type}"));
        }
        let files = files
            .into_iter()
            .map(|(n, (size, deleted))| (n, FileInfo { size, deleted }))
            .collect();
        out.push((key, FilesRecord { record_type, files }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::SizeClaimingStore;
    use object_store::memory::InMemory;
    use object_store::ObjectStore;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_files_slice_file_larger_than_what_is_left_to_read_is_not_read() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let rel = RelPath::parse("files/.files-0000-0_00000000000000010.log.1_0-0-0").unwrap();
        Storage::from_store(Arc::clone(&inner), "t", "memory://t")
            .put(&rel, Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        let plain = Storage::from_store(Arc::clone(&inner), "t", "memory://t");
        let mut unread = 25;
        assert_eq!(
            read_slice_file(&plain, &rel, &mut unread).await.unwrap(),
            Ok(Bytes::from_static(b"0123456789"))
        );
        assert_eq!(unread, 15, "charged");
        // The same file reported as 10 GiB (it grew, or the store says so): not read, and the
        // restore learns why (it deletes the metadata table instead).
        let huge = Arc::new(SizeClaimingStore::new(inner, 10 << 30));
        let s = Storage::from_store(huge.clone(), "t", "memory://t");
        let why = read_slice_file(&s, &rel, &mut unread)
            .await
            .unwrap()
            .map(|b| b.len())
            .unwrap_err();
        assert!(why.contains("10737418240 bytes"), "{why}");
        assert_eq!(huge.body_bytes_read(), 0);
        // What is left caps a read even below the usual cap.
        let mut unread = 9;
        let why = read_slice_file(&plain, &rel, &mut unread)
            .await
            .unwrap()
            .map(|b| b.len())
            .unwrap_err();
        assert!(why.contains("10 bytes"), "{why}");
    }
}
