//! hudi-keeper's core: Apache Hudi's timeline, heartbeats, markers and failed-write detection,
//! over any object store through `object_store`.
//!
//! Layers, bottom up: [`storage`] (the one I/O seam) and [`format`](mod@format) (Hudi's
//! Avro and HFile bytes); the table's configuration (`hoodie.properties`, re-exported by
//! [`table`]); [`timeline`] (instants and file names); [`error`] (the crate's error and the
//! planners' and markers' errors it wraps); the [`Table`] handle; [`protocol`] (heartbeats,
//! markers, detection and what it observes, locks); [`plan`] (pure planners); [`inspect`]
//! (the operator's view of a table); [`exec`] (rollback, restore, savepoint); [`audit`]
//! (every data file classified by the instant that wrote it); and [`discover`] (the tables
//! under a prefix).

#![warn(missing_docs)]

pub mod audit;
pub(crate) mod config;
pub mod discover;
pub mod error;
pub mod exec;
pub mod format;
#[cfg(test)]
mod fuzz;
pub mod human;
pub mod inspect;
pub mod plan;
pub mod protocol;
pub mod storage;
pub mod table;
#[cfg(test)]
mod test_logs;
pub mod timeline;

pub use error::Error;
pub use table::Table;
