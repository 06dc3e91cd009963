//! The metadata table's `files` partition read as Hudi's reader merges it: the latest file slice
//! (table version 6: [`super::files_log::files_slice`]; 8 and 9:
//! [`crate::plan::metadata_table::files_slice`]), its base HFile and every block of its log
//! files, merged by [`merge_files_partition`] with the blocks Hudi's scanner of that version
//! counts. One home for the table-version-6 restore (its refusal and its sync deltacommit) and
//! for the audit's check of the metadata table against the store. Reads only, within
//! [`ReadLimits`].

use std::collections::BTreeMap;

use apache_avro::Schema;
use bytes::Bytes;

use super::files_log::{files_slice, FILES};
use crate::format::hfile;
use crate::format::log_block::{read_blocks, BLOCK_TYPE_HFILE_DATA};
use crate::format::metadata_record::visit_files_record;
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;
use crate::plan::metadata_table::files_listing::{
    merge_files_partition, valid_instants, valid_instants_v8, BlockFilter, FileInfo, FilesRecord,
    LogBlock, Reader, TimelineInstant,
};
use crate::plan::metadata_table::files_slice::latest_files_slice_v8;
use crate::storage::{RelPath, Storage, StorageError};
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

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
/// The same as Hudi 0.13 writes it (table version 5; seen in every `files` file group its Spark
/// writer created): version 2, then 48 bytes of Kryo holding an empty
/// `org.apache.hudi.common.model.DeleteRecord[]` (the class name, its last character `;` with
/// the high bit set, then the array's length + 1 = 1).
const EMPTY_DELETE_BLOCK_V2: &[u8] =
    b"\0\0\0\x02\0\0\0\x30\x01\x00[Lorg.apache.hudi.common.model.DeleteRecord\xbb\x01\x01";

/// How much of the `files` file slice is read into memory; past any of them the slice is not
/// read (the caller learns why).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    /// The bytes of its files, together.
    pub(crate) slice_bytes: u64,
    /// The bytes its HFiles (base file and every HFile data block of every log file, together)
    /// may decompress to (GZ blocks inflate 5-10 times, a crafted one far more).
    pub(crate) decompressed_bytes: u64,
    /// The file entries of its records, every block's counted (a file named in several
    /// blocks counts in each).
    pub(crate) entries: u64,
}

impl ReadLimits {
    /// What the table-version-6 restore reads (beyond it, it deletes the metadata table and the
    /// next writer rebuilds it).
    pub(crate) const RESTORE: ReadLimits = ReadLimits {
        slice_bytes: 1 << 30,
        decompressed_bytes: 1 << 30,
        entries: u64::MAX,
    };
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

/// How the entries of the `files` records are keyed: by their names ([`ByName`]), or by
/// anything that stands for one name alone (the audit: a hash of it).
pub(crate) trait EntryKeys {
    /// The key.
    type Key: Ord + Clone;
    /// The key of entry `name` of the record with row key `record`.
    fn key(&mut self, record: &str, name: &str) -> Self::Key;
}

/// Entries keyed by their names.
pub(crate) struct ByName;

impl EntryKeys for ByName {
    type Key = String;
    fn key(&mut self, _record: &str, name: &str) -> String {
        name.to_string()
    }
}

/// The records of the metadata table's `files` partition as Hudi reads them now (the reader of
/// the table's version), their entries keyed by `keys`, or why they cannot be read so. Reads
/// only. HFiles are walked one block at a time and their records decoded in one pass, so the
/// slice costs its files' bytes, one inflated block and the merged records.
pub(crate) async fn read_files_partition<K: EntryKeys>(
    table: &Table,
    mdt: &Table,
    limits: ReadLimits,
    keys: &mut K,
) -> Result<Result<BTreeMap<String, FilesRecord<K::Key>>, String>, Error> {
    let data_tl = table.timeline().await?;
    let mdt_tl = mdt.timeline().await?;
    let rolled_back = match rolled_back(table, &data_tl).await? {
        Ok(r) => r,
        Err(why) => return Ok(Err(why)),
    };
    let v6 = table.config().version.is_0x();
    let filter = block_filter(&data_tl, &mdt_tl, &rolled_back, v6);
    let (base_file, logs) = match latest_slice(mdt, &mdt_tl, &filter, v6).await? {
        Ok(s) => s,
        Err(why) => return Ok(Err(why)),
    };
    let part = RelPath::parse(FILES).map_err(StorageError::from)?;
    let mut reading = SliceReading {
        schemas: BTreeMap::new(),
        // One budget for every HFile of the slice, so that many log files cannot exceed it
        // either.
        budget: hfile::DecompressionBudget::new(limits.decompressed_bytes),
        // And one for the bytes of its files: a file read after the slice was sized may have
        // grown.
        unread: limits.slice_bytes,
        limit: limits.slice_bytes,
        entries_left: limits.entries,
    };
    let base = match &base_file {
        None => Vec::new(),
        Some(name) => {
            let rel = part.join(name).map_err(StorageError::from)?;
            let bytes = match reading.read(mdt.storage(), &rel).await? {
                Ok(b) => b,
                Err(why) => return Ok(Err(why)),
            };
            match reading.hfile_records(&bytes, None, keys) {
                Ok(r) => r,
                Err(why) => return Ok(Err(format!("base file `{name}`: {why}"))),
            }
        }
    };
    let mut blocks = Vec::new();
    for name in &logs {
        let rel = part.join(name).map_err(StorageError::from)?;
        let bytes = match reading.read(mdt.storage(), &rel).await? {
            Ok(b) => b,
            Err(why) => return Ok(Err(why)),
        };
        if let Err(why) = reading.log_blocks(name, &bytes, &mut blocks, keys) {
            return Ok(Err(why));
        }
    }
    Ok(merge_files_partition(base, &blocks, &filter))
}

/// The file slice of the `files` partition the table version's reader reads: its base file and
/// log files in reading order, or why there is none.
async fn latest_slice(
    mdt: &Table,
    mdt_tl: &Timeline,
    filter: &BlockFilter,
    v6: bool,
) -> Result<Result<(Option<String>, Vec<String>), String>, Error> {
    if v6 {
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
        let logs = slice.logs.into_iter().map(|(_, n)| n).collect();
        return Ok(Ok((slice.base_file, logs)));
    }
    let part = RelPath::parse(FILES).map_err(StorageError::from)?;
    let names: Vec<String> = mdt
        .storage()
        .list_dir(&part)
        .await?
        .files
        .iter()
        .map(|m| m.file_name().to_string())
        .collect();
    Ok(latest_files_slice_v8(&names, mdt_tl).map(|s| (s.base_file, s.logs)))
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

/// Which blocks of the `files` slice Hudi reads (0.15: `v6`, else 1.x), from both timelines and what the data
/// table's rollbacks and restores undid.
fn block_filter(
    data_tl: &Timeline,
    mdt_tl: &Timeline,
    rolled_back: &BTreeMap<String, Vec<String>>,
    v6: bool,
) -> BlockFilter {
    let commits: Vec<_> = mdt_tl.commits().collect();
    let (data, mdt) = (timeline_instants(data_tl), timeline_instants(mdt_tl));
    BlockFilter {
        reader: if v6 { Reader::V6 } else { Reader::V8 },
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
        valid: if v6 {
            valid_instants(&data, rolled_back, &mdt)
        } else {
            valid_instants_v8(&data, rolled_back, &mdt)
        },
    }
}

/// The state of reading one `files` file slice: the schemas parsed so far, and what may still
/// be decompressed and read.
struct SliceReading {
    schemas: BTreeMap<String, Schema>,
    budget: hfile::DecompressionBudget,
    /// Bytes of the slice's files that may still be read, of `limit`.
    unread: u64,
    limit: u64,
    /// File entries that may still be decoded.
    entries_left: u64,
}

impl SliceReading {
    /// One file of the slice, charged to what may still be read, or why it is not read.
    async fn read(
        &mut self,
        storage: &Storage,
        rel: &RelPath,
    ) -> Result<Result<Bytes, String>, Error> {
        read_slice_file(storage, rel, &mut self.unread, self.limit).await
    }

    /// The records of one HFile of the slice (see [`hfile_records`]), charged to the budgets.
    fn hfile_records<K: EntryKeys>(
        &mut self,
        bytes: &[u8],
        schema: Option<&str>,
        keys: &mut K,
    ) -> Result<Records<K::Key>, String> {
        let mut charge = EntryCharge {
            left: self.entries_left,
            over: false,
        };
        let records = hfile_records(
            bytes,
            schema,
            &mut self.schemas,
            &mut self.budget,
            &mut charge,
            keys,
        )?;
        self.entries_left = charge.left;
        Ok(records)
    }

    /// The blocks of log file `name` (its `bytes`), added to `blocks`, or why they do not read.
    fn log_blocks<K: EntryKeys>(
        &mut self,
        name: &str,
        bytes: &[u8],
        blocks: &mut Vec<LogBlock<K::Key>>,
        keys: &mut K,
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
                    let records = self
                        .hfile_records(b.content, schema.as_deref(), keys)
                        .map_err(|why| format!("log file `{name}`, block of {instant}: {why}"))?;
                    blocks.push(LogBlock::Data { instant, records });
                }
                // The empty delete block Hudi writes when it creates a file group: no keys.
                BLOCK_TYPE_DELETE
                    if b.content == EMPTY_DELETE_BLOCK || b.content == EMPTY_DELETE_BLOCK_V2 =>
                {
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
    limit: u64,
) -> Result<Result<Bytes, String>, Error> {
    match storage.get_capped(rel, *unread).await {
        Ok(bytes) => {
            *unread = unread.saturating_sub(bytes.len() as u64);
            Ok(Ok(bytes))
        }
        Err(StorageError::TooLarge { size, .. }) => Ok(Err(format!(
            "`{rel}` is {size} bytes, more than the {unread} bytes left of the \
             {limit} hudi-keeper reads of the `files` file slice"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The records of one HFile: (row key, record), in file order.
type Records<K> = Vec<(String, FilesRecord<K>)>;

/// The file entries the slice's records may still name: past it, the slice is not read.
struct EntryCharge {
    left: u64,
    over: bool,
}

/// An error of a walk over an HFile's cells.
struct Why(String);

impl From<hfile::HFileError> for Why {
    fn from(e: hfile::HFileError) -> Self {
        Why(e.to_string())
    }
}

/// The `files` records of one HFile (a base file, or an HFile data block's content) written
/// under `schema` (else the HFile's own `schema` file info), decompressing within `budget`, one
/// block at a time, each record decoded in one pass into entries keyed by `keys`.
fn hfile_records<K: EntryKeys>(
    bytes: &[u8],
    schema: Option<&str>,
    schemas: &mut BTreeMap<String, Schema>,
    budget: &mut hfile::DecompressionBudget,
    charge: &mut EntryCharge,
    keys: &mut K,
) -> Result<Records<K::Key>, String> {
    let mut file = hfile::open(bytes, budget).map_err(|e| e.to_string())?;
    let text = match schema {
        Some(s) => s.to_string(),
        None => {
            let raw = file
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
    let mut out = Vec::new();
    file.walk(budget, |c| {
        let key = std::str::from_utf8(c.row)
            .map_err(|e| Why(e.to_string()))?
            .to_string();
        let mut files = BTreeMap::new();
        let record_type = visit_files_record(schema, c.value, |name, size, deleted| {
            if charge.left == 0 {
                charge.over = true;
                return;
            }
            charge.left -= 1;
            files.insert(keys.key(&key, name), FileInfo { size, deleted });
        })
        .map_err(|e| Why(format!("record `{key}`: {e}")))?;
        if charge.over {
            return Err(Why(
                "its records name more files than hudi-keeper holds in memory".to_string(),
            ));
        }
        if record_type != 1 && record_type != 2 {
            return Err(Why(format!("record `{key}` has type {record_type}")));
        }
        out.push((key, FilesRecord { record_type, files }));
        Ok(())
    })
    .map_err(|Why(why)| why)?;
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
            read_slice_file(&plain, &rel, &mut unread, 25)
                .await
                .unwrap(),
            Ok(Bytes::from_static(b"0123456789"))
        );
        assert_eq!(unread, 15, "charged");
        // The same file reported as 10 GiB (it grew, or the store says so): not read, and the
        // restore learns why (it deletes the metadata table instead).
        let huge = Arc::new(SizeClaimingStore::new(inner, 10 << 30));
        let s = Storage::from_store(huge.clone(), "t", "memory://t");
        let why = read_slice_file(&s, &rel, &mut unread, 25)
            .await
            .unwrap()
            .map(|b| b.len())
            .unwrap_err();
        assert!(why.contains("10737418240 bytes"), "{why}");
        assert_eq!(huge.body_bytes_read(), 0);
        // What is left caps a read even below the usual cap.
        let mut unread = 9;
        let why = read_slice_file(&plain, &rel, &mut unread, 25)
            .await
            .unwrap()
            .map(|b| b.len())
            .unwrap_err();
        assert!(why.contains("10 bytes"), "{why}");
    }
}
