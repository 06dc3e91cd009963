//! `HoodieSavepointMetadata`, the completed savepoint file (`T.savepoint`, or `T_C.savepoint` in
//! layout 2), in Hudi's exact writer schema. What Hudi puts in it (observed with 0.15 and 1.1,
//! `tests/interop/observations/savepoint-restore.md`): `savepointedAt` in epoch milliseconds, and
//! per partition the bare names of the files of the savepointed view (for merge-on-read, the
//! whole latest file slice, base and log files).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;
use serde::Serialize;

use super::avro::{cached_schema, read_single_record_as, write_single_record, AvroError};
use super::rollback::{get, get_long, get_opt_int, get_str_array, get_string, shape};

const SCHEMA_JSON: &str = include_str!("../../avro/HoodieSavepointMetadata.avsc");

fn schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, SCHEMA_JSON)
}

/// `HoodieSavepointMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SavepointMetadata {
    /// Who took it.
    pub savepointed_by: String,
    /// When, in epoch milliseconds.
    pub savepointed_at: i64,
    /// The comment given.
    pub comments: String,
    /// Partition → the file names of the savepointed view there.
    pub partition_metadata: BTreeMap<String, Vec<String>>,
    /// `version` (1).
    pub version: Option<i32>,
}

impl SavepointMetadata {
    /// The number of files the savepoint keeps.
    pub fn file_count(&self) -> usize {
        self.partition_metadata.values().map(Vec::len).sum()
    }

    /// Read a completed savepoint file.
    pub fn from_avro(bytes: &[u8]) -> Result<Self, AvroError> {
        let v = read_single_record_as(bytes, schema()?)?;
        let partition_metadata = match get(&v, "partitionMetadata")? {
            Value::Map(m) => m
                .iter()
                .map(|(k, p)| Ok((k.clone(), get_str_array(p, "savepointDataFile")?)))
                .collect::<Result<BTreeMap<_, _>, AvroError>>()?,
            other => return Err(shape("partitionMetadata", other)),
        };
        let savepointed_at = get_long(&v, "savepointedAt")?;
        Ok(Self {
            savepointed_by: get_string(&v, "savepointedBy")?,
            savepointed_at,
            comments: get_string(&v, "comments")?,
            partition_metadata,
            version: get_opt_int(&v, "version")?,
        })
    }

    /// Write it as Hudi does.
    pub fn to_avro(&self) -> Result<Vec<u8>, AvroError> {
        let partitions = self
            .partition_metadata
            .iter()
            .map(|(k, files)| {
                (
                    k.clone(),
                    Value::Record(vec![
                        ("partitionPath".into(), Value::String(k.clone())),
                        (
                            "savepointDataFile".into(),
                            Value::Array(files.iter().cloned().map(Value::String).collect()),
                        ),
                    ]),
                )
            })
            .collect();
        let version = match self.version {
            Some(v) => Value::Union(0, Box::new(Value::Int(v))),
            None => Value::Union(1, Box::new(Value::Null)),
        };
        let record = Value::Record(vec![
            (
                "savepointedBy".into(),
                Value::String(self.savepointed_by.clone()),
            ),
            ("savepointedAt".into(), Value::Long(self.savepointed_at)),
            ("comments".into(), Value::String(self.comments.clone())),
            ("partitionMetadata".into(), Value::Map(partitions)),
            ("version".into(), version),
        ]);
        write_single_record(SCHEMA_JSON, schema()?, record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn savepoint_metadata_round_trips_through_hudis_schema() {
        let m = SavepointMetadata {
            savepointed_by: "sp-user".into(),
            savepointed_at: 1_796_035_000_123,
            comments: "before the backfill".into(),
            partition_metadata: BTreeMap::from([
                (
                    "p0".to_string(),
                    vec!["fg-0_0-1-1_20261130103406447.parquet".to_string()],
                ),
                ("p3".to_string(), vec![]),
            ]),
            version: Some(1),
        };
        let bytes = m.to_avro().unwrap();
        assert_eq!(SavepointMetadata::from_avro(&bytes).unwrap(), m);
        assert_eq!(m.file_count(), 1);
        assert!(SavepointMetadata::from_avro(b"not avro").is_err());
    }
}
