//! Hudi's bytes: Avro timeline files.

pub mod avro;
pub mod rollback;
