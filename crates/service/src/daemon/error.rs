//! Why a call on a table could not be served. The HTTP status of each kind is decided in one
//! place, the API's conversion of a [`TableError`] (`http::error`).

use std::time::Duration;

use hudi_keeper_core::Error;

/// Why an API call on a table could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("no table named `{0}`")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// Beyond what the operator allowed the API.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Failed(String),
    /// The table is busy (a change holds it, or too many reads run): retry later.
    #[error("{0}")]
    Busy(String),
    /// Another replica owns the table (`[cluster]`): changes go to it.
    #[error("`{table}` is owned by {owner}, another replica: send changes to it")]
    NotOwner { table: String, owner: String },
}

pub(super) fn refusal(e: hudi_keeper_core::Error) -> TableError {
    match e {
        hudi_keeper_core::Error::Refused { .. } => TableError::Conflict(e.to_string()),
        other => TableError::Failed(other.to_string()),
    }
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration does not make a daemon: its `[cluster]`.
    #[error("invalid configuration: {0}")]
    Cluster(super::cluster::InvalidCluster),
    /// The configuration does not make a daemon: its ZooKeeper membership.
    #[error("invalid configuration: {0}")]
    Membership(String),
    /// A configured table could not be registered.
    #[error(transparent)]
    Table(#[from] TableError),
    /// The state folder (`server.state_dir`) could not be read or locked.
    #[error(transparent)]
    StateDir(anyhow::Error),
    /// A listener's address could not be read.
    #[error(transparent)]
    Listener(#[from] std::io::Error),
}

/// Why a poll of a table failed; its text is the table's `last_error`.
#[derive(Debug, thiserror::Error)]
pub enum PollError {
    /// The table may not be read where it is (`server.allowed_table_uris`).
    #[error("{0}")]
    Refused(String),
    /// Its store could not be opened.
    #[error("{0}")]
    Storage(#[from] hudi_keeper_core::storage::StorageError),
    /// Reading the table failed.
    #[error("{0}")]
    Table(#[from] hudi_keeper_core::Error),
    /// The reads did not end within `server.poll_timeout` (this long).
    #[error("timed out: the poll did not finish within server.poll_timeout ({} s)", .0.as_secs())]
    TimedOut(Duration),
    /// No table was opened.
    #[error("the table could not be opened")]
    NotOpened,
    /// The change the poll started (a rollback, or a restore it resumed) did not finish.
    #[error("{0}")]
    Change(MutationError),
}

impl From<PollError> for TableError {
    /// A read of the table through the API failed as a poll's would.
    fn from(e: PollError) -> Self {
        TableError::Failed(e.to_string())
    }
}

/// Why a change of a table did not finish.
#[derive(Debug)]
pub enum MutationError {
    /// It failed, was refused, or stopped at a safe point at shutdown.
    Failed(Error),
    /// It ran past `server.mutation_timeout`.
    TimedOut {
        /// The timeout.
        limit: Duration,
        /// Where it stopped; `None` when it reached no safe point within the grace and was
        /// abandoned.
        stopped_at: Option<String>,
    },
    /// The daemon stopped and the grace ran out.
    Abandoned,
}

impl std::fmt::Display for MutationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MutationError::Failed(e) => write!(f, "{e}"),
            MutationError::TimedOut {
                limit,
                stopped_at: Some(at),
            } => write!(
                f,
                "timed out: not finished within server.mutation_timeout ({} s); stopped at a safe point ({at}) and released the lock; it resumes later",
                limit.as_secs()
            ),
            MutationError::TimedOut {
                limit,
                stopped_at: None,
            } => write!(
                f,
                "timed out: not finished within server.mutation_timeout ({} s), and no safe point reached within server.shutdown_grace (the store may hang); abandoned, its lock released in the background; it resumes as after a crash",
                limit.as_secs()
            ),
            MutationError::Abandoned => write!(
                f,
                "abandoned at shutdown after server.shutdown_grace; its lock released in the background; it resumes at the next start"
            ),
        }
    }
}

impl MutationError {
    /// The API's view: a refusal is a conflict, anything else a failure.
    pub fn into_table_error(self) -> TableError {
        match self {
            MutationError::Failed(e) => refusal(e),
            other => TableError::Failed(other.to_string()),
        }
    }
}
