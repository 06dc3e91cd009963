//! hudi-keeper's core: Apache Hudi's timeline, heartbeats, markers and failed-write detection,
//! over any object store through `object_store`.
//!
//! Layers, bottom up: [`storage`] (the one I/O seam), [`table`] (`hoodie.properties`),
//! [`timeline`] (instants and file names), [`format`] (Hudi's Avro files), [`protocol`]
//! (heartbeats, markers, detection), and [`inspect`] (the operator's view of a table).

#![warn(missing_docs)]

pub mod error;
pub mod exec;
pub mod format;
#[cfg(test)]
mod fuzz;
pub mod inspect;
pub mod plan;
pub mod protocol;
pub mod storage;
pub mod table;
pub mod timeline;

pub use error::Error;
pub use table::Table;
