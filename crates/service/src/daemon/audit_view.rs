//! What the daemon keeps of a table's audits ([`AuditState`]) and how the API shows them: the
//! last run whatever its outcome, and the last complete one, each a compact summary of
//! `hudi-keeper audit`'s report (the partitions with findings capped, the examples as the
//! audit kept them).

use std::collections::BTreeMap;
use std::sync::Arc;

use hudi_keeper_core::audit::{
    AuditReport, Class, Counts, Example, MetadataTableCheck, PartitionDrift,
};
use serde::Serialize;

/// The most partitions a summary lists: those with the most files that are not committed.
pub const MAX_PARTITIONS_SHOWN: usize = 100;

/// How an audit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditOutcome {
    /// Every data file was classified: its counts are the table's.
    Complete,
    /// Stopped when its request budget (`audit_max_requests`) was spent: its counts are not used.
    CutShort,
    /// A request or a read failed.
    Failed,
}

impl AuditOutcome {
    /// Every outcome, as `hudi_keeper_audits_total` labels them.
    pub const ALL: [AuditOutcome; 3] = [
        AuditOutcome::Complete,
        AuditOutcome::CutShort,
        AuditOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Complete => "complete",
            AuditOutcome::CutShort => "cut_short",
            AuditOutcome::Failed => "failed",
        }
    }
}

/// A complete audit's findings, compact.
#[derive(Debug, Clone, Serialize)]
pub struct AuditSummary {
    pub table_version: u32,
    pub oldest_active_instant: Option<String>,
    /// Every archive location was read whole (only then is a file called an orphan).
    pub archive_complete: bool,
    /// What of the archive was not read, and why.
    pub archive_unread: Vec<(String, String)>,
    /// Completed rollbacks and restores whose metadata could not be read (no file is then
    /// called an orphan).
    pub unreadable_metadata: usize,
    pub data_files: u64,
    pub other_files: u64,
    pub logs_opened: u64,
    /// Files, bytes and the oldest file per class (every class).
    pub classes: BTreeMap<Class, Counts>,
    /// Partitions listed.
    pub partitions_total: usize,
    /// Partitions holding files that are not committed.
    pub partitions_with_findings: usize,
    /// Up to [`MAX_PARTITIONS_SHOWN`] of those, the most such files first; each by class.
    pub partitions: BTreeMap<String, BTreeMap<Class, Counts>>,
    /// Up to ten files per class, but `committed`.
    pub examples: BTreeMap<Class, Vec<Example>>,
    /// The metadata table against the store (checked, or why not), with up to
    /// [`MAX_PARTITIONS_SHOWN`] of its partitions that disagree, the most files first.
    pub metadata_table: MetadataTableCheck,
}

impl AuditSummary {
    pub fn of(r: &AuditReport) -> Self {
        let not_committed = |by: &BTreeMap<Class, Counts>| -> u64 {
            by.iter()
                .filter(|(c, _)| **c != Class::Committed)
                .map(|(_, n)| n.files)
                .sum()
        };
        let mut flagged: Vec<(&String, &BTreeMap<Class, Counts>, u64)> = r
            .partitions
            .iter()
            .map(|(p, by)| (p, by, not_committed(by)))
            .filter(|(_, _, n)| *n > 0)
            .collect();
        let partitions_with_findings = flagged.len();
        flagged.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
        flagged.truncate(MAX_PARTITIONS_SHOWN);
        Self {
            table_version: r.table_version,
            oldest_active_instant: r.oldest_active_instant.clone(),
            archive_complete: r.archive.complete,
            archive_unread: r.archive.unread.clone(),
            unreadable_metadata: r.unreadable_metadata.len(),
            data_files: r.data_files(),
            other_files: r.other_files,
            logs_opened: r.logs_opened,
            classes: r.classes.clone(),
            partitions_total: r.partitions.len(),
            partitions_with_findings,
            partitions: flagged
                .into_iter()
                .map(|(p, by, _)| (p.clone(), by.clone()))
                .collect(),
            examples: r.examples.clone(),
            metadata_table: capped(&r.metadata_table),
        }
    }
}

/// `check` with its partitions cut to the [`MAX_PARTITIONS_SHOWN`] that disagree most.
fn capped(check: &MetadataTableCheck) -> MetadataTableCheck {
    let mut kept: Vec<(&String, &PartitionDrift)> = check.partitions.iter().collect();
    kept.sort_by(|a, b| {
        let n = |d: &PartitionDrift| d.missing_from_store + d.not_listed;
        n(b.1).cmp(&n(a.1)).then_with(|| a.0.cmp(b.0))
    });
    kept.truncate(MAX_PARTITIONS_SHOWN);
    MetadataTableCheck {
        partitions: kept
            .into_iter()
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect(),
        ..check.clone()
    }
}

/// One audit of a table.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRun {
    /// `scheduled` (`audit_interval`) or `manual` (`POST …/audit`).
    pub trigger: &'static str,
    pub started_ms: i64,
    pub finished_ms: i64,
    pub duration_ms: u64,
    pub outcome: AuditOutcome,
    /// Why it was cut short or failed.
    pub reason: Option<String>,
    /// Object-store requests it made.
    pub requests: u64,
    /// Its budget (`audit_max_requests`).
    pub max_requests: u64,
    /// What it found (a complete audit only: one cut short or failed did not see every file).
    pub summary: Option<AuditSummary>,
}

/// What the daemon knows of a table's audits.
#[derive(Debug, Default)]
pub struct AuditState {
    /// An audit runs, since (epoch ms).
    pub running_since_ms: Option<i64>,
    /// `POST …/audit` asked for one: the next due audit is manual (and runs even with
    /// `audit_interval = 0`).
    pub manual_requested: bool,
    pub runs: u64,
    /// The last audit that ended, whatever its outcome.
    pub last: Option<Arc<AuditRun>>,
    /// The last complete one: the table's counts until another completes.
    pub last_complete: Option<Arc<AuditRun>>,
}

/// The audit in the table view of the API: when, how it ended, and the last complete audit's
/// files that are not committed.
#[derive(Debug, Clone, Serialize)]
pub struct AuditBrief {
    pub running_since_ms: Option<i64>,
    pub last_finished_ms: Option<i64>,
    pub last_outcome: Option<AuditOutcome>,
    pub last_complete_ms: Option<i64>,
    /// Of the last complete audit: files per class, but `committed`.
    pub files: Option<BTreeMap<Class, u64>>,
}

impl AuditState {
    pub fn brief(&self) -> AuditBrief {
        let complete = self.last_complete.as_deref();
        AuditBrief {
            running_since_ms: self.running_since_ms,
            last_finished_ms: self.last.as_ref().map(|r| r.finished_ms),
            last_outcome: self.last.as_ref().map(|r| r.outcome),
            last_complete_ms: complete.map(|r| r.finished_ms),
            files: complete.and_then(|r| r.summary.as_ref()).map(|s| {
                s.classes
                    .iter()
                    .filter(|(c, _)| **c != Class::Committed)
                    .map(|(c, n)| (*c, n.files))
                    .collect()
            }),
        }
    }
}
