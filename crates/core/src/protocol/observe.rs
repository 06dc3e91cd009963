//! The I/O half of failed-write detection: what [`super::detect`] judges with, read from the
//! table's storage (the heartbeat folder's listing, and the requested file of each pending
//! `replacecommit`). [`crate::inspect`] and the rollback executor both start from it.

use std::collections::{BTreeMap, BTreeSet};

use super::detect::{non_candidate_reason, LazyWritersEvidence, ReplaceKind};
use super::heartbeat::HEARTBEAT_DIR;
use crate::error::Error;
use crate::format::avro::requested_replace_is_clustering;
use crate::storage::{RelPath, StorageError};
use crate::table::Table;
use crate::timeline::{Action, Instant, State, Timeline};

/// What a look at the table's storage found for judging its pending instants.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    /// Heartbeat file mtimes (epoch ms) of pending candidate instants, pending rollbacks and (with clustering
    /// expirations on) pending clusterings.
    pub heartbeats: BTreeMap<String, i64>,
    /// What each pending replacecommit is.
    pub replace_kinds: BTreeMap<String, ReplaceKind>,
    /// Heartbeat files in `.hoodie/.heartbeat/` of writes on the active timeline (pending or
    /// completed; orphans of instants absent from it, and heartbeats of table services such as
    /// rollbacks, are not counted); `None` when the folder was not listed because no pending
    /// write was there to judge.
    pub heartbeat_files: Option<usize>,
}

impl Observation {
    /// What is known about LAZY writers: the operator's statement that every writer is LAZY
    /// first (it alone can make a write without heartbeat file failed, and every process reads
    /// it), then heartbeat files now, or else `known` (heartbeat files seen before).
    pub fn lazy_writers(&self, known: Option<LazyWritersEvidence>) -> Option<LazyWritersEvidence> {
        match (known, self.heartbeat_files) {
            (Some(LazyWritersEvidence::Assumed), _) => known,
            (_, Some(n)) if n > 0 => Some(LazyWritersEvidence::HeartbeatFilesNow),
            _ => known,
        }
    }
}

/// Read the heartbeats (one listing of `.hoodie/.heartbeat/`, only when a pending write or a
/// pending rollback is there to judge) and what each pending replacecommit is (one GET each).
///
/// `clusterings`: pending clusterings are judged too (clustering expirations are on), so
/// their heartbeats are read.
pub async fn observe(
    table: &Table,
    timeline: &Timeline,
    clusterings: bool,
) -> Result<Observation, Error> {
    let mut out = Observation::default();
    let candidates: Vec<&Instant> = timeline
        .pending()
        .filter(|i| non_candidate_reason(i.action).is_none())
        .collect();
    // Pending rollbacks are judged by their rollback heartbeat (Hudi 1.2, hudi-keeper), and
    // with clustering expirations on, pending clusterings by theirs.
    let services: Vec<&Instant> = timeline
        .pending()
        .filter(|i| i.action == Action::Rollback || (clusterings && i.action == Action::Clustering))
        .collect();
    if candidates.is_empty() && services.is_empty() {
        return Ok(out);
    }
    for instant in &candidates {
        if instant.action == Action::ReplaceCommit {
            let kind = match instant.file(State::Requested) {
                None => ReplaceKind::Write,
                Some(f) => match table.storage().get_opt(&f.path).await? {
                    None => ReplaceKind::Unknown(format!("`{}` vanished while reading", f.path)),
                    Some(bytes) => match requested_replace_is_clustering(&bytes) {
                        Ok(true) => ReplaceKind::Clustering,
                        Ok(false) => ReplaceKind::Write,
                        Err(e) => ReplaceKind::Unknown(format!("`{}`: {e}", f.path)),
                    },
                },
            };
            out.replace_kinds
                .insert(instant.requested_time.clone(), kind);
        }
    }
    let dir = RelPath::parse(HEARTBEAT_DIR).map_err(StorageError::from)?;
    let listing = table.storage().list_dir(&dir).await?;
    let wanted: BTreeSet<&str> = candidates
        .iter()
        .chain(&services)
        .map(|i| i.requested_time.as_str())
        .collect();
    // Only heartbeats of writes on the active timeline (pending or completed) show the table's
    // writers: one of an instant absent from it is an orphan (of an instant a restore undid, or
    // archived since) and proves nothing about the writers the table has now; one of a table
    // service (a rollback, a clustering, a compaction: Hudi 1.2 heartbeats them under
    // multi-writer) is no evidence of LAZY writers either.
    let writes: BTreeSet<&str> = timeline
        .instants()
        .iter()
        .filter(|i| non_candidate_reason(i.action).is_none())
        .filter(|i| {
            // A version-6 clustering is a replacecommit: its heartbeat (1.2, expirations on) is
            // a table service's.
            !matches!(
                out.replace_kinds.get(&i.requested_time),
                Some(ReplaceKind::Clustering)
            )
        })
        .map(|i| i.requested_time.as_str())
        .collect();
    let mut files = 0;
    for f in &listing.files {
        let name = f.file_name();
        // A heartbeat file is named by its instant time (checksum files and the like are not).
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if writes.contains(name) {
            files += 1;
        }
        if wanted.contains(name) {
            out.heartbeats
                .insert(name.to_string(), f.last_modified.timestamp_millis());
        }
    }
    out.heartbeat_files = Some(files);
    Ok(out)
}
