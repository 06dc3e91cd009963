//! What the daemon has seen of each table's writers, kept across restarts.
//!
//! LAZY writers write a heartbeat file before each write; EAGER writers (Hudi's default) write
//! none. Once the daemon has seen a heartbeat file of an instant on the table's active timeline
//! (pending or completed; an orphan of an instant absent from it, such as one a restore undid,
//! does not count), the table is known to have LAZY writers, and the writers report says so
//! (`seen_before`) when no heartbeat file is left. It is one process's memory, so it decides
//! nothing: a pending write without heartbeat file is judged the same with or without it (left
//! alone unless the operator states every writer is LAZY or it is older than a maximum write
//! duration); only the name of its verdict differs. That knowledge is kept in
//! `state_dir/writer-evidence/<table>.json`, one small
//! file per table written atomically (temporary file, fsync, rename, fsync of the folder), and
//! read back at start. A file whose `uri` is not the table's (the name was given to another
//! table) is ignored. Deleting a table's file makes the daemon forget it: do that when a table's
//! writers change from LAZY to EAGER.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::state_files::TableDocs;

/// What was seen on one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterEvidence {
    /// The table's URI when it was seen.
    pub uri: String,
    /// When a heartbeat file was first seen on it (epoch ms).
    pub heartbeats_first_seen_ms: i64,
}

/// The evidence of every table, in memory and in `state_dir/writer-evidence/`.
#[derive(Debug)]
pub struct EvidenceStore {
    docs: TableDocs<WriterEvidence>,
}

/// The largest evidence file read back (they are about a hundred bytes).
const MAX_FILE_BYTES: u64 = 64 * 1024;

impl EvidenceStore {
    /// Read every table's evidence from `dir` (missing: nothing known yet). A file that cannot
    /// be read or parsed is skipped with a warning that names it: that table is treated as having
    /// no evidence (which changes no verdict but a name), and the file is replaced the next time
    /// a heartbeat is seen on the table. Only a folder
    /// that cannot be listed stops the start.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            docs: TableDocs::load(
                dir,
                MAX_FILE_BYTES,
                "writer-evidence",
                "until a heartbeat is seen again, the table's writers report says no heartbeat was seen",
            )?,
        })
    }

    /// What was seen on table `name` at `uri`, if anything.
    pub fn get(&self, name: &str, uri: &str) -> Option<WriterEvidence> {
        self.docs.get(name).filter(|e| e.uri == uri)
    }

    /// Table `name`'s file, if it could not be read at start.
    pub fn unreadable(&self, name: &str) -> Option<&super::state_files::UnreadableStateFile> {
        self.docs.unreadable(name)
    }

    /// Files that could not be read at start.
    pub fn unreadable_count(&self) -> usize {
        self.docs.unreadable_count()
    }

    /// Record that heartbeat files were seen on table `name` at `uri` now, on disk first; the
    /// evidence is kept in memory only once it is durable (a failed write is retried at the next
    /// poll that sees heartbeat files). Returns the evidence: the first sighting stays.
    pub async fn record(
        &self,
        name: &str,
        uri: &str,
        now_ms: i64,
    ) -> anyhow::Result<WriterEvidence> {
        if let Some(e) = self.get(name, uri) {
            return Ok(e);
        }
        let evidence = WriterEvidence {
            uri: uri.to_string(),
            heartbeats_first_seen_ms: now_ms,
        };
        self.docs.put(name, evidence.clone()).await?;
        Ok(evidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn evidence_is_kept_across_a_reload_and_only_for_the_same_uri() {
        let dir = tempfile::tempdir().unwrap();
        let evidence_dir = dir.path().join("writer-evidence");
        let store = EvidenceStore::load(&evidence_dir).unwrap();
        assert_eq!(store.get("t", "s3://b/t"), None);
        let e = store.record("t", "s3://b/t", 1_000).await.unwrap();
        assert_eq!(e.heartbeats_first_seen_ms, 1_000);
        // Seen again later: the first sighting stays.
        let again = store.record("t", "s3://b/t", 5_000).await.unwrap();
        assert_eq!(again.heartbeats_first_seen_ms, 1_000);

        let reloaded = EvidenceStore::load(&evidence_dir).unwrap();
        assert_eq!(reloaded.get("t", "s3://b/t"), Some(e));
        // The name given to another table: nothing is known about that one.
        assert_eq!(reloaded.get("t", "s3://b/other"), None);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(&evidence_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["t.json"]);
    }

    #[tokio::test]
    async fn a_corrupt_evidence_file_is_skipped_and_replaced_at_the_next_sighting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.json"), b"{not json").unwrap();
        std::fs::write(dir.path().join("big.json"), vec![b' '; 70 * 1024]).unwrap();
        // A temporary file of an interrupted write is ignored.
        std::fs::write(dir.path().join(".u.json.tmp"), b"{half").unwrap();
        let good = WriterEvidence {
            uri: "s3://b/ok".into(),
            heartbeats_first_seen_ms: 7,
        };
        std::fs::write(
            dir.path().join("ok.json"),
            serde_json::to_vec(&good).unwrap(),
        )
        .unwrap();
        let store = EvidenceStore::load(dir.path()).unwrap();
        // The unreadable tables count as unseen (the safe side); the readable one is kept.
        assert_eq!(store.get("t", "s3://b/t"), None);
        assert_eq!(store.get("big", "s3://b/big"), None);
        assert_eq!(store.get("ok", "s3://b/ok"), Some(good));
        // The next sighting replaces the corrupt file.
        store.record("t", "s3://b/t", 9).await.unwrap();
        let reloaded = EvidenceStore::load(dir.path()).unwrap();
        assert_eq!(
            reloaded
                .get("t", "s3://b/t")
                .map(|e| e.heartbeats_first_seen_ms),
            Some(9)
        );
    }
}
