//! `HoodieCommitMetadata` in Avro (the layout-2 form of a completed commit or deltacommit): the
//! schema a metadata-table deltacommit records, and the empty deltacommit Hudi 1.x writes into
//! the metadata table after restoring it (`partitionToWriteStats: {}`, the metadata record
//! schema in `extraMetadata`).

use std::collections::HashMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;

use super::avro::{cached_schema, field, read_single_record, write_single_record, AvroError};

const SCHEMA_JSON: &str = include_str!("../../avro/HoodieCommitMetadata.avsc");

fn schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, SCHEMA_JSON)
}

/// The `extraMetadata.schema` of an Avro commit metadata file, if it has one.
pub fn schema_of(bytes: &[u8]) -> Option<String> {
    let v = read_single_record(bytes).ok()?;
    match field(&v, "extraMetadata")? {
        Value::Map(m) => match m.get("schema")? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// A commit metadata that wrote nothing, recording `schema` and the operation.
pub fn empty_commit_metadata(schema_text: &str, operation: &str) -> Result<Vec<u8>, AvroError> {
    let extra: HashMap<String, Value> =
        HashMap::from([("schema".to_string(), Value::String(schema_text.to_string()))]);
    let record = Value::Record(vec![
        (
            "partitionToWriteStats".into(),
            Value::Union(1, Box::new(Value::Map(HashMap::new()))),
        ),
        (
            "compacted".into(),
            Value::Union(1, Box::new(Value::Boolean(false))),
        ),
        (
            "extraMetadata".into(),
            Value::Union(1, Box::new(Value::Map(extra))),
        ),
        ("version".into(), Value::Union(1, Box::new(Value::Null))),
        (
            "operationType".into(),
            Value::Union(1, Box::new(Value::String(operation.to_string()))),
        ),
    ]);
    write_single_record(SCHEMA_JSON, schema()?, record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_commit_records_its_schema_and_reads_back() {
        let bytes = empty_commit_metadata("{\"type\":\"record\"}", "UPSERT_PREPPED").unwrap();
        assert_eq!(schema_of(&bytes).as_deref(), Some("{\"type\":\"record\"}"));
        let v = read_single_record(&bytes).unwrap();
        assert!(matches!(field(&v, "partitionToWriteStats"), Some(Value::Map(m)) if m.is_empty()));
        assert!(
            matches!(field(&v, "operationType"), Some(Value::String(s)) if s == "UPSERT_PREPPED")
        );
        assert_eq!(schema_of(b"{}"), None);
    }
}
