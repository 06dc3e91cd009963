//! The `files` partition's log as every table version of the 0.x line writes into it: its one
//! file group's latest committed file slice, and a metadata-table deltacommit completed with one
//! HFile data block of files-partition records appended to that slice as a new log version.
//! Shared by the rollback and restore of table version 6 (Hudi 0.15, [`super::v6`],
//! [`super::v6_restore`]), of version 5 (Hudi 0.13, [`super::v5`]), and the audit's reader
//! ([`super::files_partition`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::exec::log_append::{append_block, Slice, Versioning};
use crate::exec::steps::{delete_folder, refused};
use crate::exec::timeline_ops::{create_if_absent, timeline_file};
use crate::format::commit::{json_deltacommit_metadata, json_schema_of, AppendedLog};
use crate::format::log_block::{hfile_data_block, read_block_headers, BLOCK_TYPE_HFILE_DATA};
use crate::format::metadata_record::{log_block_schema, METADATA_RECORD_SCHEMA_V6};
use crate::protocol::markers::marker_dir;
use crate::storage::{RelPath, StorageError};
use crate::table::files::DataFile;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// The metadata-table partition that lists files.
pub(super) const FILES: &str = "files";
/// The write token of the log file a metadata-table deltacommit appends (Hudi 0.15's).
const DELTACOMMIT_WRITE_TOKEN: &str = "0-0-0";
/// The header key of a log block's instant time.
const HEADER_INSTANT_TIME: i32 = 0;
/// The latest committed file slice of the `files` partition's one file group: (file id, base
/// instant, base file name, log file names), or why there is none to append to. A slice counts
/// once the instant that started it (the initialization's deltacommit, a compaction's commit)
/// completed, or it is older than the active timeline: Hudi's file-system view ignores the
/// slice of a compaction that never completed, and so a block appended there.
pub(super) async fn files_slice(mdt: &Table) -> Result<Result<FilesSlice, String>, Error> {
    let part = RelPath::parse(FILES).map_err(StorageError::from)?;
    let listing = mdt.storage().list_dir(&part).await?;
    let timeline = mdt.timeline().await?;
    let committed = |b: &str| {
        timeline.find(b).any(|i| !i.is_pending())
            || timeline
                .instants()
                .first()
                .is_some_and(|first| b < first.requested_time.as_str())
    };
    // file group -> base instant -> slice
    let mut groups: BTreeMap<String, BTreeMap<String, FilesSlice>> = BTreeMap::new();
    for m in &listing.files {
        let Some(f) = DataFile::parse(m.file_name()) else {
            continue;
        };
        let s = groups
            .entry(f.file_id().to_string())
            .or_default()
            .entry(f.instant().to_string())
            .or_insert_with(|| FilesSlice {
                file_id: f.file_id().to_string(),
                base_instant: f.instant().to_string(),
                ..Default::default()
            });
        match f {
            DataFile::Base { .. } => s.base_file = Some(m.file_name().to_string()),
            DataFile::Log { version, .. } => s.logs.push((version, m.file_name().to_string())),
        }
    }
    let mut latest = groups
        .into_values()
        .map(|slices| slices.into_values().rfind(|s| committed(&s.base_instant)));
    Ok(match (latest.next(), latest.next()) {
        (Some(Some(mut s)), None) => {
            s.logs.sort();
            Ok(s)
        }
        (Some(None), None) => Err("the metadata table's `files` file group has no committed file slice to record the rollback in".into()),
        (None, _) => Err("the metadata table's `files` partition has no file group to record the rollback in".into()),
        (Some(_), Some(_)) => Err("the metadata table's `files` partition has more than one file group, which Hudi 0.13 and 0.15 do not write; hudi-keeper does not know which one to record the rollback in".into()),
    })
}

#[derive(Debug, Clone, Default)]
pub(super) struct FilesSlice {
    pub(super) file_id: String,
    pub(super) base_instant: String,
    pub(super) base_file: Option<String>,
    /// (version, name)
    pub(super) logs: Vec<(u32, String)>,
}

/// Whether `bytes` is one HFile data block written for instant `r`.
fn is_data_block_for(bytes: &[u8], r: &str) -> bool {
    match read_block_headers(bytes).as_deref() {
        Some([h]) => {
            h.block_type == BLOCK_TYPE_HFILE_DATA
                && h.entries
                    .iter()
                    .any(|(k, v)| *k == HEADER_INSTANT_TIME && v == r)
        }
        _ => false,
    }
}

/// Complete the metadata-table deltacommit `s` (its requested and inflight files exist): `rows`
/// (files-partition records by key, in the block schema of the metadata table's version), if
/// any, as one HFile data block appended to the `files`
/// slice as a new log version (an earlier attempt's block is found through its marker and
/// reused), then the completed file with that log file's write stat (none without rows), then
/// its marker folder removed. Errors name `t`, the instant the deltacommit is written for.
pub(super) async fn complete_files_deltacommit(
    mdt: &Table,
    timeline: &Timeline,
    t: &str,
    s: &str,
    rows: &BTreeMap<String, Vec<u8>>,
) -> Result<(), Error> {
    let storage = mdt.storage();
    let mut appended = Vec::new();
    if !rows.is_empty() {
        let slice = files_slice(mdt)
            .await?
            .map_err(|why| refused(mdt, t, why))?;
        let schema = log_block_schema(mdt.config().version.metadata_schema());
        let block = hfile_data_block(s, schema, rows).map_err(|e| {
            refused(
                mdt,
                t,
                format!("the metadata table's records could not be written as an HFile: {e}"),
            )
        })?;
        let (rel, size) = append_block(
            storage,
            t,
            &marker_dir(s)?,
            &Slice {
                partition: FILES,
                file_id: &slice.file_id,
                base_instant: &slice.base_instant,
                write_token: DELTACOMMIT_WRITE_TOKEN,
                versioning: Versioning::AfterLatest,
            },
            &block,
            &BTreeSet::new(),
            |bytes| is_data_block_for(bytes, s),
        )
        .await?;
        let log_version = match DataFile::parse(rel.file_name()) {
            Some(DataFile::Log { version, .. }) => version,
            _ => 0,
        };
        appended.push(AppendedLog {
            partition: FILES.to_string(),
            file_id: slice.file_id.clone(),
            base_instant: slice.base_instant.clone(),
            base_file: slice.base_file.clone(),
            earlier_logs: slice
                .logs
                .iter()
                .filter(|(v, _)| *v < log_version)
                .map(|(_, n)| n.clone())
                .collect(),
            log_file: rel.file_name().to_string(),
            log_version,
            size,
            records: rows.len() as i64,
        });
    }
    let schema = latest_schema(mdt, timeline).await?;
    let bytes = json_deltacommit_metadata(&appended, &schema);
    let path = timeline_file(mdt.config(), s, None, Action::DeltaCommit, State::Completed)?;
    mdt.stop_point("before completing the metadata table's deltacommit", None)?;
    create_if_absent(storage, &path, bytes).await?;
    delete_folder(storage, &marker_dir(s)?).await?;
    Ok(())
}

/// The record schema the metadata table's deltacommits record in `extraMetadata` (its latest
/// completed deltacommit's), else Hudi 0.15's.
async fn latest_schema(mdt: &Table, timeline: &Timeline) -> Result<String, Error> {
    let latest = timeline
        .completed()
        .filter(|i| i.action == Action::DeltaCommit)
        .filter_map(|i| i.file(State::Completed))
        .max_by(|a, b| a.name.requested_time.cmp(&b.name.requested_time));
    if let Some(f) = latest {
        if let Some(s) = json_schema_of(&mdt.storage().get(&f.path).await?) {
            return Ok(s);
        }
    }
    Ok(METADATA_RECORD_SCHEMA_V6.trim().to_string())
}
