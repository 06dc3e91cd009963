//! The audit's report: counts and bytes per class, overall and per partition, the oldest file of
//! each class, and examples of every class but `committed`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::classify::{Class, Verdict};
use super::drift::MetadataTableCheck;
use super::drift::MetadataTableListing;
use crate::storage::FileMeta;
use crate::table::Table;

/// Files and bytes of one class.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Files.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The oldest modification time among them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_modified: Option<DateTime<Utc>>,
}

impl Counts {
    fn add(&mut self, m: &FileMeta) {
        self.files += 1;
        self.bytes += m.size;
        if self.oldest_modified.is_none_or(|o| m.last_modified < o) {
            self.oldest_modified = Some(m.last_modified);
        }
    }
}

/// One file of a class, as an example.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// Table-relative path.
    pub path: String,
    /// The instant its name carries.
    pub instant: String,
    /// Bytes.
    pub size: u64,
    /// Its modification time.
    pub last_modified: DateTime<Utc>,
    /// Why it is in its class.
    pub reason: String,
}

/// A file the repair may remove (a leftover or an orphan), as the audit classified it.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The file as listed.
    pub meta: FileMeta,
    /// The instants it was classified by: the one its name carries, or (a version-6 log file
    /// that no metadata names) those of its blocks.
    pub instants: Vec<String>,
    /// Its class.
    pub class: Class,
    /// Whether the metadata table lists it.
    pub metadata_table: MetadataTableListing,
}

/// Where the archived timeline was looked for, and whether it was read whole.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArchiveSummary {
    /// The archive locations (table-relative).
    pub locations: Vec<String>,
    /// Whether every location was read whole: only then is a file an orphan.
    pub complete: bool,
    /// Instants read from it.
    pub instants: usize,
    /// What was not read, and why.
    pub unread: Vec<(String, String)>,
}

/// What `hudi-keeper audit` found.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// The table URI.
    pub table: String,
    /// `hoodie.table.version`.
    pub table_version: u32,
    /// The oldest requested time on the active timeline.
    pub oldest_active_instant: Option<String>,
    /// The archived timeline.
    pub archive: ArchiveSummary,
    /// Completed rollbacks and restores whose metadata could not be read (path, why): while any,
    /// no file is called an orphan.
    pub unreadable_metadata: Vec<(String, String)>,
    /// Data files per class (every class, zero included).
    pub classes: BTreeMap<Class, Counts>,
    /// Data files per partition (`""`: the base path itself) and class.
    pub partitions: BTreeMap<String, BTreeMap<Class, Counts>>,
    /// Up to the asked number of files per class, but `committed`.
    pub examples: BTreeMap<Class, Vec<Example>>,
    /// Files in the partitions that are no data files (`.hoodie_partition_metadata`, `.crc`, …).
    pub other_files: u64,
    /// Version-6 log files that no write stats name, opened to read their blocks' instants.
    pub logs_opened: u64,
    /// The metadata table's `files` partition against the store.
    pub metadata_table: MetadataTableCheck,
    /// With [`super::AuditOptions::collect`]: every leftover and orphan, up to
    /// [`super::MAX_CANDIDATES`] (for the repair).
    #[serde(skip)]
    pub candidates: Vec<Candidate>,
    /// More leftovers and orphans were found than [`super::MAX_CANDIDATES`].
    #[serde(skip)]
    pub candidates_truncated: bool,
}

impl AuditReport {
    /// An empty report of `table`, with what was read before the listing.
    pub(super) fn new(
        table: &Table,
        oldest_active_instant: Option<String>,
        archive: ArchiveSummary,
        unreadable_metadata: Vec<(String, String)>,
    ) -> Self {
        Self {
            table: table.uri().to_string(),
            table_version: table.config().version.number(),
            oldest_active_instant,
            archive,
            unreadable_metadata,
            classes: Class::ALL.iter().map(|c| (*c, Counts::default())).collect(),
            partitions: BTreeMap::new(),
            examples: BTreeMap::new(),
            other_files: 0,
            logs_opened: 0,
            metadata_table: MetadataTableCheck::default(),
            candidates: Vec::new(),
            candidates_truncated: false,
        }
    }

    /// Count `m`, of `instants` (the first named in examples), in `v`'s class; keep it as a
    /// candidate when `collect` and it is a leftover or an orphan.
    pub(super) fn add(
        &mut self,
        m: &FileMeta,
        instants: &[String],
        v: Verdict,
        metadata_table: MetadataTableListing,
        examples: usize,
        collect: bool,
    ) {
        let instant = instants.first().map(String::as_str).unwrap_or_default();
        if collect && matches!(v.class, Class::RollbackLeftover | Class::Orphan) {
            if self.candidates.len() < super::MAX_CANDIDATES {
                self.candidates.push(Candidate {
                    meta: m.clone(),
                    instants: instants.to_vec(),
                    class: v.class,
                    metadata_table,
                });
            } else {
                self.candidates_truncated = true;
            }
        }
        self.classes.entry(v.class).or_default().add(m);
        let partition = m.path.parent().to_string();
        self.partitions
            .entry(partition)
            .or_default()
            .entry(v.class)
            .or_default()
            .add(m);
        if v.class != Class::Committed {
            let kept = self.examples.entry(v.class).or_default();
            if kept.len() < examples {
                kept.push(Example {
                    path: m.path.to_string(),
                    instant: instant.to_string(),
                    size: m.size,
                    last_modified: m.last_modified,
                    reason: v.reason,
                });
            }
        }
    }

    /// The counts of one class.
    pub fn count(&self, class: Class) -> Counts {
        self.classes.get(&class).cloned().unwrap_or_default()
    }

    /// Data files of every class.
    pub fn data_files(&self) -> u64 {
        self.classes.values().map(|c| c.files).sum()
    }
}
