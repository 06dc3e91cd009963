//! The archived timeline: the instants Hudi's archiver moved off the active timeline.
//!
//! Where it lives (hudi-format.md §1.8, checked against real Hudi 0.15, 1.0, 1.1 and 1.2):
//!
//! * Layout 1 (table version 6): `.hoodie/<hoodie.archivelog.folder>` (`archived`), Hudi log
//!   files `.commits_.archive.<N>_<token>` of Avro data blocks (block type 3) whose records are
//!   `HoodieArchivedMetaEntry`, written under the schema in the block's `SCHEMA` header. The
//!   archiver writes one record per timeline file of an instant (requested, inflight, completed),
//!   each with its `actionState`; a completed rollback's record carries its
//!   `hoodieRollbackMetadata`.
//! * Layout 2 (versions 8 and 9): the LSM timeline in `<timeline>/<hoodie.timeline.history.path>`
//!   (`.hoodie/timeline/history`): `_version_` names the latest `manifest_<N>`, whose JSON lists
//!   the live `<min>_<max>_<level>.parquet` files; each row is a `HoodieLSMTimelineInstant`
//!   (completed instants only), whose `metadata` holds the completed file's bytes (Avro for
//!   rollbacks and restores). Tables upgraded from layout 1 may also keep the layout-1 folder,
//!   which is read too.
//!
//! Nothing is skipped silently: a folder that cannot be listed, or a file that cannot be read or
//! parsed, is named in [`ArchivedTimeline::unread`] and makes the timeline not
//! [`complete`](ArchivedTimeline::complete); what could be read is still returned.

mod lsm;
mod lsm_parquet;
mod parquet_check;
mod v6;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::TimelineLayout;
use crate::error::Error;
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;
use crate::storage::{RelPath, Storage, StorageError};
use crate::table::Table;
use crate::timeline::Action;

/// One instant of the archived timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchivedInstant {
    /// The instant (requested) time.
    pub requested_time: String,
    /// Hudi's action name as archived: "commit", "deltacommit", "replacecommit", "clean",
    /// "rollback", "restore", "savepoint", "compaction", "clustering", ... For an instant archived
    /// in several states (layout 1), the action of its latest state (a completed compaction is a
    /// "commit").
    pub action: String,
    /// Completed (true) or archived while pending / as a pending state (false), as the archive
    /// says.
    pub completed: bool,
    /// v8/v9: its completion time where archived; v6: None.
    pub completion_time: Option<String>,
    /// For completed rollbacks and restores: the instants they rolled back (rollback metadata
    /// `commitsRollback`; restore metadata: `instantsToRollback` and every child rollback's
    /// `commitsRollback`), sorted, without duplicates. Empty otherwise.
    pub rolled_back: Vec<String>,
}

/// The archived timeline of a table, as far as it could be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArchivedTimeline {
    /// Sorted by requested time (then action).
    pub instants: Vec<ArchivedInstant>,
    /// Every archive location was listed and every file in it parsed.
    pub complete: bool,
    /// `(path, why)` of what could not be read; non-empty iff `!complete`.
    pub unread: Vec<(String, String)>,
    /// The archive locations looked at (relative paths), whether present or not.
    pub locations: Vec<String>,
}

/// Why part of the archived timeline could not be read (kept, as text, in
/// [`ArchivedTimeline::unread`]).
#[derive(Debug, thiserror::Error)]
pub enum ArchivedError {
    /// An archive folder could not be listed.
    #[error("table `{table}`: could not list `{path}`: {source}")]
    List {
        /// The table URI.
        table: String,
        /// The folder, relative to the table.
        path: String,
        /// The storage error.
        #[source]
        source: StorageError,
    },
    /// An archive file could not be read.
    #[error("table `{table}`: could not read `{path}`: {source}")]
    Read {
        /// The table URI.
        table: String,
        /// The file, relative to the table.
        path: String,
        /// The storage error.
        #[source]
        source: StorageError,
    },
    /// An archive file is not what Hudi writes there (damaged, truncated, or unsupported).
    #[error("table `{table}`: `{path}` is not a readable archive file: {reason}")]
    Corrupt {
        /// The table URI.
        table: String,
        /// The file, relative to the table.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ArchivedError {
    fn path(&self) -> &str {
        match self {
            ArchivedError::List { path, .. }
            | ArchivedError::Read { path, .. }
            | ArchivedError::Corrupt { path, .. } => path,
        }
    }
}

/// The state an entry was archived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EntryState {
    Requested,
    Inflight,
    Completed,
}

/// One archived record, before the records of an instant are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub requested_time: String,
    pub action: String,
    pub state: EntryState,
    pub completion_time: Option<String>,
    pub rolled_back: Vec<String>,
    /// Why this record is only partly known (a completed rollback archived without the metadata
    /// that says what it rolled back), if it is.
    pub incomplete: Option<String>,
}

/// The most bytes read of one archive file (a layout-1 log file or an LSM parquet file):
/// Hudi rolls archive log files over at 1 GB only in theory; in practice archive files are a
/// few MB. A larger file is reported as unread.
pub(crate) const MAX_ARCHIVE_FILE: u64 = 256 << 20;

/// What a reading pass collected.
pub(crate) struct Reading<'a> {
    pub storage: &'a Storage,
    pub table: &'a str,
    pub entries: Vec<Entry>,
    pub unread: Vec<ArchivedError>,
}

impl Reading<'_> {
    pub(crate) fn corrupt(&mut self, path: &RelPath, reason: impl Into<String>) {
        self.unread.push(ArchivedError::Corrupt {
            table: self.table.to_string(),
            path: path.to_string(),
            reason: reason.into(),
        });
    }

    /// Keep the entries of a file, noting those only partly known.
    pub(crate) fn add(&mut self, path: &RelPath, entries: Vec<Entry>) {
        for e in entries {
            if let Some(why) = &e.incomplete {
                self.corrupt(path, why.clone());
            }
            self.entries.push(e);
        }
    }

    /// Read a whole file, or note why not.
    pub(crate) async fn read(&mut self, path: &RelPath) -> Option<bytes::Bytes> {
        match self.storage.get_capped(path, MAX_ARCHIVE_FILE).await {
            Ok(b) => Some(b),
            Err(source) => {
                self.unread.push(ArchivedError::Read {
                    table: self.table.to_string(),
                    path: path.to_string(),
                    source,
                });
                None
            }
        }
    }
}

/// Read the archived timeline of `table`: every archive location its layout has (see the module
/// documentation). `Err` only for a table configuration that names no usable folder; storage and
/// format problems are reported in the result.
pub async fn read_archived_timeline(table: &Table) -> Result<ArchivedTimeline, Error> {
    let config = table.config();
    let parse = |p: &str| RelPath::parse(p).map_err(StorageError::from);
    let legacy = parse(&config.archive_dir)?;
    let history = match (config.timeline_layout, &config.history_dir) {
        (TimelineLayout::V2, Some(h)) => Some(parse(h)?),
        _ => None,
    };
    let mut reading = Reading {
        storage: table.storage(),
        table: table.uri(),
        entries: Vec::new(),
        unread: Vec::new(),
    };
    let mut locations = vec![legacy.to_string()];
    v6::read_folder(&mut reading, &legacy).await;
    if let Some(history) = history {
        locations.push(history.to_string());
        lsm::read_folder(&mut reading, &history).await;
    }
    let unread: Vec<(String, String)> = reading
        .unread
        .iter()
        .map(|e| (e.path().to_string(), e.to_string()))
        .collect();
    for e in &reading.unread {
        tracing::warn!(table = %table.uri(), error = %e, "archived timeline not read whole");
    }
    Ok(ArchivedTimeline {
        instants: merge(reading.entries),
        complete: unread.is_empty(),
        unread,
        locations,
    })
}

/// The family an action's states share (a compaction completes as a commit).
fn family(action: &str) -> String {
    match action.parse::<Action>() {
        Ok(a) => a.completed_action().as_str().to_string(),
        Err(_) => action.to_string(),
    }
}

/// One instant per requested time and action family: its latest archived state (a completed
/// record wins), the completion time and rolled-back instants of any of its records.
pub(crate) fn merge(entries: Vec<Entry>) -> Vec<ArchivedInstant> {
    let mut groups: BTreeMap<(String, String), Vec<Entry>> = BTreeMap::new();
    for e in entries {
        groups
            .entry((e.requested_time.clone(), family(&e.action)))
            .or_default()
            .push(e);
    }
    let mut out: Vec<ArchivedInstant> = groups
        .into_values()
        .filter_map(|mut es| {
            es.sort_by_key(|e| e.state);
            let latest = es.last()?;
            let mut rolled_back: Vec<String> =
                es.iter().flat_map(|e| e.rolled_back.clone()).collect();
            rolled_back.sort();
            rolled_back.dedup();
            Some(ArchivedInstant {
                requested_time: latest.requested_time.clone(),
                action: latest.action.clone(),
                completed: latest.state == EntryState::Completed,
                completion_time: es.iter().rev().find_map(|e| e.completion_time.clone()),
                rolled_back,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.requested_time, &a.action).cmp(&(&b.requested_time, &b.action)));
    out
}

/// What a completed rollback or restore rolled back, from its metadata as Avro values.
pub(crate) fn rolled_back_of_rollback(m: &RollbackMetadata) -> Vec<String> {
    m.commits_rollback.clone()
}

/// What a completed restore rolled back: its `instantsToRollback` and every child rollback's
/// `commitsRollback`.
pub(crate) fn rolled_back_of_restore(m: &RestoreMetadata) -> Vec<String> {
    let mut out = m.instants_to_rollback.clone();
    for child in m.hoodie_restore_metadata.values().flatten() {
        out.extend(child.commits_rollback.iter().cloned());
    }
    out
}
