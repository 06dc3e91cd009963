//! The executor: runs plans through storage in Hudi's order, resumable after a crash at any
//! step.

pub mod restore;
pub mod rollback;
pub mod savepoint;
mod timeline_ops;

pub use timeline_ops::new_instant_time;
