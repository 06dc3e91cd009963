//! Hudi's timeline actions and instant states.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A timeline action (`HoodieTimeline` action names). `schemacommit` lives outside the active
/// timeline folder and is not modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// `commit`: a write on a copy-on-write table, or a completed compaction.
    Commit,
    /// `deltacommit`: a write on a merge-on-read table, or a completed log compaction.
    #[serde(rename = "deltacommit")]
    DeltaCommit,
    /// `replacecommit`: insert-overwrite, delete-partition, and (0.x, and completed 1.x) clustering.
    #[serde(rename = "replacecommit")]
    ReplaceCommit,
    /// `clustering`: a pending clustering in layout 2.
    Clustering,
    /// `compaction`: a pending compaction.
    Compaction,
    /// `logcompaction`: a pending log compaction.
    #[serde(rename = "logcompaction")]
    LogCompaction,
    /// `clean`.
    Clean,
    /// `rollback`.
    Rollback,
    /// `savepoint`.
    Savepoint,
    /// `restore`.
    Restore,
    /// `indexing`.
    Indexing,
}

impl Action {
    /// Every action.
    pub const ALL: [Action; 11] = [
        Action::Commit,
        Action::DeltaCommit,
        Action::ReplaceCommit,
        Action::Clustering,
        Action::Compaction,
        Action::LogCompaction,
        Action::Clean,
        Action::Rollback,
        Action::Savepoint,
        Action::Restore,
        Action::Indexing,
    ];

    /// Hudi's name of the action.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::DeltaCommit => "deltacommit",
            Action::ReplaceCommit => "replacecommit",
            Action::Clustering => "clustering",
            Action::Compaction => "compaction",
            Action::LogCompaction => "logcompaction",
            Action::Clean => "clean",
            Action::Rollback => "rollback",
            Action::Savepoint => "savepoint",
            Action::Restore => "restore",
            Action::Indexing => "indexing",
        }
    }

    /// The action a completed instant of this action is recorded as (a compaction completes as
    /// a `commit`, a log compaction as a `deltacommit`, a clustering as a `replacecommit`).
    pub fn completed_action(self) -> Action {
        match self {
            Action::Compaction => Action::Commit,
            Action::LogCompaction => Action::DeltaCommit,
            Action::Clustering => Action::ReplaceCommit,
            a => a,
        }
    }

    /// Whether the action writes table data (the "write timeline").
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Action::Commit
                | Action::DeltaCommit
                | Action::ReplaceCommit
                | Action::Clustering
                | Action::Compaction
                | Action::LogCompaction
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown action name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown timeline action `{0}`")]
pub struct UnknownAction(pub String);

impl FromStr for Action {
    type Err = UnknownAction;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownAction(s.to_string()))
    }
}

/// The state of an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Planned, not started.
    Requested,
    /// Started, not finished.
    Inflight,
    /// Finished.
    Completed,
}

impl State {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Requested => "requested",
            State::Inflight => "inflight",
            State::Completed => "completed",
        }
    }

    /// Whether the instant is not completed.
    pub fn is_pending(self) -> bool {
        self != State::Completed
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
