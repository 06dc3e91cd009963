//! `hudi-keeper audit --repair`: remove the files the audit calls `rollback_leftover` or
//! `orphan`, with the safety rules users trust from Iceberg's `remove_orphan_files` and Delta's
//! `VACUUM`:
//!
//! - only files older than a floor (3 days by default; under 1 hour is refused): a writer that
//!   is slow or paused, not dead, is given that long;
//! - only data files inside the base path (the listing never enters `.hoodie/`), never through
//!   a symbolic link (every delete checks its way);
//! - under the table lock, each file classified again from a timeline read under it: a file
//!   whose instant became pending or completed meanwhile, or that a rollback's metadata now
//!   accounts for, stays; one whose size or time changed since it was listed stays;
//! - a file whose instant has a completed deltacommit on the metadata table's active timeline
//!   stays (the metadata table may list it, and its readers would fail on it): the metadata
//!   table is not repaired here;
//! - `--dry-run` shows what would go; a quarantine store gets a copy of each file before it is
//!   deleted (a file too large to copy in memory stays).
//!
//! A journal naming the files is written into the table under the lock before the first one
//! goes ([`super::journal`]). A cut-off repair stops at a safe point between files and releases
//! the lock; the next repair, from any machine, resumes the unfinished journal first (each file
//! judged again as above; one already gone counts as removed), then audits and goes on.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::{info, warn};

use super::classify::Class;
use super::drift::MetadataTableListing;
use super::journal::{self, Journal};
use super::{audit, knowledge, AuditOptions, AuditReport, Candidate};
use crate::exec::holding_lock;
use crate::protocol::lock::LockOptions;
use crate::storage::{OpKind, Storage, StorageError};
use crate::table::Table;
use crate::timeline::State;
use crate::Error;

/// The least age a repair accepts.
pub const MIN_OLDER_THAN: Duration = Duration::from_secs(3600);
/// The default age floor.
pub const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(3 * 24 * 3600);
/// The largest file copied to a quarantine store (read whole into memory).
pub const MAX_QUARANTINE_FILE: u64 = 512 * 1024 * 1024;

/// How a repair runs.
#[derive(Debug, Clone)]
pub struct RepairOptions {
    /// Only files last modified longer ago than this go.
    pub older_than: Duration,
    /// The table lock the writers take.
    pub lock: LockOptions,
    /// Show what would go; change nothing (and take no lock).
    pub dry_run: bool,
    /// Copy each file here (same table-relative path) before deleting it.
    pub quarantine: Option<Storage>,
    /// The metadata table is deleted before the files are removed (`--repair-metadata-table`):
    /// a dry run then shows the files the metadata table lists as going. (A run audits again
    /// after the deletion, and finds no metadata table.)
    pub metadata_table_first: bool,
}

/// One file the repair removed, or would remove.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    /// Already gone when a resumed journal's repair came to it: removed by the repair that was
    /// cut off.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub already_gone: bool,
    /// Table-relative path.
    pub path: String,
    /// Its class.
    pub class: Class,
    /// Bytes.
    pub size: u64,
    /// Its modification time.
    pub last_modified: DateTime<Utc>,
}

/// One leftover or orphan the repair left, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Kept {
    /// Table-relative path.
    pub path: String,
    /// Its class when the audit found it.
    pub class: Class,
    /// Why it stays.
    pub reason: String,
}

/// What a repair did.
#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    /// The audit it acted on.
    pub audit: AuditReport,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The age floor, in seconds.
    pub older_than_s: u64,
    /// Files removed (a dry run: that would be).
    pub removed: Vec<Removed>,
    /// Leftovers and orphans left, with the reason.
    pub kept: Vec<Kept>,
    /// More leftovers and orphans than one run handles: run again.
    pub more_to_do: bool,
    /// How long taking the lock waited.
    pub lock_wait_ms: u64,
    /// The journal this repair wrote before its first removal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    /// Unfinished journals of cut-off repairs that this one resumed (a dry run: would resume).
    pub resumed_journals: Vec<String>,
}

fn refused(table: &Table, reason: impl Into<String>) -> Error {
    Error::RepairRefused {
        table: table.uri().to_string(),
        reason: reason.into(),
    }
}

/// Audit `table` and remove its leftovers and orphans by the rules of the module.
pub async fn repair(
    table: &Table,
    options: &RepairOptions,
    audit_options: &AuditOptions,
) -> Result<RepairReport, Error> {
    if options.older_than < MIN_OLDER_THAN {
        return Err(refused(
            table,
            format!(
                "--older-than {}s is under the floor of 1 hour: a write that is slow, not dead, could lose its files; nothing was changed",
                options.older_than.as_secs()
            ),
        ));
    }
    let journals = journal::read_journals(table.storage()).await?;
    let unfinished: Vec<Journal> = journals
        .iter()
        .filter(|j| j.finished.is_none())
        .cloned()
        .collect();
    let quarantine_uri = options.quarantine.as_ref().map(|q| q.uri().to_string());
    if let Some(j) = unfinished.iter().find(|j| j.quarantine != quarantine_uri) {
        return Err(refused(
            table,
            format!(
                "the cut-off repair {} (journal {}) copied its files to {} first; run again with {} so it is resumed the same way; nothing was changed",
                j.id,
                journal::JOURNAL_DIR,
                j.quarantine.as_deref().map_or("no quarantine".to_string(), |q| format!("the quarantine {q}")),
                j.quarantine.as_deref().map_or("no --quarantine".to_string(), |q| format!("--quarantine {q}")),
            ),
        ));
    }
    let mut resumed: Vec<Candidate> = Vec::new();
    for j in &unfinished {
        let (candidates, invalid) = j.candidates();
        if let Some(bad) = invalid.first() {
            return Err(Error::Journal {
                path: j.path().map(|p| p.to_string()).unwrap_or_default(),
                reason: format!("names `{bad}`, which is no data file path of the table; move the journal away after looking at it"),
            });
        }
        resumed.extend(candidates);
    }
    let resumed_paths: BTreeSet<String> = resumed.iter().map(|c| c.meta.path.to_string()).collect();
    let mut audited = audit(
        table,
        &AuditOptions {
            collect: true,
            ..audit_options.clone()
        },
    )
    .await?;
    let candidates = std::mem::take(&mut audited.candidates);
    let more_to_do = audited.candidates_truncated;
    let now = Utc::now();
    let floor = chrono::Duration::from_std(options.older_than).unwrap_or(chrono::Duration::MAX);
    // A resumed journal's file takes the metadata table's listing from this audit (unknown when
    // the audit no longer calls it a leftover or an orphan: it is judged again under the lock).
    let listings: std::collections::BTreeMap<String, MetadataTableListing> = candidates
        .iter()
        .map(|c| (c.meta.path.to_string(), c.metadata_table))
        .collect();
    for c in &mut resumed {
        if let Some(l) = listings.get(c.meta.path.as_str()) {
            c.metadata_table = *l;
        }
    }
    let (old, young): (Vec<Candidate>, Vec<Candidate>) = candidates
        .into_iter()
        .filter(|c| !resumed_paths.contains(c.meta.path.as_str()))
        .chain(resumed)
        .partition(|c| now.signed_duration_since(c.meta.last_modified) >= floor);
    // A file the metadata table lists, or may list, stays (checked under the lock once the file
    // is found there; in a dry run here, unless the metadata table is to be deleted first).
    let (old, listed): (Vec<Candidate>, Vec<Candidate>) = old.into_iter().partition(|c| {
        !options.dry_run || options.metadata_table_first || metadata_table_keeps(c).is_none()
    });
    let mut kept: Vec<Kept> = young
        .into_iter()
        .map(|c| Kept {
            path: c.meta.path.to_string(),
            class: c.class,
            reason: format!(
                "modified {}, less than --older-than ago",
                c.meta.last_modified.format("%Y-%m-%d %H:%M:%S UTC")
            ),
        })
        .collect();
    kept.extend(listed.iter().map(|c| Kept {
        path: c.meta.path.to_string(),
        class: c.class,
        reason: metadata_table_keeps(c).unwrap_or_default(),
    }));
    let mut report = RepairReport {
        audit: audited,
        dry_run: options.dry_run,
        older_than_s: options.older_than.as_secs(),
        removed: Vec::new(),
        kept: Vec::new(),
        more_to_do,
        lock_wait_ms: 0,
        journal: None,
        resumed_journals: unfinished.iter().map(|j| j.id.clone()).collect(),
    };
    if options.dry_run || (old.is_empty() && unfinished.is_empty()) {
        report.removed = old.iter().map(removed).collect();
        report.kept = kept;
        return Ok(report);
    }
    let ((outcome, journal_id), waited) = holding_lock(table, &options.lock, |fenced| async move {
        journaled(&fenced, old, unfinished, journals, options).await
    })
    .await?;
    kept.extend(outcome.kept);
    report.removed = outcome.removed;
    report.kept = kept;
    report.journal = journal_id;
    report.lock_wait_ms = waited.as_millis() as u64;
    info!(
        table = %table.uri(),
        removed = report.removed.len(),
        kept = report.kept.len(),
        "repaired"
    );
    Ok(report)
}

/// Under the lock: write the journal of `old` (a resumed journal's files among them), remove
/// them, mark this journal and the resumed ones finished, and prune old journals.
async fn journaled(
    table: &Table,
    old: Vec<Candidate>,
    unfinished: Vec<Journal>,
    journals: Vec<Journal>,
    options: &RepairOptions,
) -> Result<(Outcome, Option<String>), Error> {
    let storage = table.storage();
    let mut journal = if old.is_empty() {
        None
    } else {
        let j = Journal::new(&old, options.quarantine.as_ref());
        j.create(storage).await?;
        Some(j)
    };
    let resumed: BTreeSet<String> = unfinished
        .iter()
        .flat_map(|j| j.files.iter().map(|f| f.path.clone()))
        .collect();
    let mut outcome = remove_under_lock(table, old, options.quarantine.as_ref(), REPAIRED).await?;
    // A resumed journal's file that is gone was removed by the repair that was cut off.
    let (gone_before, gone_now): (Vec<Candidate>, Vec<Candidate>) =
        std::mem::take(&mut outcome.gone)
            .into_iter()
            .partition(|c| resumed.contains(c.meta.path.as_str()));
    outcome.removed.extend(gone_before.iter().map(|c| Removed {
        already_gone: true,
        ..removed(c)
    }));
    outcome.kept.extend(gone_now.into_iter().map(|c| Kept {
        path: c.meta.path.to_string(),
        class: c.class,
        reason: "gone since it was listed".into(),
    }));
    let mut finished = journals;
    for mut j in unfinished {
        table.stop_point("between the journals of a repair", None)?;
        j.finish(storage).await?;
        if let Some(f) = finished.iter_mut().find(|f| f.id == j.id) {
            *f = j;
        }
    }
    let id = match journal.as_mut() {
        Some(j) => {
            j.finish(storage).await?;
            finished.push(j.clone());
            Some(j.id.clone())
        }
        None => None,
    };
    journal::prune(storage, &finished).await?;
    Ok((outcome, id))
}

pub(super) fn removed(c: &Candidate) -> Removed {
    Removed {
        already_gone: false,
        path: c.meta.path.to_string(),
        class: c.class,
        size: c.meta.size,
        last_modified: c.meta.last_modified,
    }
}

/// Why `c` stays because of the metadata table, or `None`: the metadata table lists it (a
/// zombie writer's commit completes its deltacommit there after the rollback), or could not be
/// compared with the store and so may list it. Removing such a file would fail the metadata
/// table's readers; deleting the metadata table first (`--repair-metadata-table`) lets it go.
pub(super) fn metadata_table_keeps(c: &Candidate) -> Option<String> {
    match c.metadata_table {
        MetadataTableListing::NoMetadataTable | MetadataTableListing::NotListed => None,
        MetadataTableListing::Listed => Some(
            "the metadata table lists it: removing it would fail the metadata table's readers; `hudi-keeper audit --repair --repair-metadata-table` deletes the metadata table first (the next writer rebuilds it), then removes the file".into(),
        ),
        MetadataTableListing::Unknown => Some(
            "the metadata table could not be compared with the store (the audit's report says why), so it may list this file; removing it could fail the metadata table's readers".into(),
        ),
    }
}

/// The classes a repair removes.
const REPAIRED: &[Class] = &[Class::RollbackLeftover, Class::Orphan];

/// What [`remove_under_lock`] did.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub removed: Vec<Removed>,
    pub kept: Vec<Kept>,
    /// Candidates gone since they were listed (a head proved them absent).
    pub gone: Vec<Candidate>,
}

/// Under the lock: classify each candidate again and remove those still of an `allowed` class
/// (copied to `quarantine` first, when given).
pub(super) async fn remove_under_lock(
    table: &Table,
    candidates: Vec<Candidate>,
    quarantine: Option<&Storage>,
    allowed: &[Class],
) -> Result<Outcome, Error> {
    let storage = table.storage();
    let now = knowledge::gather(table).await?;
    let mdt_completed = metadata_table_completed(table).await?;
    let mut removed_files = Vec::new();
    let mut kept = Vec::new();
    let mut gone = Vec::new();
    for c in candidates {
        table.stop_point("between the files of a repair", None)?;
        let path = c.meta.path.as_str();
        let keep = |reason: String| Kept {
            path: path.to_string(),
            class: c.class,
            reason,
        };
        let verdict = now
            .knowledge
            .classify_blocks(path, c.instants.iter().map(String::as_str));
        if !allowed.contains(&verdict.class) {
            kept.push(keep(format!(
                "now {}: {}",
                verdict.class.as_str(),
                verdict.reason
            )));
            continue;
        }
        if let Some(i) = c.instants.iter().find(|i| mdt_completed.contains(*i)) {
            kept.push(keep(format!(
                "the metadata table has a completed deltacommit {i}, so it may list this file; deleting it would fail its readers (the metadata table is not repaired here)"
            )));
            continue;
        }
        match storage.head(&c.meta.path).await? {
            None => {
                gone.push(c);
                continue;
            }
            Some(m) if m.size != c.meta.size || m.last_modified != c.meta.last_modified => {
                kept.push(keep("changed since it was listed".into()));
                continue;
            }
            Some(_) => {}
        }
        if let Some(reason) = metadata_table_keeps(&c) {
            kept.push(keep(reason));
            continue;
        }
        if let Err(e) = storage
            .check_way(OpKind::Delete, std::slice::from_ref(&c.meta.path))
            .await
        {
            if e.is_link_refusal() {
                kept.push(keep(e.to_string()));
                continue;
            }
            return Err(e.into());
        }
        if let Some(q) = quarantine {
            if c.meta.size > MAX_QUARANTINE_FILE {
                kept.push(keep(format!(
                    "larger than the {MAX_QUARANTINE_FILE} bytes copied to a quarantine"
                )));
                continue;
            }
            let bytes = match storage
                .get_opt_capped(&c.meta.path, MAX_QUARANTINE_FILE)
                .await
            {
                Ok(Some(b)) => b,
                Ok(None) => {
                    kept.push(keep("gone since it was listed".into()));
                    continue;
                }
                Err(StorageError::TooLarge { .. }) => {
                    kept.push(keep("grew since it was listed".into()));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            q.put(&c.meta.path, bytes).await?;
        }
        storage.delete(&c.meta.path).await?;
        info!(path, class = c.class.as_str(), "removed");
        removed_files.push(removed(&c));
    }
    if !kept.is_empty() {
        warn!(
            kept = kept.len(),
            "leftovers or orphans kept; see the report"
        );
    }
    Ok(Outcome {
        removed: removed_files,
        kept,
        gone,
    })
}

/// The requested times of the completed instants on the metadata table's active timeline (none
/// without a metadata table).
async fn metadata_table_completed(table: &Table) -> Result<BTreeSet<String>, Error> {
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(BTreeSet::new());
    };
    let timeline = mdt.timeline().await?;
    Ok(timeline
        .instants()
        .iter()
        .filter(|i| i.state == State::Completed)
        .map(|i| i.requested_time.clone())
        .collect())
}
