//! Pure planners: a loaded timeline and listings in, a plan out.

pub mod metadata_table;
pub mod restore;
pub mod rollback;
pub mod savepoint;
