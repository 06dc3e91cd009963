//! Hudi's bytes: Avro timeline files.

pub mod avro;
pub(crate) mod avro_check;
pub(crate) mod avro_error;
pub mod commit;
#[cfg(test)]
mod fuzz_tests;
pub mod hfile;
pub mod log_block;
pub mod metadata_record;
pub mod restore;
pub mod rollback;
pub mod savepoint;
