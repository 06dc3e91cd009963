//! `HoodieRollbackPlan` (`<R>.rollback.requested`) and `HoodieRollbackMetadata` (the completed
//! rollback file), in Hudi's exact writer schemas (`crates/core/avro/`, from real tables).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;
use serde::Serialize;

use super::avro::{cached_schema, read_single_record_as, write_single_record, AvroError};

const PLAN_SCHEMA_JSON: &str = include_str!("../../avro/HoodieRollbackPlan.avsc");
const METADATA_SCHEMA_JSON: &str = include_str!("../../avro/HoodieRollbackMetadata.avsc");
/// Hudi 0.12/0.13's (table version 5): without `logFilesFromFailedCommit` (added in 0.14); the
/// same text, field for field, as the schema Hudi 0.13.1 embeds in its rollback files.
const METADATA_SCHEMA_V5_JSON: &str = include_str!("../../avro/HoodieRollbackMetadata.v5.avsc");

fn plan_schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, PLAN_SCHEMA_JSON)
}

fn metadata_schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, METADATA_SCHEMA_JSON)
}

fn metadata_schema_v5() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, METADATA_SCHEMA_V5_JSON)
}

/// `HoodieInstantInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstantInfo {
    /// The instant time.
    pub commit_time: String,
    /// The action (for a rollback target: its pending action).
    pub action: String,
}

/// `HoodieRollbackRequest`: what to do in one partition (or to one file slice).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RollbackRequest {
    /// The partition path (`""` when not partitioned).
    pub partition_path: String,
    /// The file group (`""` for pure deletes).
    pub file_id: Option<String>,
    /// The base instant of the file slice (`""` for pure deletes).
    pub latest_base_instant: Option<String>,
    /// Files to delete, as absolute paths.
    pub files_to_be_deleted: Vec<String>,
    /// v6 MOR: log files whose blocks of the target must be voided by a rollback command block,
    /// with their sizes.
    pub log_blocks_to_be_deleted: Option<BTreeMap<String, i64>>,
}

/// `HoodieRollbackPlan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RollbackPlan {
    /// The instant to roll back, with its pending action.
    pub instant_to_rollback: Option<InstantInfo>,
    /// The requests (`RollbackRequests` in the schema).
    pub requests: Option<Vec<RollbackRequest>>,
    /// Always 1.
    pub version: Option<i32>,
}

/// `HoodieRollbackPartitionMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct RollbackPartitionMetadata {
    /// The partition path.
    pub partition_path: String,
    /// Files deleted (or found already gone).
    pub success_delete_files: Vec<String>,
    /// Files that could not be deleted.
    pub failed_delete_files: Vec<String>,
    /// v6 MOR: the log files holding the rollback command blocks, with their sizes.
    pub rollback_log_files: Option<BTreeMap<String, i64>>,
    /// v6 MOR: the log files of the failed commit, with their sizes.
    pub log_files_from_failed_commit: Option<BTreeMap<String, i64>>,
}

/// `HoodieRollbackMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RollbackMetadata {
    /// The rollback instant time.
    pub start_rollback_time: String,
    /// How long it took.
    pub time_taken_in_millis: i64,
    /// Files deleted.
    pub total_files_deleted: i32,
    /// The rolled-back instant times.
    pub commits_rollback: Vec<String>,
    /// Per partition.
    pub partition_metadata: BTreeMap<String, RollbackPartitionMetadata>,
    /// Always 1.
    pub version: Option<i32>,
    /// The rolled-back instants with their actions.
    pub instants_rollback: Vec<InstantInfo>,
}

// ---- Value building -------------------------------------------------------------------------

pub(super) fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

pub(super) fn opt_s(v: &Option<String>) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(x) => Value::Union(1, Box::new(s(x))),
    }
}

pub(super) fn str_array(v: &[String]) -> Value {
    Value::Array(v.iter().map(|x| s(x)).collect())
}

fn long_map(m: &BTreeMap<String, i64>) -> Value {
    Value::Map(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::Long(*v)))
            .collect(),
    )
}

fn opt_long_map(m: &Option<BTreeMap<String, i64>>) -> Value {
    match m {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(m) => Value::Union(1, Box::new(long_map(m))),
    }
}

pub(super) fn version(v: Option<i32>) -> Value {
    match v {
        Some(v) => Value::Union(0, Box::new(Value::Int(v))),
        None => Value::Union(1, Box::new(Value::Null)),
    }
}

pub(super) fn instant_info(i: &InstantInfo) -> Value {
    Value::Record(vec![
        ("commitTime".into(), s(&i.commit_time)),
        ("action".into(), s(&i.action)),
    ])
}

impl RollbackPlan {
    pub(super) fn to_value(&self) -> Value {
        let instant = match &self.instant_to_rollback {
            None => Value::Union(0, Box::new(Value::Null)),
            Some(i) => Value::Union(1, Box::new(instant_info(i))),
        };
        let requests = match &self.requests {
            None => Value::Union(0, Box::new(Value::Null)),
            Some(rs) => Value::Union(
                1,
                Box::new(Value::Array(
                    rs.iter()
                        .map(|r| {
                            Value::Record(vec![
                                ("partitionPath".into(), s(&r.partition_path)),
                                ("fileId".into(), opt_s(&r.file_id)),
                                ("latestBaseInstant".into(), opt_s(&r.latest_base_instant)),
                                ("filesToBeDeleted".into(), str_array(&r.files_to_be_deleted)),
                                (
                                    "logBlocksToBeDeleted".into(),
                                    opt_long_map(&r.log_blocks_to_be_deleted),
                                ),
                            ])
                        })
                        .collect(),
                )),
            ),
        };
        Value::Record(vec![
            ("instantToRollback".into(), instant),
            ("RollbackRequests".into(), requests),
            ("version".into(), version(self.version)),
        ])
    }

    /// The bytes of a `rollback.requested` file.
    pub fn to_avro(&self) -> Result<Vec<u8>, AvroError> {
        write_single_record(PLAN_SCHEMA_JSON, plan_schema()?, self.to_value())
    }

    /// Read a `rollback.requested` file. An empty or unreadable file is an error.
    pub fn from_avro(bytes: &[u8]) -> Result<Self, AvroError> {
        let v = read_single_record_as(bytes, plan_schema()?)?;
        let instant_to_rollback = match get(&v, "instantToRollback")? {
            Value::Null => None,
            i => Some(read_instant_info(i)?),
        };
        let requests = match get(&v, "RollbackRequests")? {
            Value::Null => None,
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|r| {
                        Ok(RollbackRequest {
                            partition_path: get_string(r, "partitionPath")?,
                            file_id: get_opt_string(r, "fileId")?,
                            latest_base_instant: get_opt_string(r, "latestBaseInstant")?,
                            files_to_be_deleted: get_str_array(r, "filesToBeDeleted")?,
                            log_blocks_to_be_deleted: get_opt_long_map(r, "logBlocksToBeDeleted")?,
                        })
                    })
                    .collect::<Result<Vec<_>, AvroError>>()?,
            ),
            other => return Err(shape("RollbackRequests", other)),
        };
        Ok(RollbackPlan {
            instant_to_rollback,
            requests,
            version: get_opt_int(&v, "version")?,
        })
    }
}

/// A schema's text and the schema parsed (once).
pub(super) type SchemaOf = fn() -> Result<&'static Schema, AvroError>;

/// The schema a completed rollback or restore file is written in: the one of the table's own
/// version (Hudi 0.13's for version 5, which has no `logFilesFromFailedCommit`;
/// `TableVersion::metadata_schema`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataSchema {
    /// Hudi 0.13's (table version 5).
    Hudi013,
    /// Hudi 0.14 and later (table versions 6 and up).
    Current,
}

impl MetadataSchema {
    /// `value` written as one record in this schema, of `[current, hudi_0_13]` (each its JSON
    /// and its parsed schema).
    pub(super) fn write(
        self,
        schemas: [(&str, SchemaOf); 2],
        value: Value,
    ) -> Result<Vec<u8>, AvroError> {
        let [current, hudi013] = schemas;
        let (json, schema) = match self {
            Self::Current => current,
            Self::Hudi013 => hudi013,
        };
        write_single_record(json, schema()?, value)
    }
}

impl RollbackMetadata {
    /// The record in `schema`.
    pub(super) fn value(&self, schema: MetadataSchema) -> Value {
        let failed_logs = schema == MetadataSchema::Current;
        let partitions = self
            .partition_metadata
            .iter()
            .map(|(k, p)| {
                (
                    k.clone(),
                    Value::Record({
                        let mut fields = vec![
                            ("partitionPath".into(), s(&p.partition_path)),
                            (
                                "successDeleteFiles".into(),
                                str_array(&p.success_delete_files),
                            ),
                            (
                                "failedDeleteFiles".into(),
                                str_array(&p.failed_delete_files),
                            ),
                            (
                                "rollbackLogFiles".into(),
                                opt_long_map(&p.rollback_log_files),
                            ),
                        ];
                        if failed_logs {
                            fields.push((
                                "logFilesFromFailedCommit".into(),
                                opt_long_map(&p.log_files_from_failed_commit),
                            ));
                        }
                        fields
                    }),
                )
            })
            .collect();
        Value::Record(vec![
            ("startRollbackTime".into(), s(&self.start_rollback_time)),
            (
                "timeTakenInMillis".into(),
                Value::Long(self.time_taken_in_millis),
            ),
            (
                "totalFilesDeleted".into(),
                Value::Int(self.total_files_deleted),
            ),
            ("commitsRollback".into(), str_array(&self.commits_rollback)),
            ("partitionMetadata".into(), Value::Map(partitions)),
            ("version".into(), version(self.version)),
            (
                "instantsRollback".into(),
                Value::Array(self.instants_rollback.iter().map(instant_info).collect()),
            ),
        ])
    }

    /// The bytes of a completed rollback file (tables of version 6 and up).
    pub fn to_avro(&self) -> Result<Vec<u8>, AvroError> {
        self.to_avro_in(MetadataSchema::Current)
    }

    /// The bytes of a completed rollback file in `schema` (Hudi 0.13's does not write
    /// `logFilesFromFailedCommit`).
    pub fn to_avro_in(&self, schema: MetadataSchema) -> Result<Vec<u8>, AvroError> {
        schema.write(
            [
                (METADATA_SCHEMA_JSON, metadata_schema),
                (METADATA_SCHEMA_V5_JSON, metadata_schema_v5),
            ],
            self.value(schema),
        )
    }

    /// Read a completed rollback file.
    pub fn from_avro(bytes: &[u8]) -> Result<Self, AvroError> {
        let v = read_single_record_as(bytes, metadata_schema()?)?;
        Self::from_value(&v)
    }

    /// Read a decoded `HoodieRollbackMetadata` record (also embedded in restore metadata).
    pub(crate) fn from_value(v: &Value) -> Result<Self, AvroError> {
        let v = super::avro::unwrap_union(v);
        let partition_metadata = match get(v, "partitionMetadata")? {
            Value::Map(m) => m
                .iter()
                .map(|(k, p)| {
                    Ok((
                        k.clone(),
                        RollbackPartitionMetadata {
                            partition_path: get_string(p, "partitionPath")?,
                            success_delete_files: get_str_array(p, "successDeleteFiles")?,
                            failed_delete_files: get_str_array(p, "failedDeleteFiles")?,
                            rollback_log_files: get_opt_long_map(p, "rollbackLogFiles")?,
                            log_files_from_failed_commit: get_opt_long_map(
                                p,
                                "logFilesFromFailedCommit",
                            )?,
                        },
                    ))
                })
                .collect::<Result<BTreeMap<_, _>, AvroError>>()?,
            other => return Err(shape("partitionMetadata", other)),
        };
        let instants_rollback = get_instant_infos(v, "instantsRollback")?;
        Ok(RollbackMetadata {
            start_rollback_time: get_string(v, "startRollbackTime")?,
            time_taken_in_millis: get_long(v, "timeTakenInMillis")?,
            total_files_deleted: match get(v, "totalFilesDeleted")? {
                Value::Int(i) => *i,
                other => return Err(shape("totalFilesDeleted", other)),
            },
            commits_rollback: get_str_array(v, "commitsRollback")?,
            partition_metadata,
            version: get_opt_int(v, "version")?,
            instants_rollback,
        })
    }
}

// ---- Value reading --------------------------------------------------------------------------

pub(super) fn shape(field: &str, v: &Value) -> AvroError {
    AvroError::Shape(format!("field `{field}` has unexpected value {v:?}"))
}

pub(super) fn get<'a>(record: &'a Value, name: &str) -> Result<&'a Value, AvroError> {
    super::avro::field(record, name)
        .ok_or_else(|| AvroError::Shape(format!("record has no field `{name}`")))
}

pub(super) fn get_string(record: &Value, name: &str) -> Result<String, AvroError> {
    match get(record, name)? {
        Value::String(s) => Ok(s.clone()),
        other => Err(shape(name, other)),
    }
}

pub(super) fn get_opt_string(record: &Value, name: &str) -> Result<Option<String>, AvroError> {
    match get(record, name)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(shape(name, other)),
    }
}

pub(super) fn get_long(record: &Value, name: &str) -> Result<i64, AvroError> {
    match get(record, name)? {
        Value::Long(l) => Ok(*l),
        other => Err(shape(name, other)),
    }
}

pub(super) fn get_opt_int(record: &Value, name: &str) -> Result<Option<i32>, AvroError> {
    match get(record, name)? {
        Value::Null => Ok(None),
        Value::Int(i) => Ok(Some(*i)),
        other => Err(shape(name, other)),
    }
}

pub(super) fn get_str_array(record: &Value, name: &str) -> Result<Vec<String>, AvroError> {
    match get(record, name)? {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                other => Err(shape(name, other)),
            })
            .collect(),
        other => Err(shape(name, other)),
    }
}

fn get_opt_long_map(
    record: &Value,
    name: &str,
) -> Result<Option<BTreeMap<String, i64>>, AvroError> {
    match get(record, name)? {
        Value::Null => Ok(None),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::Long(l) => Ok((k.clone(), *l)),
                other => Err(shape(name, other)),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Some),
        other => Err(shape(name, other)),
    }
}

pub(super) fn read_instant_info(v: &Value) -> Result<InstantInfo, AvroError> {
    Ok(InstantInfo {
        commit_time: get_string(v, "commitTime")?,
        action: get_string(v, "action")?,
    })
}

/// An array of `HoodieInstantInfo` records.
pub(super) fn get_instant_infos(record: &Value, name: &str) -> Result<Vec<InstantInfo>, AvroError> {
    match get(record, name)? {
        Value::Array(items) => items.iter().map(read_instant_info).collect(),
        other => Err(shape(name, other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RollbackPlan {
        RollbackPlan {
            instant_to_rollback: Some(InstantInfo {
                commit_time: "20250126040826878".into(),
                action: "deltacommit".into(),
            }),
            requests: Some(vec![
                RollbackRequest {
                    partition_path: "".into(),
                    file_id: Some("".into()),
                    latest_base_instant: Some("".into()),
                    files_to_be_deleted: vec!["/t/cd32-0_1-33-44_20250126040826878.parquet".into()],
                    log_blocks_to_be_deleted: Some(BTreeMap::new()),
                },
                RollbackRequest {
                    partition_path: "p=1".into(),
                    file_id: Some("0712b9f9-0".into()),
                    latest_base_instant: Some("20250126040823628".into()),
                    files_to_be_deleted: vec![],
                    log_blocks_to_be_deleted: Some(BTreeMap::from([(
                        ".0712b9f9-0_20250126040823628.log.1_0-33-43".to_string(),
                        11828,
                    )])),
                },
            ]),
            version: Some(1),
        }
    }

    #[test]
    fn plans_round_trip_through_avro() {
        let p = plan();
        let bytes = p.to_avro().unwrap();
        assert_eq!(&bytes[..4], b"Obj\x01");
        assert_eq!(RollbackPlan::from_avro(&bytes).unwrap(), p);
    }

    #[test]
    fn the_container_embeds_the_java_schema_and_no_codec() {
        let bytes = plan().to_avro().unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(PLAN_SCHEMA_JSON));
        assert!(!text.contains("avro.codec"));
        // A standard reader accepts it.
        let v = super::super::avro::read_single_record(&bytes).unwrap();
        assert!(matches!(v, Value::Record(_)));
    }

    #[test]
    fn metadata_round_trips_through_avro() {
        let m = RollbackMetadata {
            start_rollback_time: "20250126040936578".into(),
            time_taken_in_millis: 42,
            total_files_deleted: 1,
            commits_rollback: vec!["20250126040826878".into()],
            partition_metadata: BTreeMap::from([(
                "".to_string(),
                RollbackPartitionMetadata {
                    partition_path: "".into(),
                    success_delete_files: vec!["/t/a.parquet".into()],
                    failed_delete_files: vec![],
                    rollback_log_files: Some(BTreeMap::new()),
                    log_files_from_failed_commit: None,
                },
            )]),
            version: Some(1),
            instants_rollback: vec![InstantInfo {
                commit_time: "20250126040826878".into(),
                action: "deltacommit".into(),
            }],
        };
        let bytes = m.to_avro().unwrap();
        assert_eq!(RollbackMetadata::from_avro(&bytes).unwrap(), m);
    }

    #[test]
    fn version_5_metadata_is_written_in_hudi_0_13s_schema_and_reads_back() {
        let m = RollbackMetadata {
            start_rollback_time: "20261205080844034".into(),
            time_taken_in_millis: 92,
            total_files_deleted: 0,
            commits_rollback: vec!["20261205080838585".into()],
            partition_metadata: BTreeMap::from([(
                "p0".to_string(),
                RollbackPartitionMetadata {
                    partition_path: "p0".into(),
                    success_delete_files: vec![],
                    failed_delete_files: vec![],
                    rollback_log_files: Some(BTreeMap::from([(
                        "file:/t/p0/.f_20261205080834895.log.4_1-0-1".to_string(),
                        105,
                    )])),
                    log_files_from_failed_commit: None,
                },
            )]),
            version: Some(1),
            instants_rollback: vec![InstantInfo {
                commit_time: "20261205080838585".into(),
                action: "deltacommit".into(),
            }],
        };
        let bytes = m.to_avro_in(MetadataSchema::Hudi013).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(METADATA_SCHEMA_V5_JSON.trim()));
        assert!(!text.contains("logFilesFromFailedCommit"));
        // Hudi 0.13.1's own schema (HoodieRollbackMetadata of hudi-common 0.13.1) is 1283
        // characters; 0.14 added the one field
        assert_eq!(METADATA_SCHEMA_V5_JSON.trim().len(), 1283);
        assert_eq!(RollbackMetadata::from_avro(&bytes).unwrap(), m);
        // the v6 writer's bytes differ: they carry the field
        assert_ne!(m.to_avro().unwrap().len(), bytes.len());
    }

    #[test]
    fn corrupt_and_truncated_plans_are_errors() {
        let bytes = plan().to_avro().unwrap();
        assert!(RollbackPlan::from_avro(&bytes[..bytes.len() - 20]).is_err());
        assert!(RollbackPlan::from_avro(b"").is_err());
        assert!(RollbackPlan::from_avro(b"Obj\x01garbage").is_err());
        // A rollback metadata file is not a plan.
        assert!(RollbackMetadata::from_avro(&bytes).is_err());
    }
}
