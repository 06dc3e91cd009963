//! The crate's error type. Each variant carries the table (and instant and path where known).
//! It sits below the layers whose errors it wraps: the errors of the planners ([`PlanError`])
//! and of the markers ([`MarkerError`]) live here too, in files that name no module above them.

mod marker;
mod plan;

pub use marker::MarkerError;
pub use plan::PlanError;

use crate::config::ConfigError;
use crate::format::avro_error::AvroError;
use crate::storage::StorageError;

/// An error of hudi-keeper's core.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The table configuration is missing, corrupt or unsupported.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Markers could not be read.
    #[error(transparent)]
    Marker(#[from] MarkerError),
    /// A plan cannot be made or executed safely.
    #[error("table `{table}`: {source}")]
    Plan {
        /// The table URI.
        table: String,
        /// Why.
        #[source]
        source: PlanError,
    },
    /// hudi-keeper refuses to act on this instant; the message says why and what to do.
    #[error("table `{table}`, instant {instant}: {reason}")]
    Refused {
        /// The table URI.
        table: String,
        /// The instant.
        instant: String,
        /// Why, and what the operator can do.
        reason: String,
    },
    /// The audit's repair refuses, before changing anything; the message says why.
    #[error("table `{table}`: repair refused: {reason}")]
    RepairRefused {
        /// The table URI.
        table: String,
        /// Why, and what the operator can do.
        reason: String,
    },
    /// A repair journal in the table cannot be written, read or trusted; the repair stops
    /// before changing anything more.
    #[error("repair journal `{path}`: {reason}")]
    Journal {
        /// Its table-relative path.
        path: String,
        /// Why, and what the operator can do.
        reason: String,
    },
    /// A file could not be deleted; the rollback stays pending and resumes on the next run.
    #[error("table `{table}`, instant {instant}: could not delete `{path}`: {source}")]
    Delete {
        /// The table URI.
        table: String,
        /// The instant being rolled back.
        instant: String,
        /// The file.
        path: String,
        /// The storage error.
        #[source]
        source: Box<StorageError>,
    },
    /// The table lock could not be had in time; nothing was changed.
    #[error("table `{table}`: could not take the lock `{lock}` within {}; {hint}", crate::human::ms(.waited_ms))]
    LockTimeout {
        /// The table URI.
        table: String,
        /// The lock file or key.
        lock: String,
        /// How long hudi-keeper waited.
        waited_ms: u64,
        /// What the operator can check.
        hint: String,
    },
    /// The lock provider failed (unreachable, a corrupt lock file, a store without conditional
    /// writes); nothing was changed.
    #[error("table `{table}`: lock `{lock}`: {reason}")]
    Lock {
        /// The table URI.
        table: String,
        /// The lock file or key.
        lock: String,
        /// What went wrong, and what to do.
        reason: String,
    },
    /// A held lock was lost (its lease could not be renewed, its session went quiet); the
    /// holder stopped before its next mutation.
    #[error("table `{table}`: lost the lock `{lock}`: {reason}; stopped before the next change")]
    LockLost {
        /// The table URI.
        table: String,
        /// The lock file or key.
        lock: String,
        /// Why the lock is no longer safe.
        reason: String,
    },
    /// The run was asked to stop (a signal, a shutdown, a deadline) and stopped at a safe point,
    /// between storage calls where the table is resumable, with its lock released: what is done
    /// stays done, and running it again resumes it.
    #[error("table `{table}`: stopped at a safe point ({at}); rerun to resume")]
    Cancelled {
        /// The table URI.
        table: String,
        /// Where it stopped.
        at: String,
        /// The instant whose rollback (or the restore point whose restore) was left pending, if
        /// any: what a rerun resumes.
        pending: Option<String>,
    },
    /// An Avro timeline file could not be read.
    #[error("`{path}` of table `{table}` (instant {instant}): {source}")]
    Avro {
        /// The table URI.
        table: String,
        /// The instant the file belongs to.
        instant: String,
        /// The table-relative path.
        path: String,
        /// What went wrong.
        #[source]
        source: AvroError,
    },
    /// The store confirmed a delete, yet a listing still shows the file (a store that reports a
    /// missing key as deleted, asked for another key than the one listed). Nothing was
    /// completed: the rollback stays pending and resumes on the next run.
    #[error("table `{table}`, instant {instant}: `{path}` is still listed after the store confirmed its delete; the rollback was not completed and stays pending")]
    StillListed {
        /// The table URI.
        table: String,
        /// The instant being rolled back.
        instant: String,
        /// The file, as the listing names it.
        path: String,
    },
}
