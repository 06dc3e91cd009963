//! What the daemon has seen of each table's writers, kept across restarts.
//!
//! LAZY writers write a heartbeat file before each write; EAGER writers (Hudi's default) write
//! none. Once the daemon has seen a heartbeat file on a table (pending or not), the table is known
//! to have LAZY writers, and a pending write without heartbeat file older than the minimum age is
//! a dead writer's. That knowledge is kept in `state_dir/writer-evidence/<table>.json`, one small
//! file per table written atomically (temporary file, fsync, rename, fsync of the folder), and
//! read back at start. A file whose `uri` is not the table's (the name was given to another
//! table) is ignored. Deleting a table's file makes the daemon forget it: do that when a table's
//! writers change from LAZY to EAGER.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex as StdMutex;

use anyhow::Context;
use serde::{Deserialize, Serialize};

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
    dir: PathBuf,
    seen: StdMutex<BTreeMap<String, WriterEvidence>>,
}

/// The largest evidence file read back (they are about a hundred bytes).
const MAX_FILE_BYTES: u64 = 64 * 1024;

impl EvidenceStore {
    /// Read every table's evidence from `dir` (missing: nothing known yet). A file that cannot
    /// be read or parsed is an error naming it: the daemon does not start on a state it cannot
    /// read.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let mut seen = BTreeMap::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => Some(e),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
        };
        for entry in entries.into_iter().flatten() {
            let entry = entry.with_context(|| format!("cannot read {}", dir.display()))?;
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue; // temporary files of an interrupted write, and strangers
            };
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            if size > MAX_FILE_BYTES {
                anyhow::bail!(
                    "{} is {size} bytes, not a writer-evidence file; delete it (the daemon then forgets that table's heartbeats)",
                    path.display()
                );
            }
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let evidence: WriterEvidence = serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not a writer-evidence file; delete it (the daemon then forgets that table's heartbeats)",
                    path.display()
                )
            })?;
            seen.insert(name.to_string(), evidence);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            seen: StdMutex::new(seen),
        })
    }

    /// What was seen on table `name` at `uri`, if anything.
    pub fn get(&self, name: &str, uri: &str) -> Option<WriterEvidence> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(name).filter(|e| e.uri == uri).cloned()
    }

    /// Record that heartbeat files were seen on table `name` at `uri` now, on disk first; the
    /// evidence is kept in memory only once it is durable (a failed write is retried at the next
    /// poll that sees heartbeat files). Returns the evidence.
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
        let dir = self.dir.clone();
        let file = format!("{name}.json");
        let bytes = serde_json::to_vec_pretty(&evidence)?;
        tokio::task::spawn_blocking(move || write_atomically(&dir, &file, &bytes))
            .await
            .context("the state writer task failed")??;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        Ok(seen
            .entry(name.to_string())
            .and_modify(|e| {
                if e.uri != uri {
                    *e = evidence.clone();
                }
            })
            .or_insert(evidence)
            .clone())
    }
}

/// Write `dir/file` so that a crash leaves the old file or the new one, never a mix: a temporary
/// file is written and fsynced, renamed over the target, and the folder fsynced.
fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let target = dir.join(file);
    let tmp = dir.join(format!(".{file}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, &target)
        .with_context(|| format!("cannot replace {}", target.display()))?;
    // The rename is durable once the folder is.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
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

    #[test]
    fn a_corrupt_evidence_file_stops_the_start_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.json"), b"{not json").unwrap();
        // A temporary file of an interrupted write is ignored.
        std::fs::write(dir.path().join(".u.json.tmp"), b"{half").unwrap();
        let err = EvidenceStore::load(dir.path()).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("t.json"), "{msg}");
        assert!(msg.contains("delete it"), "{msg}");
    }
}
