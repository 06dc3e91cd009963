//! What the audit reads before it lists: the active timeline, the archived timeline, the
//! completed rollbacks' and restores' metadata (which instants they undid, which files they
//! wrote), and on table version 6 the write stats that name the log files deltacommits appended
//! to.

use std::collections::{BTreeMap, BTreeSet};

use tracing::debug;

use super::classify::Knowledge;
use super::report::ArchiveSummary;
use crate::format::commit::json_write_stats;
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;
use crate::table::Table;
use crate::timeline::archived::read_archived_timeline;
use crate::timeline::{Action, State};
use crate::Error;

/// Everything [`super::audit`] classifies by.
pub(super) struct Gathered {
    pub knowledge: Knowledge,
    /// Version 6: a log file (table-relative path) -> the completed deltacommit whose write stats
    /// name it (the newest such).
    pub v6_log_writers: BTreeMap<String, String>,
    pub archive: ArchiveSummary,
    /// Completed rollbacks and restores whose metadata could not be read: (path, why). Any makes
    /// the audit claim no orphan (an unread rollback may name the instant).
    pub unreadable: Vec<(String, String)>,
    /// Each completed rollback and restore on the active timeline -> what it undid: the
    /// instants, and the partitions its metadata names (the archival guard lists those).
    pub active_rollbacks: BTreeMap<String, Undone>,
}

/// What one completed rollback or restore undid, by its metadata.
#[derive(Debug, Default, Clone)]
pub(super) struct Undone {
    /// The instants it rolled back.
    pub instants: BTreeSet<String>,
    /// The partitions its metadata names (`""`: the base path).
    pub partitions: BTreeSet<String>,
}

impl Undone {
    fn note(&mut self, m: &RollbackMetadata) {
        self.instants.extend(m.commits_rollback.iter().cloned());
        self.partitions.extend(
            m.partition_metadata
                .values()
                .map(|p| p.partition_path.clone()),
        );
    }
}

pub(super) async fn gather(table: &Table) -> Result<Gathered, Error> {
    let timeline = table.timeline().await?;
    let storage = table.storage();
    let mut k = Knowledge::default();
    let mut unreadable = Vec::new();
    let mut v6_log_writers = BTreeMap::new();
    let mut active_rollbacks: BTreeMap<String, Undone> = BTreeMap::new();
    let v6 = table.config().version.is_0x();
    k.blocks_undone_in_place = table.config().version == crate::config::TableVersion::V5;
    for i in timeline.instants() {
        if i.is_pending() {
            k.active_pending.insert(i.requested_time.clone());
        } else {
            k.active_completed.insert(i.requested_time.clone());
        }
    }
    k.oldest_active = timeline
        .instants()
        .iter()
        .map(|i| i.requested_time.clone())
        .min();
    for i in timeline.completed() {
        let Some(file) = i.file(State::Completed) else {
            continue;
        };
        let wanted = matches!(i.action, Action::Rollback | Action::Restore)
            || (v6 && i.action == Action::DeltaCommit);
        if !wanted {
            continue;
        }
        let bytes = storage.get(&file.path).await?;
        let read = match i.action {
            Action::Rollback => RollbackMetadata::from_avro(&bytes)
                .map(|m| {
                    note_rollback(&mut k, &i.requested_time, &m);
                    active_rollbacks
                        .entry(i.requested_time.clone())
                        .or_default()
                        .note(&m);
                })
                .map_err(|e| e.to_string()),
            Action::Restore => RestoreMetadata::from_avro(&bytes)
                .map(|m| {
                    for t in &m.instants_to_rollback {
                        k.rolled_back
                            .entry(t.clone())
                            .or_insert_with(|| i.requested_time.clone());
                    }
                    let undone = active_rollbacks
                        .entry(i.requested_time.clone())
                        .or_default();
                    undone
                        .instants
                        .extend(m.instants_to_rollback.iter().cloned());
                    for child in m.hoodie_restore_metadata.values().flatten() {
                        note_rollback(&mut k, &i.requested_time, child);
                        undone.note(child);
                    }
                })
                .map_err(|e| e.to_string()),
            _ => json_write_stats(&bytes).map(|stats| {
                for s in stats {
                    if s.path.contains(".log.") {
                        v6_log_writers.insert(s.path, i.requested_time.clone());
                    }
                }
            }),
        };
        match read {
            Err(why) if i.action == Action::DeltaCommit => {
                // Only costs requests: the log files it names are opened instead.
                debug!(instant = %i.requested_time, %why, "write stats unreadable");
            }
            Err(why) => unreadable.push((file.path.to_string(), why)),
            Ok(()) => {}
        }
    }
    let archive = read_archive(table, &mut k).await?;
    k.archive_complete = archive.complete && unreadable.is_empty();
    Ok(Gathered {
        knowledge: k,
        v6_log_writers,
        archive,
        unreadable,
        active_rollbacks,
    })
}

/// A completed rollback `r`: the instants it undid, and the files its metadata accounts for, by
/// table-relative path: the command-block log files it wrote, and (version 6) the failed write's
/// log files it left in place on purpose, their blocks undone by its command block.
fn note_rollback(k: &mut Knowledge, r: &str, m: &RollbackMetadata) {
    for t in &m.commits_rollback {
        k.rolled_back
            .entry(t.clone())
            .or_insert_with(|| r.to_string());
    }
    for p in m.partition_metadata.values() {
        for written in p.rollback_log_files.iter().flatten().map(|(f, _)| f) {
            let name = written.rsplit('/').next().unwrap_or(written);
            let path = if p.partition_path.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", p.partition_path)
            };
            for t in &m.commits_rollback {
                if let Some(key) = super::classify::command_blocked_key(&path, t) {
                    k.command_blocked
                        .entry(key)
                        .or_insert_with(|| r.to_string());
                }
            }
        }
        let named = [&p.rollback_log_files, &p.log_files_from_failed_commit];
        for written in named.into_iter().flatten().flat_map(|f| f.keys()) {
            let name = written.rsplit('/').next().unwrap_or(written);
            let path = if p.partition_path.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", p.partition_path)
            };
            k.rollback_files.insert(path, r.to_string());
        }
    }
}

/// The archived timeline: its completed instants, every instant it holds, and the instants its
/// rollbacks and restores undid, into `k`. Whether it was read whole is in the summary.
async fn read_archive(table: &Table, k: &mut Knowledge) -> Result<ArchiveSummary, Error> {
    let archived = read_archived_timeline(table).await?;
    for i in &archived.instants {
        k.archived_any.insert(i.requested_time.clone());
        if i.completed {
            k.archived_completed.insert(i.requested_time.clone());
        }
        for t in &i.rolled_back {
            k.rolled_back
                .entry(t.clone())
                .or_insert_with(|| i.requested_time.clone());
        }
    }
    Ok(ArchiveSummary {
        locations: archived.locations,
        complete: archived.complete,
        instants: archived.instants.len(),
        unread: archived.unread,
    })
}
