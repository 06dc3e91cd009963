//! The table audit (`hudi-keeper audit`): every data file, base and log, in every partition,
//! classified by the instant that wrote it ([`Class`]): committed, pending, left behind by a
//! rollback, orphaned, or unknown. Read-only: it lists the table once (every top-level folder
//! but `.hoodie/`, streamed: only counts and examples are held), and reads the timeline, the
//! completed rollbacks' and restores' metadata, and (table version 6, merge-on-read) the write
//! stats of completed deltacommits, which name the log files they appended to. Only a log file
//! that no metadata explains is opened, for the instants in its blocks' headers.
//!
//! Beside the classes, the metadata table's `files` partition is compared with the store
//! ([`metadata_table`], [`drift`]): per partition, the files it lists that the store lacks and
//! the committed files it does not list ([`AuditReport::metadata_table`]).

pub mod classify;
pub mod drift;
pub mod guard;
pub mod journal;
mod knowledge;
mod metadata_table;
pub mod repair;
pub mod repair_metadata_table;
mod report;

use tracing::{info, info_span, Instrument};

pub use classify::{Class, Knowledge, Verdict};
pub use drift::{MetadataTableCheck, MetadataTableListing, PartitionDrift};
pub use report::{ArchiveSummary, AuditReport, Candidate, Counts, Example};

use crate::format::log_block::read_block_headers;
use crate::storage::{FileMeta, RelPath, StorageError};
use crate::table::files::DataFile;
use crate::table::Table;
use crate::Error;

/// How an audit runs.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Examples kept per class (never for `committed`).
    pub examples: usize,
    /// The largest log file opened to read its blocks' instants; a larger one that no metadata
    /// explains is `unknown`.
    pub max_log_read: u64,
    /// Keep every leftover and orphan in [`AuditReport::candidates`] (for the repair).
    pub collect: bool,
}

/// The most leftovers and orphans one audit keeps for a repair; a repair of more takes reruns.
pub const MAX_CANDIDATES: usize = 100_000;

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            examples: 10,
            max_log_read: 256 * 1024 * 1024,
            collect: false,
        }
    }
}

/// The header key of a log block's instant (`INSTANT_TIME`).
const HEADER_INSTANT_TIME: i32 = 0;

/// Whether the keys of the folder `dir` (directly below the base path) sort before those of
/// `.hoodie/`, so that a listing starting past `.hoodie/` never reaches them: compared with the
/// `/` that follows the name in every key (`.hoodie-old/` and `.hoodie.bak/` do, `.hoodie0/`
/// and `.hoodie_x/` do not).
fn sorts_before_hoodie(dir: &str) -> bool {
    format!("{dir}/").as_str() < ".hoodie/"
}

/// Audit `table`: see the module documentation.
pub async fn audit(table: &Table, options: &AuditOptions) -> Result<AuditReport, Error> {
    let span = info_span!("audit", table = %table.config().name);
    async {
        let gathered = knowledge::gather(table).await?;
        let v6_logs = table.config().version.is_0x();
        let mut report = AuditReport::new(
            table,
            gathered.knowledge.oldest_active.clone(),
            gathered.archive.clone(),
            gathered.unreadable.clone(),
        );
        let mut check = metadata_table::prepare(table, options.examples).await?;
        let storage = table.storage();
        let root = storage.list_dir(&RelPath::root()).await?;
        let mut judge = Judge::new(&gathered, v6_logs);
        let mut add = |m: &FileMeta| -> bool {
            let partition = m.path.parent();
            match judge.judge(m) {
                Judged::NotData => {
                    check.see(partition.as_str(), m.file_name(), false);
                    report.other_files += 1;
                }
                // Seen now; whether it counts as not listed, once its class is known.
                Judged::Open => {
                    check.see(partition.as_str(), m.file_name(), false);
                }
                Judged::Verdict(v, instant) => {
                    // A failed log file its rollback undid in place is committed, but no
                    // metadata table lists it.
                    let in_place = gathered
                        .knowledge
                        .undone_in_place(m.path.as_str(), &instant);
                    let listing = see(&mut check, m, v.class, in_place);
                    report.add(m, &[instant], v, listing, options.examples, options.collect);
                }
            }
            false
        };
        for f in &root.files {
            add(f);
        }
        if storage.lists_past_a_folder() {
            // An object store: the folders whose keys sort before `.hoodie/`'s (rare; a
            // `.hoodie-old/` too, as `-` sorts before `/`) one by one, then one listing of
            // everything past it, about one request per 1,000 keys however small the
            // partitions (the files directly below the base path were seen above).
            for dir in root.dirs.iter().filter(|d| sorts_before_hoodie(d)) {
                let prefix = RelPath::root().join(dir).map_err(StorageError::from)?;
                storage.list_filtered(&prefix, &mut add).await?;
            }
            storage
                .list_filtered_past(&RelPath::root(), ".hoodie", |m| {
                    !m.path.parent().as_str().is_empty() && add(m)
                })
                .await?;
        } else {
            for dir in root.dirs.iter().filter(|d| d.as_str() != ".hoodie") {
                let prefix = RelPath::root().join(dir).map_err(StorageError::from)?;
                storage.list_filtered(&prefix, &mut add).await?;
            }
        }
        let to_open = judge.to_open;
        for (m, name_instant) in to_open {
            let (verdict, mut instants) = open_log(table, &gathered.knowledge, &m, options).await?;
            report.logs_opened += 1;
            if instants.is_empty() {
                instants.push(name_instant);
            }
            // A version-5 failed log file whose every block its rollback voided in place is
            // committed, and no metadata table lists it (Hudi 0.13's rollback does not add it).
            let in_place = gathered
                .knowledge
                .blocks_all_undone_in_place(m.path.as_str(), &instants);
            let listing = see(&mut check, &m, verdict.class, in_place);
            report.add(
                &m,
                &instants,
                verdict,
                listing,
                options.examples,
                options.collect,
            );
        }
        let absent = check.absent();
        report.metadata_table = check.finish(table).await?;
        if !report.metadata_table.checked && !absent {
            // Compared against a metadata table that changed meanwhile, or not at all.
            for c in &mut report.candidates {
                c.metadata_table = MetadataTableListing::Unknown;
            }
        }
        info!(
            files = report.data_files(),
            metadata_table_missing = report.metadata_table.missing_from_store,
            metadata_table_not_listed = report.metadata_table.not_listed,
            leftovers = report.count(Class::RollbackLeftover).files,
            orphans = report.count(Class::Orphan).files,
            "audited"
        );
        Ok(report)
    }
    .instrument(span)
    .await
}

/// Tick `m` (of `class`) off the metadata table's listing: whether it lists it; a leftover or
/// orphan it lists is a disagreement of its own, and so is a committed file it does not list,
/// unless the file is one a rollback left in place for its command block to undo (`in_place`).
fn see(
    check: &mut metadata_table::Check,
    m: &FileMeta,
    class: Class,
    in_place: bool,
) -> MetadataTableListing {
    let partition = m.path.parent();
    let counted = class == Class::Committed && !in_place;
    let listing = check.see(partition.as_str(), m.file_name(), counted);
    if listing == MetadataTableListing::Listed
        && matches!(class, Class::RollbackLeftover | Class::Orphan)
    {
        check.listed_not_committed(partition.as_str(), m.file_name());
    }
    listing
}

/// What [`Judge::judge`] made of one listed file.
enum Judged {
    /// Not a data file (`.hoodie_partition_metadata`, `.crc`, …).
    NotData,
    /// A version-6 log file that no metadata explains: set aside in [`Judge::to_open`], to be
    /// classified by its blocks ([`open_log`]).
    Open,
    /// Its class, and the instant its name carries.
    Verdict(Verdict, String),
}

/// Classifies listed files by what was gathered; the audit and the archival guard share it.
struct Judge<'a> {
    gathered: &'a knowledge::Gathered,
    v6_logs: bool,
    /// Version-6 log files to open, with the instant their name carries.
    to_open: Vec<(FileMeta, String)>,
}

impl<'a> Judge<'a> {
    fn new(gathered: &'a knowledge::Gathered, v6_logs: bool) -> Self {
        Self {
            gathered,
            v6_logs,
            to_open: Vec::new(),
        }
    }

    fn judge(&mut self, m: &FileMeta) -> Judged {
        let Some(file) = DataFile::parse(m.file_name()) else {
            return Judged::NotData;
        };
        let path = m.path.as_str();
        let k = &self.gathered.knowledge;
        let verdict = match &file {
            DataFile::Log { .. } if self.v6_logs && !k.rollback_files.contains_key(path) => {
                // A version-6 log file's name carries its slice's base instant; the instants
                // that appended to it are in the write stats, else in its blocks.
                match self.gathered.v6_log_writers.get(path) {
                    Some(w) => k.classify_blocks(path, [w.as_str()]),
                    None => {
                        self.to_open.push((m.clone(), file.instant().to_string()));
                        return Judged::Open;
                    }
                }
            }
            _ => k.classify(path, file.instant()),
        };
        Judged::Verdict(verdict, file.instant().to_string())
    }
}

/// The class of a version-6 log file that no write stats name, by the instants in its blocks'
/// headers (a data block's writer, a command block's rollback), and those instants (none when
/// its blocks were not read).
pub(super) async fn open_log(
    table: &Table,
    knowledge: &Knowledge,
    m: &FileMeta,
    options: &AuditOptions,
) -> Result<(Verdict, Vec<String>), Error> {
    let path = m.path.as_str();
    if m.size > options.max_log_read {
        return Ok((
            Verdict {
                class: Class::Unknown,
                reason: format!(
                    "a log file of {} bytes that no metadata names, larger than the {} bytes an audit opens",
                    m.size, options.max_log_read
                ),
            },
            Vec::new(),
        ));
    }
    let bytes = match table
        .storage()
        .get_opt_capped(&m.path, options.max_log_read)
        .await
    {
        Ok(Some(b)) => b,
        Ok(None) => return Ok((unknown("gone since it was listed"), Vec::new())),
        Err(StorageError::TooLarge { .. }) => {
            return Ok((
                unknown("grew past the bytes an audit opens since it was listed"),
                Vec::new(),
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let Some(headers) = read_block_headers(&bytes) else {
        return Ok((unknown("its log blocks cannot be read"), Vec::new()));
    };
    let instants: Vec<String> = headers
        .iter()
        .filter_map(|h| {
            h.entries
                .iter()
                .find(|(k, _)| *k == HEADER_INSTANT_TIME)
                .map(|(_, v)| v.clone())
        })
        .collect();
    let verdict = knowledge.classify_blocks(path, instants.iter().map(String::as_str));
    Ok((verdict, instants))
}

fn unknown(reason: &str) -> Verdict {
    Verdict {
        class: Class::Unknown,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::sorts_before_hoodie;

    #[test]
    fn folders_named_like_hoodie_sort_by_the_slash_after_their_name() {
        for before in ["-early", ".hoodie-old", ".hoodie.bak", ".git", ".hoodi"] {
            assert!(sorts_before_hoodie(before), "{before}");
        }
        for after in [
            ".hoodie",
            ".hoodie0",
            ".hoodie_partition_metadata",
            "p1",
            "year=2024",
        ] {
            assert!(!sorts_before_hoodie(after), "{after}");
        }
    }
}
