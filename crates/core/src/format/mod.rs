//! Hudi's bytes: Avro timeline files.

pub mod avro;
pub mod commit;
pub mod log_block;
pub mod restore;
pub mod rollback;
pub mod savepoint;
