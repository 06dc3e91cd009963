//! The `files` partition of a metadata table as Hudi's reader merges it, and the records the
//! table-version-6 restore writes to bring it back in line with storage. Pure.
//!
//! Read from Hudi 0.15.0's `AbstractHoodieLogRecordReader.scanInternalV1`,
//! `HoodieMetadataPayload.preCombine`, `HoodieBackedTableMetadata.readFromBaseAndMergeWithLogRecords`,
//! `HoodieTableMetadataUtil.getValidInstantTimestamps` and
//! `HoodieBackedTableMetadataWriter.update(HoodieRestoreMetadata)` /
//! `fetchOutofSyncFilesRecordsFromMetadataTable` / `convertMissingPartitionRecords`, and checked
//! against Hudi 0.15's own restore in the interop harness:
//!
//! - [`merge_files_partition`]: the records of the latest file slice of the `files` partition:
//!   the base file's records, then the log blocks in log-file order. A block written after the
//!   metadata table's latest completed instant stops the scan (Hudi `break`s there); a data block
//!   of an instant that is not completed on the metadata table, or not valid for the data table
//!   ([`valid_instants`]), is skipped; a rollback command block voids the blocks read so far of
//!   its target instant. The remaining blocks' records merge per key, oldest first, then merge
//!   over the base file's: sizes by max, a deleted file drops an earlier entry.
//! - [`out_of_sync_records`]: after the metadata table's own restore, the records of the
//!   deltacommit Hudi writes at `<new instant>003`: per partition the metadata table lists, the
//!   files storage has that it lacks (with their sizes) and the files it lists that storage lacks
//!   (deleted); partitions gone from storage are deleted from the partition list.
//!
//! Table versions 8 and 9 (Hudi 1.0.1's `HoodieMetadataLogRecordReader` over
//! `AbstractHoodieLogRecordScanner.scanInternalV1`; Hudi 1.1.1's `HoodieBackedTableMetadata.
//! readSliceWithFilter`, a `HoodieFileGroupReader` over `BaseHoodieLogRecordReader.scanInternalV1`
//! with an `EXACT_MATCH` `InstantRange`) differ in three ways ([`Reader::V8`]):
//!
//! - a data or delete block after the metadata table's latest completed instant is skipped,
//!   not the end of the scan, and a rollback command block is applied whatever its instant;
//! - no block is checked against the metadata table's commits timeline (`tableVersion <
//!   EIGHT` only): the valid instants decide alone. Log files of deltacommits not completed on
//!   the metadata table are left out of the file slice instead (`filterUncommittedLogs`, see
//!   [`super::files_slice`]);
//! - the valid instants ([`valid_instants_v8`]) take every completed metadata-table
//!   deltacommit whose instant is not pending on the data table (`isValidInstant`), not only
//!   the suffixed ones.
//!
//! The merge of records is the same in all three (1.x: `HoodieAvroRecordMerger.merge` calls
//! `HoodieMetadataPayload.combineAndGetUpdateValue`, which is `preCombine`, log records first in
//! block order, then over the base file's record: `HoodieTableMetadataUtil.
//! combineFileSystemMetadata`, the same rules as 0.15's `HoodieMetadataPayload`).

use std::collections::{BTreeMap, BTreeSet};

use crate::storage::RelPath;
use crate::table::files::DataFile;

/// The key of the record listing every partition.
pub const ALL_PARTITIONS_KEY: &str = "__all_partitions__";
/// The record type of the partition list.
pub const PARTITION_LIST_TYPE: i32 = 1;
/// The record type of one partition's file list.
pub const FILE_LIST_TYPE: i32 = 2;
/// The instant prefix of the metadata table's initial (bootstrap) deltacommits.
const SOLO_COMMIT_PREFIX: &str = "00000000000000";
/// The length of a suffixed metadata-table instant time (`<instant><3 digits>`).
const SUFFIXED_LEN: usize = 20;

/// One entry of a file list record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Its size (0 for a deleted file and for a partition-list entry).
    pub size: i64,
    /// Whether the entry records a deletion.
    pub deleted: bool,
}

/// A `files`-partition record: its type and its `filesystemMetadata` entries, by file (or
/// partition) name, or by any key that stands for one name alone (the audit keys them by a
/// hash of the name, [`crate::plan::metadata_table::name_hash`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesRecord<K = String> {
    /// 1 (partition list) or 2 (file list).
    pub record_type: i32,
    /// File (or partition) name → entry.
    pub files: BTreeMap<K, FileInfo>,
}

impl<K> Default for FilesRecord<K> {
    fn default() -> Self {
        FilesRecord {
            record_type: 0,
            files: BTreeMap::new(),
        }
    }
}

/// One block of a metadata-table log file, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogBlock<K = String> {
    /// A data block: its instant and its records by key.
    Data {
        /// The `INSTANT_TIME` header.
        instant: String,
        /// (record key, record), in block order.
        records: Vec<(String, FilesRecord<K>)>,
    },
    /// A rollback command block.
    Rollback {
        /// The `INSTANT_TIME` header (the rollback instant).
        instant: String,
        /// The `TARGET_INSTANT_TIME` header.
        target: String,
    },
}

/// Which of Hudi's log scanners reads the blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reader {
    /// Table version 6 (Hudi 0.14/0.15).
    #[default]
    V6,
    /// Table versions 8 and 9 (Hudi 1.x): see the module docs.
    V8,
}

/// What decides which blocks count (Hudi's scanner state).
#[derive(Debug, Clone, Default)]
pub struct BlockFilter {
    /// The scanner's rules.
    pub reader: Reader,
    /// The metadata table's latest completed instant (any action): blocks after it stop the scan.
    pub latest: String,
    /// Completed instants of the metadata table's commits timeline (deltacommits, commits).
    pub completed: BTreeSet<String>,
    /// Inflight (not requested) instants of that timeline.
    pub inflight: BTreeSet<String>,
    /// The valid instants ([`valid_instants`]).
    pub valid: BTreeSet<String>,
}

impl BlockFilter {
    /// Whether a data block written at `instant` is read.
    fn reads(&self, instant: &str) -> bool {
        if self.reader == Reader::V8 {
            return instant <= self.latest.as_str() && self.valid.contains(instant);
        }
        let before_start = self
            .completed
            .first()
            .is_some_and(|first| instant < first.as_str());
        (self.completed.contains(instant) || before_start)
            && !self.inflight.contains(instant)
            && self.valid.contains(instant)
    }
}

/// An instant of a timeline as [`valid_instants`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineInstant {
    /// The requested time.
    pub time: String,
    /// The action (`deltacommit`, `rollback`, ...).
    pub action: String,
    /// Whether it is completed.
    pub completed: bool,
}

/// Hudi's `getValidInstantTimestamps`: the instants whose metadata-table blocks a reader counts.
/// `data` is the data table's active timeline, `rolled_back` the instants each completed data
/// table rollback or restore undid (by its instant), `mdt` the metadata table's timeline.
pub fn valid_instants(
    data: &[TimelineInstant],
    rolled_back: &BTreeMap<String, Vec<String>>,
    mdt: &[TimelineInstant],
) -> BTreeSet<String> {
    let mut valid: BTreeSet<String> = data
        .iter()
        .filter(|i| i.completed)
        .map(|i| i.time.clone())
        .collect();
    // Completed suffixed deltacommits of the metadata table (its own operations).
    valid.extend(
        mdt.iter()
            .filter(|i| i.completed && i.action == "deltacommit" && is_suffixed(&i.time))
            .map(|i| i.time.clone()),
    );
    add_undone(&mut valid, data, rolled_back, mdt);
    valid.extend(
        mdt.iter()
            .filter(|i| {
                i.completed && i.action == "deltacommit" && i.time.starts_with(SOLO_COMMIT_PREFIX)
            })
            .map(|i| i.time.clone()),
    );
    valid
}

/// What both releases add to the valid instants: the instants completed rollbacks and restores
/// after the earliest valid instant undid, and the metadata table's own completed rollbacks and
/// restores.
fn add_undone(
    valid: &mut BTreeSet<String>,
    data: &[TimelineInstant],
    rolled_back: &BTreeMap<String, Vec<String>>,
    mdt: &[TimelineInstant],
) {
    let earliest = valid
        .first()
        .cloned()
        .unwrap_or_else(|| format!("{SOLO_COMMIT_PREFIX}000"));
    for i in data.iter().filter(|i| {
        i.completed && (i.action == "rollback" || i.action == "restore") && i.time > earliest
    }) {
        if let Some(undone) = rolled_back.get(&i.time) {
            valid.extend(undone.iter().cloned());
        }
    }
    valid.extend(
        mdt.iter()
            .filter(|i| i.completed && (i.action == "rollback" || i.action == "restore"))
            .map(|i| i.time.clone()),
    );
}

/// Hudi 1.x's `getValidInstantTimestamps` (1.0.1 and 1.1.1 alike): as [`valid_instants`], but
/// every completed metadata-table deltacommit counts unless its instant is pending on the data
/// table (`isValidInstant`: a write that failed after its metadata-table deltacommit completed).
pub fn valid_instants_v8(
    data: &[TimelineInstant],
    rolled_back: &BTreeMap<String, Vec<String>>,
    mdt: &[TimelineInstant],
) -> BTreeSet<String> {
    let pending: BTreeSet<&str> = data
        .iter()
        .filter(|i| !i.completed)
        .map(|i| i.time.as_str())
        .collect();
    let mut valid: BTreeSet<String> = data
        .iter()
        .filter(|i| i.completed)
        .map(|i| i.time.clone())
        .collect();
    valid.extend(
        mdt.iter()
            .filter(|i| {
                i.completed && i.action == "deltacommit" && !pending.contains(i.time.as_str())
            })
            .map(|i| i.time.clone()),
    );
    add_undone(&mut valid, data, rolled_back, mdt);
    valid
}

/// Hudi's `isValidInstant` length check: a metadata-table instant with an operation suffix.
fn is_suffixed(time: &str) -> bool {
    time.len() == SUFFIXED_LEN && time.bytes().all(|b| b.is_ascii_digit())
}

/// Merge `new` over `old` as `HoodieMetadataPayload.combineFileSystemMetadata` does.
fn combine<K: Ord + Clone>(old: &mut FilesRecord<K>, new: &FilesRecord<K>) {
    for (name, info) in &new.files {
        match old.files.get(name).copied() {
            None => {
                old.files.insert(name.clone(), *info);
            }
            Some(prev) => {
                if info.deleted {
                    if prev.deleted {
                        old.files.insert(name.clone(), *info);
                    } else {
                        old.files.remove(name);
                    }
                } else {
                    old.files.insert(
                        name.clone(),
                        FileInfo {
                            size: info.size.max(prev.size),
                            deleted: false,
                        },
                    );
                }
            }
        }
    }
}

/// The records of the `files` partition as Hudi 0.15 reads them (see the module docs): `base`
/// are the base file's records, `blocks` the log blocks of the slice in log-file order.
/// Errors on records of one key with different types (Hudi refuses to combine them).
pub fn merge_files_partition<K: Ord + Clone>(
    base: Vec<(String, FilesRecord<K>)>,
    blocks: &[LogBlock<K>],
    filter: &BlockFilter,
) -> Result<BTreeMap<String, FilesRecord<K>>, String> {
    // The scan: data blocks queued, rollback blocks void queued blocks of their target.
    let mut queued: Vec<&LogBlock<K>> = Vec::new();
    for b in blocks {
        let instant = match b {
            LogBlock::Data { instant, .. } | LogBlock::Rollback { instant, .. } => instant,
        };
        if filter.reader == Reader::V6 && instant.as_str() > filter.latest.as_str() {
            break;
        }
        match b {
            LogBlock::Data { instant, .. } => {
                if filter.reads(instant) {
                    queued.push(b);
                }
            }
            LogBlock::Rollback { target, .. } => {
                queued
                    .retain(|q| !matches!(q, LogBlock::Data { instant, .. } if instant == target));
            }
        }
    }
    // The log records, merged oldest first.
    let mut logs: BTreeMap<String, FilesRecord<K>> = BTreeMap::new();
    for b in queued {
        let LogBlock::Data { records, .. } = b else {
            continue;
        };
        for (key, rec) in records {
            match logs.get_mut(key) {
                Some(prev) => {
                    same_type(key, prev, rec)?;
                    combine(prev, rec);
                }
                None => {
                    logs.insert(key.clone(), rec.clone());
                }
            }
        }
    }
    // Then over the base file's records.
    let mut out: BTreeMap<String, FilesRecord<K>> = base.into_iter().collect();
    for (key, rec) in logs {
        match out.get_mut(&key) {
            Some(prev) => {
                same_type(&key, prev, &rec)?;
                combine(prev, &rec);
            }
            None => {
                out.insert(key, rec);
            }
        }
    }
    Ok(out)
}

fn same_type<K>(key: &str, a: &FilesRecord<K>, b: &FilesRecord<K>) -> Result<(), String> {
    if a.record_type == b.record_type {
        Ok(())
    } else {
        Err(format!(
            "records of key `{key}` have types {} and {}",
            a.record_type, b.record_type
        ))
    }
}

/// The identifier of a partition in the `files` partition: its path, `.` for the table root.
fn partition_id(partition: &str) -> String {
    if partition.is_empty() {
        ".".to_string()
    } else {
        partition.to_string()
    }
}

/// The partitions the merged records list, as Hudi's `fetchAllPartitionPaths` returns them
/// (`""` for a non-partitioned table).
pub fn listed_partitions(merged: &BTreeMap<String, FilesRecord>) -> Vec<String> {
    listed_partitions_by(merged, |n| Some(n.clone())).unwrap_or_default()
}

/// [`listed_partitions`] of records keyed by `K`, each partition's name what `name` gives for
/// its key; `None` when it knows the name of one not.
pub fn listed_partitions_by<K>(
    merged: &BTreeMap<String, FilesRecord<K>>,
    name: impl Fn(&K) -> Option<String>,
) -> Option<Vec<String>> {
    let names: Vec<String> = match merged.get(ALL_PARTITIONS_KEY) {
        None => Vec::new(),
        Some(r) => r
            .files
            .iter()
            .filter(|(_, i)| !i.deleted)
            .map(|(n, _)| name(n))
            .collect::<Option<_>>()?,
    };
    Some(if names.len() == 1 && names[0] == "." {
        vec![String::new()]
    } else {
        names
    })
}

/// The data table as Hudi's `listAllPartitionsFromFilesystem` sees it, from a listing of every
/// file outside `.hoodie` (path relative to the table, size): partitions are the folders holding
/// a `.hoodie_partition_metadata` file (not below another partition), each with its data files
/// (base files `.parquet`, `.orc`, `.hfile`, and log files) by name.
pub fn partitions_on_storage(files: &[(RelPath, i64)]) -> BTreeMap<String, BTreeMap<String, i64>> {
    let marked: BTreeSet<String> = files
        .iter()
        .filter(|(p, _)| p.file_name().starts_with(".hoodie_partition_metadata"))
        .map(|(p, _)| p.parent().as_str().to_string())
        .collect();
    let nested = |p: &str| {
        marked.iter().any(|m| {
            m != p
                && (m.is_empty()
                    || p.strip_prefix(m.as_str())
                        .is_some_and(|r| r.starts_with('/')))
        })
    };
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = marked
        .iter()
        .filter(|p| !nested(p))
        .map(|p| (p.clone(), BTreeMap::new()))
        .collect();
    for (path, size) in files {
        let parent = path.parent().as_str().to_string();
        let Some(list) = out.get_mut(&parent) else {
            continue;
        };
        if is_data_file(path.file_name()) {
            list.insert(path.file_name().to_string(), *size);
        }
    }
    out
}

/// Hudi's `FSUtils.isDataFile`: a base file of a known format, or a log file.
fn is_data_file(name: &str) -> bool {
    match DataFile::parse(name) {
        Some(DataFile::Log { .. }) => true,
        Some(DataFile::Base { .. }) => [".parquet", ".orc", ".hfile"]
            .iter()
            .any(|ext| name.ends_with(ext)),
        None => false,
    }
}

/// The records of the deltacommit Hudi 0.15 writes after the metadata table's restore (by key;
/// empty when the metadata table matches storage): for every partition the merged records list,
/// a file-list record with the files storage has that the record lacks (their sizes) and the
/// files the record has that storage lacks (deleted); a partition storage no longer has gets
/// its files deleted and is deleted from the partition list.
pub fn out_of_sync_records(
    merged: &BTreeMap<String, FilesRecord>,
    storage: &BTreeMap<String, BTreeMap<String, i64>>,
) -> BTreeMap<String, FilesRecord> {
    let mut out = BTreeMap::new();
    let mut gone = Vec::new();
    for partition in listed_partitions(merged) {
        let id = partition_id(&partition);
        let listed: BTreeSet<&String> = merged
            .get(&id)
            .map(|r| {
                r.files
                    .iter()
                    .filter(|(_, i)| !i.deleted)
                    .map(|(n, _)| n)
                    .collect()
            })
            .unwrap_or_default();
        let mut files = BTreeMap::new();
        match storage.get(&partition) {
            None => {
                gone.push(id.clone());
                for n in listed {
                    files.insert(
                        n.clone(),
                        FileInfo {
                            size: 0,
                            deleted: true,
                        },
                    );
                }
            }
            Some(on_storage) => {
                for n in listed
                    .iter()
                    .filter(|n| !on_storage.contains_key(n.as_str()))
                {
                    files.insert(
                        (*n).clone(),
                        FileInfo {
                            size: 0,
                            deleted: true,
                        },
                    );
                }
                for (n, size) in on_storage {
                    if !listed.contains(n) {
                        files.insert(
                            n.clone(),
                            FileInfo {
                                size: *size,
                                deleted: false,
                            },
                        );
                    }
                }
            }
        }
        if !files.is_empty() {
            out.insert(
                id,
                FilesRecord {
                    record_type: FILE_LIST_TYPE,
                    files,
                },
            );
        }
    }
    if !gone.is_empty() {
        out.insert(
            ALL_PARTITIONS_KEY.to_string(),
            FilesRecord {
                record_type: PARTITION_LIST_TYPE,
                files: gone
                    .into_iter()
                    .map(|p| {
                        (
                            p,
                            FileInfo {
                                size: 0,
                                deleted: true,
                            },
                        )
                    })
                    .collect(),
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: i32, files: &[(&str, i64, bool)]) -> FilesRecord {
        FilesRecord {
            record_type: t,
            files: files
                .iter()
                .map(|(n, s, d)| {
                    (
                        n.to_string(),
                        FileInfo {
                            size: *s,
                            deleted: *d,
                        },
                    )
                })
                .collect(),
        }
    }

    fn data(instant: &str, records: Vec<(&str, FilesRecord)>) -> LogBlock {
        LogBlock::Data {
            instant: instant.into(),
            records: records
                .into_iter()
                .map(|(k, r)| (k.to_string(), r))
                .collect(),
        }
    }

    fn filter(latest: &str, completed: &[&str], valid: &[&str]) -> BlockFilter {
        BlockFilter {
            reader: Reader::V6,
            latest: latest.into(),
            completed: completed.iter().map(|s| s.to_string()).collect(),
            inflight: BTreeSet::new(),
            valid: valid.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn blocks_merge_oldest_first_and_over_the_base_file() {
        let base = vec![(
            "p0".to_string(),
            rec(2, &[("a", 10, false), ("b", 5, false)]),
        )];
        let blocks = vec![
            data(
                "2",
                vec![("p0", rec(2, &[("b", 7, false), ("c", 3, false)]))],
            ),
            data(
                "3",
                vec![("p0", rec(2, &[("a", 0, true), ("b", 6, false)]))],
            ),
        ];
        let f = filter("3", &["1", "2", "3"], &["1", "2", "3"]);
        let m = merge_files_partition(base, &blocks, &f).unwrap();
        assert_eq!(m["p0"], rec(2, &[("b", 7, false), ("c", 3, false)]));
    }

    #[test]
    fn a_file_added_then_deleted_in_the_logs_stays_listed_from_the_base_file_as_in_hudi() {
        // Hudi merges the log records first (the delete drops the addition, and the tombstone
        // with it), then over the base file: the base file's entry survives.
        let base = vec![("p0".to_string(), rec(2, &[("a", 10, false)]))];
        let blocks = vec![
            data("2", vec![("p0", rec(2, &[("a", 12, false)]))]),
            data("3", vec![("p0", rec(2, &[("a", 0, true)]))]),
        ];
        let f = filter("3", &["1", "2", "3"], &["1", "2", "3"]);
        let m = merge_files_partition(base, &blocks, &f).unwrap();
        assert_eq!(m["p0"], rec(2, &[("a", 10, false)]));
    }

    #[test]
    fn rollback_blocks_void_earlier_blocks_of_their_target_only() {
        let blocks = vec![
            data("2", vec![("p0", rec(2, &[("a", 1, false)]))]),
            data("3", vec![("p0", rec(2, &[("b", 1, false)]))]),
            LogBlock::Rollback {
                instant: "4".into(),
                target: "3".into(),
            },
            // A later block of the same instant (a retried write) is not voided.
            data("3", vec![("p0", rec(2, &[("c", 1, false)]))]),
        ];
        let f = filter("5", &["2", "3", "5"], &["2", "3", "5"]);
        let m = merge_files_partition(vec![], &blocks, &f).unwrap();
        assert_eq!(m["p0"], rec(2, &[("a", 1, false), ("c", 1, false)]));
    }

    #[test]
    fn uncommitted_invalid_and_too_new_blocks_are_not_read() {
        let blocks = vec![
            data("2", vec![("p0", rec(2, &[("a", 1, false)]))]),
            // not completed on the metadata table
            data("3", vec![("p0", rec(2, &[("b", 1, false)]))]),
            // completed there, but not valid for the data table (its write failed)
            data("4", vec![("p0", rec(2, &[("c", 1, false)]))]),
            // after the latest completed instant: the scan stops here
            data("7", vec![("p0", rec(2, &[("d", 1, false)]))]),
            data("5", vec![("p0", rec(2, &[("e", 1, false)]))]),
        ];
        let f = filter("6", &["2", "4", "5", "6"], &["2", "5", "6"]);
        let m = merge_files_partition(vec![], &blocks, &f).unwrap();
        assert_eq!(m["p0"], rec(2, &[("a", 1, false)]));
        // Blocks before the metadata table's timeline starts count (archived instants).
        let f = filter("6", &["5"], &["1", "5"]);
        let old = vec![data("1", vec![("p0", rec(2, &[("z", 1, false)]))])];
        assert_eq!(
            merge_files_partition(vec![], &old, &f).unwrap()["p0"],
            rec(2, &[("z", 1, false)])
        );
    }

    #[test]
    fn records_of_one_key_with_different_types_are_refused() {
        let blocks = vec![data("2", vec![("p0", rec(1, &[("a", 0, false)]))])];
        let base = vec![("p0".to_string(), rec(2, &[("b", 1, false)]))];
        let f = filter("2", &["2"], &["2"]);
        assert!(merge_files_partition(base, &blocks, &f).is_err());
    }

    #[test]
    fn valid_instants_follow_hudis_rules() {
        let i = |t: &str, a: &str, c: bool| TimelineInstant {
            time: t.into(),
            action: a.into(),
            completed: c,
        };
        let data = vec![
            i("20240101000000001", "deltacommit", true),
            i("20240101000000002", "deltacommit", false),
            i("20240101000000003", "rollback", true),
        ];
        let rolled_back = BTreeMap::from([(
            "20240101000000003".to_string(),
            vec!["20240101000000002".to_string()],
        )]);
        let mdt = vec![
            i("00000000000000010", "deltacommit", true),
            i("20240101000000001", "deltacommit", true),
            i("20240101000000001001", "commit", true),
            i("20240101000000001002", "deltacommit", true),
            i("20240101000000009", "deltacommit", true),
            i("20240101000000010", "restore", true),
            i("20240101000000011003", "deltacommit", false),
        ];
        let v = valid_instants(&data, &rolled_back, &mdt);
        let want: BTreeSet<String> = [
            "00000000000000010",
            "20240101000000001",
            "20240101000000001002",
            "20240101000000002",
            "20240101000000003",
            "20240101000000010",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn storage_partitions_are_folders_with_partition_metadata() {
        let p = |s: &str, n: i64| (RelPath::parse(s).unwrap(), n);
        let files = vec![
            p("p0/.hoodie_partition_metadata", 96),
            p("p0/a_0-0-0_1.parquet", 10),
            p("p0/.a_1.log.1_0-0-0", 20),
            p("p0/..a_1.log.1_0-0-0.crc", 1),
            p("p0/notes.txt", 1),
            p("p0/sub/.hoodie_partition_metadata", 96),
            p("p0/sub/b_0-0-0_1.parquet", 10),
            p("q/x_0-0-0_1.parquet", 10),
            p("2024/01/.hoodie_partition_metadata", 96),
        ];
        let m = partitions_on_storage(&files);
        assert_eq!(m.keys().collect::<Vec<_>>(), ["2024/01", "p0"]);
        assert_eq!(
            m["p0"],
            BTreeMap::from([
                (".a_1.log.1_0-0-0".to_string(), 20),
                ("a_0-0-0_1.parquet".to_string(), 10)
            ])
        );
        assert!(m["2024/01"].is_empty());
    }

    #[test]
    fn out_of_sync_records_add_missing_files_delete_stale_ones_and_drop_gone_partitions() {
        let merged = BTreeMap::from([
            (
                ALL_PARTITIONS_KEY.to_string(),
                rec(1, &[("p0", 0, false), ("p1", 0, false), ("p2", 0, false)]),
            ),
            (
                "p0".to_string(),
                rec(2, &[("a", 10, false), ("b", 5, false)]),
            ),
            ("p1".to_string(), rec(2, &[("c", 10, false)])),
            ("p2".to_string(), rec(2, &[("d", 10, false)])),
        ]);
        let storage = BTreeMap::from([
            (
                "p0".to_string(),
                BTreeMap::from([("a".to_string(), 11), (".l".to_string(), 105)]),
            ),
            ("p1".to_string(), BTreeMap::from([("c".to_string(), 10)])),
            // not in the metadata table's list: not added (Hudi looks only at listed ones)
            ("p3".to_string(), BTreeMap::from([("e".to_string(), 1)])),
        ]);
        let out = out_of_sync_records(&merged, &storage);
        assert_eq!(
            out,
            BTreeMap::from([
                (ALL_PARTITIONS_KEY.to_string(), rec(1, &[("p2", 0, true)])),
                (
                    "p0".to_string(),
                    rec(2, &[(".l", 105, false), ("b", 0, true)])
                ),
                ("p2".to_string(), rec(2, &[("d", 0, true)])),
            ])
        );
        // In sync: nothing to write.
        let same = BTreeMap::from([
            (
                "p0".to_string(),
                BTreeMap::from([("a".to_string(), 10), ("b".to_string(), 5)]),
            ),
            ("p1".to_string(), BTreeMap::from([("c".to_string(), 10)])),
            ("p2".to_string(), BTreeMap::from([("d".to_string(), 10)])),
        ]);
        assert!(out_of_sync_records(&merged, &same).is_empty());
    }

    #[test]
    fn a_non_partitioned_table_is_listed_under_dot() {
        let merged = BTreeMap::from([
            (ALL_PARTITIONS_KEY.to_string(), rec(1, &[(".", 0, false)])),
            (".".to_string(), rec(2, &[("a", 10, false)])),
        ]);
        let storage = BTreeMap::from([(
            String::new(),
            BTreeMap::from([("a".to_string(), 10), ("b".to_string(), 4)]),
        )]);
        let out = out_of_sync_records(&merged, &storage);
        assert_eq!(
            out,
            BTreeMap::from([(".".to_string(), rec(2, &[("b", 4, false)]))])
        );
    }
}
