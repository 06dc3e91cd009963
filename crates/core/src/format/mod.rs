//! Hudi's bytes: Avro timeline files.

pub mod avro;
pub mod commit;
pub mod hfile;
pub mod log_block;
pub mod metadata_record;
pub mod restore;
pub mod rollback;
pub mod savepoint;
