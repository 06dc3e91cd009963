//! The crate's error type. Each variant carries the table (and instant and path where known).

use crate::format::avro::AvroError;
use crate::protocol::markers::MarkerError;
use crate::storage::StorageError;
use crate::table::ConfigError;

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
}
