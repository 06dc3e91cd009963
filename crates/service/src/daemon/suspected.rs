//! The writes the daemon suspected to be EAGER writers', kept across restarts.
//!
//! A pending write without heartbeat file that is younger than the minimum age, on a table
//! judged LAZY, is judged `eager_writer_suspected`: LAZY writers write their heartbeat before
//! the instant, so it looks like an EAGER writer's (no heartbeats), which may run for long. Once
//! it is older than the minimum age nothing on the table tells it apart from a LAZY writer that
//! died, so the daemon remembers the suspicion: such a write is never failed as `no_heartbeat`
//! (it is left alone unless it is older than a `max_write_duration`, or rolled back by name).
//! The instants are kept in `state_dir/suspected-eager-writes/<table>.json`, written atomically
//! (as `writer-evidence/`) whenever the set changes; instants no longer pending are dropped at
//! each poll. A file whose `uri` is not the table's is ignored; an unreadable one is skipped
//! with a warning (those writes are judged afresh: a young one is suspected again).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::state_files::TableDocs;

/// The suspected writes of one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuspectedWrites {
    /// The table's URI when they were suspected.
    pub uri: String,
    /// The pending instants judged `eager_writer_suspected`.
    pub instants: BTreeSet<String>,
}

/// The suspected writes of every table, in memory and in `state_dir/suspected-eager-writes/`.
#[derive(Debug)]
pub struct SuspectedStore {
    docs: TableDocs<SuspectedWrites>,
}

/// The largest file read back (a pending instant takes about 20 bytes).
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

impl SuspectedStore {
    /// Read every table's suspected writes from `dir` (missing: none yet). An unreadable file is
    /// skipped with a warning that names it; only a folder that cannot be listed stops the start.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            docs: TableDocs::load(
                dir,
                MAX_FILE_BYTES,
                "suspected EAGER writes",
                "that table's pending writes are judged afresh",
            )?,
        })
    }

    /// The suspected writes of table `name` at `uri`.
    pub fn get(&self, name: &str, uri: &str) -> Arc<BTreeSet<String>> {
        Arc::new(
            self.docs
                .get(name)
                .filter(|s| s.uri == uri)
                .map(|s| s.instants)
                .unwrap_or_default(),
        )
    }

    /// Keep `instants` as the suspected writes of table `name` at `uri` on disk, when they
    /// differ from what is there. Returns whether they were written. (The daemon keeps them in
    /// memory itself, whether or not this succeeds: the safe side.)
    pub async fn set(
        &self,
        name: &str,
        uri: &str,
        instants: &BTreeSet<String>,
    ) -> anyhow::Result<bool> {
        let doc = SuspectedWrites {
            uri: uri.to_string(),
            instants: instants.clone(),
        };
        let on_disk = self.docs.get(name);
        if on_disk.as_ref() == Some(&doc) || (on_disk.is_none() && instants.is_empty()) {
            return Ok(false);
        }
        self.docs.put(name, doc).await?;
        Ok(true)
    }
}

/// The next suspected writes of a table: those remembered that are still pending, and those
/// judged `eager_writer_suspected` now.
pub fn next_suspected<'a>(
    remembered: &BTreeSet<String>,
    pending: impl IntoIterator<Item = &'a str>,
    suspected_now: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<String> {
    let pending: BTreeSet<&str> = pending.into_iter().collect();
    remembered
        .iter()
        .filter(|t| pending.contains(t.as_str()))
        .cloned()
        .chain(suspected_now.into_iter().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_of(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn suspected_writes_are_kept_across_a_reload_only_for_the_same_uri_and_only_while_pending(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("suspected-eager-writes");
        let store = SuspectedStore::load(&d).unwrap();
        assert!(store.get("t", "s3://b/t").is_empty());
        let next = next_suspected(&store.get("t", "s3://b/t"), ["1", "2"], ["1"]);
        assert!(store.set("t", "s3://b/t", &next).await.unwrap());
        assert!(!store.set("t", "s3://b/t", &next).await.unwrap());
        let reloaded = SuspectedStore::load(&d).unwrap();
        assert_eq!(*reloaded.get("t", "s3://b/t"), set_of(&["1"]));
        assert!(reloaded.get("t", "s3://b/other").is_empty());
        // Still pending: kept; no longer pending: dropped.
        let remembered = reloaded.get("t", "s3://b/t");
        assert_eq!(
            next_suspected(&remembered, ["1", "3"], ["3"]),
            set_of(&["1", "3"])
        );
        assert_eq!(next_suspected(&remembered, ["3"], []), set_of(&[]));
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["t.json"]);
    }

    #[tokio::test]
    async fn an_unreadable_file_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.json"), b"{not json").unwrap();
        let store = SuspectedStore::load(dir.path()).unwrap();
        assert!(store.get("t", "s3://b/t").is_empty());
    }
}
