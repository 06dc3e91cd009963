//! Discovery sources (`[[discover]]`, issue #34): each rescanned on its own interval; the tables
//! it finds are registered as the source's, with the source's policy defaults, and dropped
//! once two complete scans in a row miss them.
//!
//! The parts: `naming` (the stable unique names of tables found); `scan` (one scan of a
//! source, what `hudi-keeper discover` prints); `found` (which tables found may be registered);
//! `reconcile` (pure: what a scan adds, renames and drops); `apply` (registering, replacing and
//! dropping, and the rules of precedence and names); `run` (the sources' tasks); `metrics`;
//! `glue` (the AWS Glue Data Catalog as a source, its calls signed by `sigv4`); `hms` (a Hive
//! Metastore, over `thrift`'s binary protocol).

mod apply;
mod found;
pub mod glue;
pub mod hms;
mod metrics;
pub mod naming;
mod reconcile;
mod run;
pub mod scan;
mod sigv4;
#[cfg(test)]
mod tests;
mod thrift;

pub use run::Discovery;
