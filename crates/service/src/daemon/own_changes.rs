//! The rollbacks and restores the daemon started, kept across restarts.
//!
//! A pending rollback younger than the minimum instant age is left "to whoever is running it":
//! another process may be deleting its files right now, and its deletes run without the table
//! lock (as Hudi's do). But when that process was this daemon, killed mid-rollback, nobody runs
//! it: waiting out the minimum age (10 minutes by default) only leaves the table dirty. So the
//! daemon records each rollback and restore before its first timeline file is written, in
//! `state_dir/own-changes/<table>.json` (written atomically, as `writer-evidence/`), and after a
//! restart resumes its own pending rollbacks and restores at the first poll. The records are
//! trusted because no other process runs with the same `state_dir` (the daemon holds an
//! exclusive lock on `state_dir/daemon.lock` while it runs: `lock_state_dir`), and a change of
//! this process runs only under the table's mutex, which the poll holds. Records of instants no
//! longer pending are dropped at each poll; a file whose `uri` is not the table's is ignored; an
//! unreadable one is skipped with a warning (those changes wait out the minimum age, the old
//! behaviour).

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::Context;
use hudi_keeper_core::exec::{ChangeJournal, StartedChange};
use hudi_keeper_core::timeline::Action;
use serde::{Deserialize, Serialize};

use super::state_files::TableDocs;

/// What kind of change a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Rollback,
    Restore,
}

/// One change the daemon started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnChange {
    pub kind: ChangeKind,
    /// The rollback or restore instant.
    pub instant: String,
    /// The instant a rollback undoes, or a restore's restore point.
    pub target: String,
    /// A restore to a savepoint (`restoreToSavepoint`) rather than to any completed instant.
    #[serde(default)]
    pub require_savepoint: bool,
    /// When it was recorded (epoch ms).
    pub started_ms: i64,
}

/// The changes of one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnChanges {
    /// The table's URI when they were started.
    pub uri: String,
    pub changes: Vec<OwnChange>,
}

/// The changes of every table, in memory and in `state_dir/own-changes/`.
#[derive(Debug)]
pub struct OwnChangesStore {
    docs: TableDocs<OwnChanges>,
}

/// The largest file read back (a record takes about 150 bytes).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The most records kept per table: a table has a few pending changes at most; more means the
/// records are not being pruned, and the oldest go first.
const MAX_RECORDS: usize = 1000;

impl OwnChangesStore {
    /// Read every table's records from `dir` (missing: none yet). An unreadable file is skipped
    /// with a warning that names it; only a folder that cannot be listed stops the start.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            docs: TableDocs::load(
                dir,
                MAX_FILE_BYTES,
                "own-changes",
                "that table's pending rollbacks and restores wait out min_instant_age like anyone else's",
            )?,
        })
    }

    /// Table `name`'s file, if it could not be read at start.
    pub fn unreadable(&self, name: &str) -> Option<&super::state_files::UnreadableStateFile> {
        self.docs.unreadable(name)
    }

    /// Files that could not be read at start.
    pub fn unreadable_count(&self) -> usize {
        self.docs.unreadable_count()
    }

    /// The recorded changes of table `name` at `uri`.
    pub fn get(&self, name: &str, uri: &str) -> Vec<OwnChange> {
        self.docs
            .get(name)
            .filter(|c| c.uri == uri)
            .map(|c| c.changes)
            .unwrap_or_default()
    }

    /// The recorded rollback instants of table `name` at `uri`.
    pub fn rollbacks(&self, name: &str, uri: &str) -> Arc<BTreeSet<String>> {
        Arc::new(
            self.get(name, uri)
                .into_iter()
                .filter(|c| c.kind == ChangeKind::Rollback)
                .map(|c| c.instant)
                .collect(),
        )
    }

    /// Add `change` to the records of table `name` at `uri`, on disk before it returns.
    pub async fn record(&self, name: &str, uri: &str, change: OwnChange) -> anyhow::Result<()> {
        let mut changes = self.get(name, uri);
        changes.retain(|c| c.instant != change.instant);
        changes.push(change);
        if changes.len() > MAX_RECORDS {
            changes.drain(..changes.len() - MAX_RECORDS);
        }
        self.store(name, uri, changes).await
    }

    /// Keep only the records of table `name` at `uri` whose instant is in `pending`. Returns
    /// whether the file changed.
    pub async fn retain_pending(
        &self,
        name: &str,
        uri: &str,
        pending: &BTreeSet<&str>,
    ) -> anyhow::Result<bool> {
        let before = self.get(name, uri);
        let after: Vec<OwnChange> = before
            .iter()
            .filter(|c| pending.contains(c.instant.as_str()))
            .cloned()
            .collect();
        if after == before {
            return Ok(false);
        }
        self.store(name, uri, after).await?;
        Ok(true)
    }

    async fn store(&self, name: &str, uri: &str, changes: Vec<OwnChange>) -> anyhow::Result<()> {
        let doc = OwnChanges {
            uri: uri.to_string(),
            changes,
        };
        self.docs.put(name, doc).await
    }
}

/// The journal of one table's changes started by one call (a poll's rollback, or an API
/// rollback or restore): records each in the store before its first timeline file.
#[derive(Debug)]
pub struct TableJournal {
    pub store: Arc<OwnChangesStore>,
    pub name: String,
    pub uri: String,
    /// For a restore: whether it was asked to a savepoint.
    pub require_savepoint: bool,
}

impl ChangeJournal for TableJournal {
    fn starting<'a>(
        &'a self,
        change: &'a StartedChange,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move {
            let kind = match change.action {
                Action::Restore => ChangeKind::Restore,
                _ => ChangeKind::Rollback,
            };
            let record = OwnChange {
                kind,
                instant: change.instant.clone(),
                target: change.target.clone(),
                require_savepoint: kind == ChangeKind::Restore && self.require_savepoint,
                started_ms: chrono::Utc::now().timestamp_millis(),
            };
            self.store
                .record(&self.name, &self.uri, record)
                .await
                .map_err(|e| format!("state_dir/own-changes: {e:#}"))
        })
    }
}

/// Hold an exclusive lock on `state_dir/daemon.lock` for as long as the returned file is open:
/// no two daemons share a `state_dir`, so the changes recorded there are this daemon's (or an
/// earlier process's of it that is gone).
pub fn lock_state_dir(state_dir: &Path) -> anyhow::Result<std::fs::File> {
    super::state_files::create_private_dir(state_dir)
        .with_context(|| format!("cannot create state_dir {}", state_dir.display()))?;
    let path = state_dir.join("daemon.lock");
    let mut open = std::fs::OpenOptions::new();
    open.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let file = open
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "state_dir {} is in use by another hudi-keeper daemon (it holds {}): each daemon needs its own state_dir",
            state_dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: ChangeKind, instant: &str) -> StartedChange {
        StartedChange {
            action: match kind {
                ChangeKind::Rollback => Action::Rollback,
                ChangeKind::Restore => Action::Restore,
            },
            instant: instant.into(),
            target: "20240101000000000".into(),
        }
    }

    #[tokio::test]
    async fn changes_are_kept_across_a_reload_for_the_same_uri_until_no_longer_pending() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("own-changes");
        let store = Arc::new(OwnChangesStore::load(&d).unwrap());
        let journal = TableJournal {
            store: store.clone(),
            name: "t".into(),
            uri: "s3://b/t".into(),
            require_savepoint: true,
        };
        journal
            .starting(&change(ChangeKind::Rollback, "1"))
            .await
            .unwrap();
        journal
            .starting(&change(ChangeKind::Restore, "2"))
            .await
            .unwrap();
        let reloaded = OwnChangesStore::load(&d).unwrap();
        assert_eq!(
            *reloaded.rollbacks("t", "s3://b/t"),
            BTreeSet::from(["1".to_string()])
        );
        let restore = &reloaded.get("t", "s3://b/t")[1];
        assert_eq!(
            (restore.kind, restore.require_savepoint),
            (ChangeKind::Restore, true)
        );
        assert!(reloaded.get("t", "s3://b/other").is_empty());
        assert!(reloaded
            .retain_pending("t", "s3://b/t", &BTreeSet::from(["2"]))
            .await
            .unwrap());
        assert!(!reloaded
            .retain_pending("t", "s3://b/t", &BTreeSet::from(["2"]))
            .await
            .unwrap());
        let again = OwnChangesStore::load(&d).unwrap();
        assert!(again.rollbacks("t", "s3://b/t").is_empty());
        assert_eq!(again.get("t", "s3://b/t").len(), 1);
    }

    #[tokio::test]
    async fn a_change_that_cannot_be_recorded_is_refused_by_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("own-changes");
        let store = Arc::new(OwnChangesStore::load(&folder).unwrap());
        // A file where the folder should be: nothing can be written under it.
        std::fs::write(&folder, b"").unwrap();
        let journal = TableJournal {
            store,
            name: "t".into(),
            uri: "s3://b/t".into(),
            require_savepoint: false,
        };
        let err = journal
            .starting(&change(ChangeKind::Rollback, "1"))
            .await
            .unwrap_err();
        assert!(err.contains("own-changes"), "{err}");
    }

    #[test]
    fn a_state_dir_is_locked_by_one_daemon_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_state_dir(dir.path()).unwrap();
        let err = lock_state_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("in use by another hudi-keeper daemon"),
            "{err}"
        );
        drop(held);
        lock_state_dir(dir.path()).unwrap();
    }
}
