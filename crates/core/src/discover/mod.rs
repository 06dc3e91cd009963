//! Finding the Hudi tables under a prefix (a local folder, `s3://`, `gs://` or `az://`).
//!
//! A table is a folder holding `.hoodie/hoodie.properties`. A scan lists the prefix one level
//! at a time (a delimiter listing per folder visited), reads the `hoodie.properties` of each
//! folder that has a `.hoodie` folder, and never lists below a folder with a `.hoodie` folder
//! (a table, or one being made) nor any `.hoodie` itself. It goes no deeper than
//! [`ScanLimits::max_depth`] and makes at most [`ScanLimits::max_requests`] requests; a scan cut
//! short by either its budget or an error is *incomplete* ([`ScanReport::complete`]), so that a
//! caller never takes a table missing from it for a table gone.
//!
//! The parts: [`Filters`] (`globs`: include and exclude globs on table names and locations),
//! [`ScanPlanner`] (`plan`: the pure planner, which says what to read next and judges what was
//! read), and [`scan`] (`exec`: the executor, which reads through the [`Storage`] seam).
//!
//! [`Storage`]: crate::storage::Storage

mod exec;
mod globs;
mod plan;
#[cfg(test)]
mod tests;

pub use exec::{scan, ScanOptions, DEFAULT_CONCURRENCY};
pub use globs::{FilterSettings, Filters};
pub use plan::{
    FoundTable, ScanLimits, ScanPlanner, ScanProblem, ScanProgress, ScanReport, Step, MAX_PROBLEMS,
};

/// Why a scan could not start (a scan that started reports its problems in its
/// [`ScanReport`]).
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// A glob of the filters does not parse.
    #[error("discovery under `{prefix}`: the {key} glob `{glob}` is invalid: {reason}")]
    Glob {
        /// The prefix scanned.
        prefix: String,
        /// Which filter (`include_names`, …).
        key: &'static str,
        /// The glob.
        glob: String,
        /// Why.
        reason: String,
    },
    /// The prefix cannot be opened as a store.
    #[error("discovery under `{prefix}`: {source}")]
    Open {
        /// The prefix scanned.
        prefix: String,
        /// Why.
        #[source]
        source: Box<crate::storage::StorageError>,
    },
    /// The limits cannot make a scan (a budget of 0 requests).
    #[error("discovery under `{prefix}`: {reason}")]
    Limits {
        /// The prefix scanned.
        prefix: String,
        /// Why.
        reason: &'static str,
    },
}
