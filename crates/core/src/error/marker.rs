//! Why markers could not be read: an error type of its own, below the crate's [`crate::Error`],
//! which wraps it.

use crate::storage::StorageError;

/// Why markers could not be read. A marker that would point outside the table is an error, never
/// a path to use.
#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    /// A marker name is malformed.
    #[error("marker `{marker}` of instant {instant} is malformed: {reason}")]
    Malformed {
        /// The instant.
        instant: String,
        /// The marker name.
        marker: String,
        /// What is wrong.
        reason: String,
    },
    /// `MARKERS.type` holds something other than `TIMELINE_SERVER_BASED`.
    #[error(
        "`MARKERS.type` of instant {instant} says `{found}`; only TIMELINE_SERVER_BASED is known"
    )]
    UnknownType {
        /// The instant.
        instant: String,
        /// What the file holds.
        found: String,
    },
    /// A `MARKERS<n>` file is not UTF-8.
    #[error("marker file `{path}` of instant {instant} is not UTF-8 text")]
    NotText {
        /// The instant.
        instant: String,
        /// The file.
        path: String,
    },
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
