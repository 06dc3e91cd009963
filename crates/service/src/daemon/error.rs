//! Why a call on a table could not be served. The HTTP status of each kind is decided in one
//! place, the API's conversion of a [`TableError`] (`http::error`).

use std::time::Duration;

use super::deadline::MutationError;

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
    /// The configuration does not make a daemon (its `[cluster]`).
    #[error("invalid configuration: {0}")]
    Config(String),
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
