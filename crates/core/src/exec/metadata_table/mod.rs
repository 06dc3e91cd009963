//! The metadata table (`.hoodie/metadata`): everything a rollback or a restore of the data table
//! does to it, in one place (hudi-format.md §7, `../shared/v6-metadata-table.md`).
//!
//! - [`execute`]: what [`rollback`] and [`v6`] share: a rollback run on the metadata table
//!   itself, and its outcome.
//! - [`rollback`]: the metadata table's part of a data-table rollback of instant T with rollback
//!   instant R: refuse when a compaction covers T, else roll back its deltacommit T (Hudi 1.x:
//!   with the same R).
//! - [`v6`]: the same on a table-version-6 table, as Hudi 0.15 does it: a metadata-table
//!   deltacommit at R recording the rollback (an HFile data block of files-partition records
//!   for merge-on-read), then the rollback of its deltacommit T at `R006`.
//! - [`v5`]: the same on a table-version-5 table, as Hudi 0.13 does it: a pending deltacommit T
//!   rolled back first at a fresh instant, then a deltacommit at R recording the rollback (the
//!   deleted files marked deleted when T completed there); T itself stays.
//! - [`restore`]: what a restore does to it: restore it to the same point (Hudi 1.x; on table
//!   version 6 as Hudi 0.15 does, with [`v6_restore`]'s sync deltacommit), or delete it for the
//!   next writer to rebuild.
//! - [`files_partition`]: the `files` partition read as Hudi's reader merges it (table versions
//!   6, 8 and 9), for [`v6_restore`] and for the audit's check of the metadata table.
//! - [`files_log`]: the `files` partition's latest file slice and a deltacommit completed with one
//!   HFile data block appended there, shared by [`v5`], [`v6`], [`v6_restore`] and
//!   [`files_partition`].
//! - [`sync`]: the start of the deltacommit Hudi writes after the metadata table's own restore,
//!   which [`restore`] (1.x) and [`v6_restore`] (version 6) both finish their way.

pub(super) mod execute;
mod files_log;
pub(crate) mod files_partition;
pub(crate) mod restore;
pub(super) mod rollback;
mod sync;
pub(in crate::exec) mod v5;
pub(super) mod v6;
pub(super) mod v6_restore;

pub use execute::MetadataTableOutcome;
pub use restore::MetadataTableAction;
