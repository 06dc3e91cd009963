//! The archival guard: files that still carry an instant a completed rollback undid, removed
//! while that rollback is still on the active timeline to explain them.
//!
//! A rollback that misses a file (markers that missed it, a listing error read as "nothing", a
//! zombie writer that wrote it afterwards) leaves a file whose instant is on no timeline once
//! Hudi's archiver takes the rollback away: from then on readers that list the table see it as
//! data (apache/hudi#14200, #18783, #18887, #11830). While the rollback is on the active
//! timeline, the file is known for what it is; the guard removes it then.
//!
//! For each completed rollback and restore in scope (the ones a run just made, or every one on
//! the active timeline), the guard lists the partitions its metadata names, one listing each,
//! and classifies their files as the audit does. A file is removed only when it is a
//! `rollback_leftover` (its instant was undone and is neither pending nor completed again, and
//! no rollback's metadata names the file as its own), classified again under the table lock from
//! a timeline read under it, unchanged since it was listed, with no completed deltacommit of its
//! instant on the metadata table, inside the base path and never through a symbolic link: the
//! rules of the repair (`super::repair`) apart from its age floor, which is for orphans. An
//! orphan is never touched here. A leftover the metadata table lists (a zombie writer's commit
//! completes its deltacommit there after the rollback), or may list (its `files` partition could
//! not be read), stays: that takes `audit --repair --repair-metadata-table`.

use std::collections::BTreeSet;

use serde::Serialize;
use tracing::{info, info_span, warn, Instrument};

use super::classify::Class;
use super::repair::{metadata_table_keeps, remove_under_lock, Kept, Removed};
use super::{
    knowledge, metadata_table, open_log, AuditOptions, Candidate, Judge, Judged,
    MetadataTableListing,
};
use crate::exec::holding_lock;
use crate::protocol::lock::LockOptions;
use crate::storage::RelPath;
use crate::table::Table;
use crate::timeline::Action;
use crate::Error;

/// Which completed rollbacks the guard checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardScope {
    /// Every completed rollback and restore on the active timeline.
    Every,
    /// These rollback or restore instants (those a run just completed).
    Rollbacks(BTreeSet<String>),
}

/// How the guard runs.
#[derive(Debug, Clone)]
pub struct GuardOptions {
    /// The table lock the writers take.
    pub lock: LockOptions,
    /// Show what would go; change nothing (and take no lock).
    pub dry_run: bool,
    /// The largest version-6 log file opened to read its blocks' instants.
    pub max_log_read: u64,
}

/// What the guard did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GuardReport {
    /// Completed rollbacks and restores checked.
    pub rollbacks_checked: usize,
    /// Partitions listed.
    pub partitions_listed: usize,
    /// Partitions named by a rollback's metadata that are no valid path, not listed.
    pub partitions_skipped: Vec<String>,
    /// Leftovers found in them.
    pub leftovers_found: usize,
    /// Leftovers removed (a dry run: that would be).
    pub removed: Vec<Removed>,
    /// Leftovers left, and why.
    pub kept: Vec<Kept>,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// How long taking the lock waited.
    pub lock_wait_ms: u64,
}

/// Check the partitions the completed rollbacks in `scope` touched for files still carrying an
/// instant they undid, and remove them (see the module documentation).
pub async fn guard(
    table: &Table,
    scope: &GuardScope,
    options: &GuardOptions,
) -> Result<GuardReport, Error> {
    let span = info_span!("leftover_guard", table = %table.config().name);
    async {
        let mut report = GuardReport {
            dry_run: options.dry_run,
            ..GuardReport::default()
        };
        // Cheap first: nothing to do (and nothing more to read) without a completed rollback
        // in scope on the active timeline.
        let timeline = table.timeline().await?;
        let any = timeline.completed().any(|i| {
            matches!(i.action, Action::Rollback | Action::Restore)
                && in_scope(scope, &i.requested_time)
        });
        if !any {
            return Ok(report);
        }
        let gathered = knowledge::gather(table).await?;
        let mut undone_instants = BTreeSet::new();
        let mut partitions = BTreeSet::new();
        for (r, undone) in &gathered.active_rollbacks {
            if in_scope(scope, r) {
                report.rollbacks_checked += 1;
                undone_instants.extend(undone.instants.iter().cloned());
                partitions.extend(undone.partitions.iter().cloned());
            }
        }
        let v6_logs = table.config().version.is_0x();
        let mut judge = Judge::new(&gathered, v6_logs);
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut keep_leftover =
            |m: &crate::storage::FileMeta, v: super::Verdict, instants: Vec<String>| {
                if v.class == Class::RollbackLeftover
                    && instants.iter().any(|i| undone_instants.contains(i))
                {
                    candidates.push(Candidate {
                        meta: m.clone(),
                        instants,
                        class: v.class,
                        metadata_table: MetadataTableListing::Unknown,
                    });
                }
            };
        for p in &partitions {
            let prefix = if p.is_empty() {
                RelPath::root()
            } else {
                match RelPath::parse(p) {
                    Ok(prefix) if !prefix.as_str().starts_with(".hoodie") => prefix,
                    _ => {
                        report.partitions_skipped.push(p.clone());
                        continue;
                    }
                }
            };
            let listing = table.storage().list_dir(&prefix).await?;
            report.partitions_listed += 1;
            for m in &listing.files {
                if let Judged::Verdict(v, instant) = judge.judge(m) {
                    keep_leftover(m, v, vec![instant]);
                }
            }
        }
        let audit_options = AuditOptions {
            max_log_read: options.max_log_read,
            ..AuditOptions::default()
        };
        for (m, name_instant) in std::mem::take(&mut judge.to_open) {
            let (v, mut instants) =
                open_log(table, &gathered.knowledge, &m, &audit_options).await?;
            if instants.is_empty() {
                instants.push(name_instant);
            }
            keep_leftover(&m, v, instants);
        }
        report.leftovers_found = candidates.len();
        if candidates.is_empty() {
            return Ok(report);
        }
        // The metadata table may list a leftover (a zombie writer's commit completes its
        // deltacommit there after the rollback): removing it would fail its readers. Whether
        // the table has one is read from hoodie.properties now, not from the handle's copy
        // (the daemon keeps its handle; a writer may have built a metadata table since).
        let fresh = Table::open_storage(table.storage().clone()).await?;
        let mut check = metadata_table::prepare(&fresh, 0).await?;
        let mut removable = Vec::with_capacity(candidates.len());
        for mut c in candidates {
            c.metadata_table = check.see(c.meta.path.parent().as_str(), c.meta.file_name(), false);
            match metadata_table_keeps(&c) {
                Some(reason) => report.kept.push(Kept {
                    path: c.meta.path.to_string(),
                    class: c.class,
                    reason,
                }),
                None => removable.push(c),
            }
        }
        let candidates = removable;
        if candidates.is_empty() {
            return Ok(report);
        }
        if options.dry_run {
            report.removed = candidates.iter().map(super::repair::removed).collect();
            return Ok(report);
        }
        let (outcome, waited) = holding_lock(table, &options.lock, |fenced| async move {
            remove_under_lock(&fenced, candidates, None, &[Class::RollbackLeftover]).await
        })
        .await?;
        report.removed = outcome.removed;
        report.kept.extend(outcome.kept);
        report.kept.extend(outcome.gone.into_iter().map(|c| Kept {
            path: c.meta.path.to_string(),
            class: c.class,
            reason: "gone since it was listed".into(),
        }));
        report.lock_wait_ms = waited.as_millis() as u64;
        if report.removed.is_empty() {
            warn!(
                kept = report.kept.len(),
                "rollback leftovers found and kept"
            );
        } else {
            info!(
                removed = report.removed.len(),
                kept = report.kept.len(),
                "rollback leftovers removed"
            );
        }
        Ok(report)
    }
    .instrument(span)
    .await
}

fn in_scope(scope: &GuardScope, r: &str) -> bool {
    match scope {
        GuardScope::Every => true,
        GuardScope::Rollbacks(rs) => rs.contains(r),
    }
}
