//! The repair's journal: the files a repair is about to remove, written into the table before
//! the first of them goes, so that a repair cut off midway (a signal, a lost lock, a crash) is
//! resumed by the next one, from any machine, without auditing the table again.
//!
//! One JSON object per repair at `.hoodie/.hudi-keeper/repairs/<id>.json`, created if absent
//! under the table lock. Hudi's timeline loaders, archiver and cleaner never read that folder
//! (they read the timeline folder by its instants' file names). The journal is rewritten once
//! more when the repair finishes (`finished` set); the newest [`KEEP_FINISHED`] finished
//! journals are kept as a record of what repairs removed, older ones are deleted.
//!
//! A resumed journal's files are judged again like any candidate (classified again under the
//! lock, unchanged since they were listed, no link on the way); a file already gone counts as
//! removed by the repair that was cut off, since the listing or head that proves it absent is
//! the store's word. A journal that names a quarantine is resumed only with that quarantine.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::classify::Class;
use super::drift::MetadataTableListing;
use super::Candidate;
use crate::storage::{FileMeta, RelPath, Storage, StorageError};
use crate::Error;

/// Where journals are kept.
pub const JOURNAL_DIR: &str = ".hoodie/.hudi-keeper/repairs";
/// Finished journals kept as a record.
pub const KEEP_FINISHED: usize = 10;
/// The largest journal read back (a repair of [`super::MAX_CANDIDATES`] files writes about
/// 25 MiB).
const MAX_JOURNAL_BYTES: u64 = 64 * 1024 * 1024;
/// The journal format's version.
const VERSION: u32 = 1;

/// One file a journal names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFile {
    /// Table-relative path.
    pub path: String,
    /// Its size when listed.
    pub size: u64,
    /// Its modification time when listed.
    pub last_modified: DateTime<Utc>,
    /// Its class when classified.
    pub class: Class,
    /// The instants it was classified by.
    pub instants: Vec<String>,
}

/// A repair's journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// The format's version.
    pub version: u32,
    /// Its id (a timestamp, also its file name).
    pub id: String,
    /// When the repair started removing.
    pub started: DateTime<Utc>,
    /// When it finished (`None`: cut off, to be resumed).
    pub finished: Option<DateTime<Utc>>,
    /// The quarantine each file is copied to first, by URI.
    pub quarantine: Option<String>,
    /// The files it removes.
    pub files: Vec<JournalFile>,
}

impl Journal {
    /// A new journal of `candidates`.
    pub fn new(candidates: &[Candidate], quarantine: Option<&Storage>) -> Self {
        let started = Utc::now();
        Self {
            version: VERSION,
            id: started.format("%Y%m%d%H%M%S%3f").to_string(),
            started,
            finished: None,
            quarantine: quarantine.map(|q| q.uri().to_string()),
            files: candidates
                .iter()
                .map(|c| JournalFile {
                    path: c.meta.path.to_string(),
                    size: c.meta.size,
                    last_modified: c.meta.last_modified,
                    class: c.class,
                    instants: c.instants.clone(),
                })
                .collect(),
        }
    }

    /// Its path in the table.
    pub fn path(&self) -> Result<RelPath, StorageError> {
        journal_path(&self.id)
    }

    /// Its files as candidates; a path that is no valid table path (a hand-edited journal) is
    /// left out and returned apart.
    pub fn candidates(&self) -> (Vec<Candidate>, Vec<String>) {
        let mut out = Vec::new();
        let mut invalid = Vec::new();
        for f in &self.files {
            match RelPath::parse(&f.path) {
                Ok(path) if !path.as_str().starts_with(".hoodie") => out.push(Candidate {
                    meta: FileMeta {
                        path,
                        size: f.size,
                        last_modified: f.last_modified,
                    },
                    instants: f.instants.clone(),
                    class: f.class,
                    // Not kept in the journal: the resuming repair's audit says.
                    metadata_table: MetadataTableListing::Unknown,
                }),
                _ => invalid.push(f.path.clone()),
            }
        }
        (out, invalid)
    }

    fn to_bytes(&self) -> Result<Bytes, Error> {
        serde_json::to_vec_pretty(self)
            .map(Bytes::from)
            .map_err(|e| Error::Journal {
                path: journal_path(&self.id)
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                reason: e.to_string(),
            })
    }

    /// Write it, before the first file goes: create-if-absent (ids are unique per millisecond;
    /// a clash fails the repair before anything changed).
    pub async fn create(&self, storage: &Storage) -> Result<(), Error> {
        storage
            .put_if_absent(&self.path()?, self.to_bytes()?)
            .await?;
        Ok(())
    }

    /// Mark it finished.
    pub async fn finish(&mut self, storage: &Storage) -> Result<(), Error> {
        self.finished = Some(Utc::now());
        storage.put(&self.path()?, self.to_bytes()?).await?;
        Ok(())
    }
}

fn journal_path(id: &str) -> Result<RelPath, StorageError> {
    RelPath::parse(&format!("{JOURNAL_DIR}/{id}.json")).map_err(StorageError::from)
}

/// The journals in the table, oldest first. A journal that cannot be read or parsed is an
/// error: it may name files a cut-off repair was removing, and the repair does not go on
/// without knowing (the operator moves it away after looking).
pub async fn read_journals(storage: &Storage) -> Result<Vec<Journal>, Error> {
    let dir = RelPath::parse(JOURNAL_DIR).map_err(StorageError::from)?;
    let mut listed = storage.list_dir(&dir).await?.files;
    listed.retain(|m| m.file_name().ends_with(".json"));
    listed.sort_by(|a, b| a.path.as_str().cmp(b.path.as_str()));
    let mut out = Vec::with_capacity(listed.len());
    for m in listed {
        let unreadable = |reason: String| Error::Journal {
            path: m.path.to_string(),
            reason,
        };
        let bytes = match storage.get_opt_capped(&m.path, MAX_JOURNAL_BYTES).await {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(StorageError::TooLarge { .. }) => {
                return Err(unreadable(format!(
                    "larger than the {MAX_JOURNAL_BYTES} bytes a journal may be"
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let journal: Journal =
            serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
        if journal.version != VERSION {
            return Err(unreadable(format!(
                "journal format version {} (this hudi-keeper writes {VERSION})",
                journal.version
            )));
        }
        if journal_path(&journal.id).ok().as_ref() != Some(&m.path) {
            return Err(unreadable(format!(
                "its id {} does not match its name",
                journal.id
            )));
        }
        out.push(journal);
    }
    Ok(out)
}

/// Delete finished journals beyond the newest [`KEEP_FINISHED`].
pub async fn prune(storage: &Storage, journals: &[Journal]) -> Result<usize, Error> {
    let finished: Vec<&Journal> = journals.iter().filter(|j| j.finished.is_some()).collect();
    let excess = finished.len().saturating_sub(KEEP_FINISHED);
    for j in &finished[..excess] {
        storage.delete(&j.path()?).await?;
    }
    Ok(excess)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(path: &str) -> Candidate {
        Candidate {
            meta: FileMeta {
                path: RelPath::parse(path).expect("test path"),
                size: 7,
                last_modified: DateTime::from_timestamp(1_700_000_000, 0).expect("time"),
            },
            instants: vec!["20240101000000000".into()],
            class: Class::Orphan,
            metadata_table: MetadataTableListing::NoMetadataTable,
        }
    }

    #[test]
    fn a_journal_round_trips_and_gives_back_its_candidates() {
        let j = Journal::new(&[candidate("p/a_1-0-0_20240101000000000.parquet")], None);
        let bytes = j.to_bytes().expect("json");
        let back: Journal = serde_json::from_slice(&bytes).expect("parse");
        assert_eq!(back, j);
        let (c, invalid) = back.candidates();
        assert!(invalid.is_empty());
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].meta.path.as_str(),
            "p/a_1-0-0_20240101000000000.parquet"
        );
        assert_eq!(c[0].meta.size, 7);
        assert_eq!(c[0].class, Class::Orphan);
    }

    #[test]
    fn a_hand_edited_path_into_the_timeline_or_out_of_the_table_is_left_out() {
        let mut j = Journal::new(&[candidate("p/a.parquet")], None);
        for bad in ["../x.parquet", ".hoodie/20240101000000000.commit", "/abs"] {
            let mut f = j.files[0].clone();
            f.path = bad.into();
            j.files.push(f);
        }
        let (c, invalid) = j.candidates();
        assert_eq!(c.len(), 1);
        assert_eq!(invalid.len(), 3, "{invalid:?}");
    }
}
