//! `HoodieRestorePlan` (`<R>.restore.requested`) and `HoodieRestoreMetadata` (the completed
//! restore), in the writer schemas Hudi 0.15 and 1.1 embed (observed with real Hudi,
//! `tests/interop/observations/savepoint-restore.md`): plan version 2 with
//! `savepointToRestoreTimestamp` (a `["null", string]` union) in both, and restore metadata
//! without `extraMetadata`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;
use serde::Serialize;

use super::avro::{cached_schema, read_single_record_as, write_single_record, AvroError};
use super::rollback::{
    get, get_instant_infos, get_long, get_opt_int, get_opt_string, get_str_array, get_string,
    instant_info, opt_s, s, shape, str_array, version, InstantInfo, MetadataSchema,
    RollbackMetadata,
};

const PLAN_SCHEMA_JSON: &str = include_str!("../../avro/HoodieRestorePlan.avsc");
const METADATA_SCHEMA_JSON: &str =
    include_str!("../../avro/HoodieRestoreMetadata.noExtraMetadata.avsc");
/// Hudi 0.12/0.13's (table version 5): its rollback metadata without `logFilesFromFailedCommit`;
/// field for field Hudi 0.13.1's schema.
const METADATA_SCHEMA_V5_JSON: &str = include_str!("../../avro/HoodieRestoreMetadata.v5.avsc");

fn plan_schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, PLAN_SCHEMA_JSON)
}

fn metadata_schema() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, METADATA_SCHEMA_JSON)
}

/// `HoodieRestorePlan`: the instants a restore undoes, in the order it undoes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestorePlan {
    /// Newest first; a pending write at the head.
    pub instants_to_rollback: Vec<InstantInfo>,
    /// 2 (written by Hudi 0.15 and 1.x alike).
    pub version: Option<i32>,
    /// The instant the table is taken back to.
    pub savepoint_to_restore_timestamp: Option<String>,
}

/// `HoodieRestoreMetadata`: what a completed restore undid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreMetadata {
    /// The restore instant.
    pub start_restore_time: String,
    /// How long it took.
    pub time_taken_in_millis: i64,
    /// The undone instant times, in plan order.
    pub instants_to_rollback: Vec<String>,
    /// Per undone instant, the metadata of its (never completed) child rollback.
    pub hoodie_restore_metadata: BTreeMap<String, Vec<RollbackMetadata>>,
    /// 1.
    pub version: Option<i32>,
    /// The undone instants with their actions, in plan order.
    pub restore_instant_info: Vec<InstantInfo>,
}

impl RestorePlan {
    fn to_value(&self) -> Value {
        Value::Record(vec![
            (
                "instantsToRollback".into(),
                Value::Array(self.instants_to_rollback.iter().map(instant_info).collect()),
            ),
            ("version".into(), version(self.version)),
            (
                "savepointToRestoreTimestamp".into(),
                opt_s(&self.savepoint_to_restore_timestamp),
            ),
        ])
    }

    /// The bytes of a `restore.requested` file.
    pub fn to_avro(&self) -> Result<Vec<u8>, AvroError> {
        write_single_record(PLAN_SCHEMA_JSON, plan_schema()?, self.to_value())
    }

    /// Read a `restore.requested` file (version 1 plans, without the restore point, too).
    pub fn from_avro(bytes: &[u8]) -> Result<Self, AvroError> {
        let v = read_single_record_as(bytes, plan_schema()?)?;
        let instants_to_rollback = get_instant_infos(&v, "instantsToRollback")?;
        let savepoint_to_restore_timestamp = get_opt_string(&v, "savepointToRestoreTimestamp")?;
        Ok(Self {
            instants_to_rollback,
            version: get_opt_int(&v, "version")?,
            savepoint_to_restore_timestamp,
        })
    }
}

fn metadata_schema_v5() -> Result<&'static Schema, AvroError> {
    static S: OnceLock<Schema> = OnceLock::new();
    cached_schema(&S, METADATA_SCHEMA_V5_JSON)
}

impl RestoreMetadata {
    /// The record in `schema` (its rollbacks' records in the same).
    fn value(&self, schema: MetadataSchema) -> Value {
        let per_instant = self
            .hoodie_restore_metadata
            .iter()
            .map(|(k, list)| {
                (
                    k.clone(),
                    Value::Array(
                        list.iter()
                            .map(|m| Value::Union(1, Box::new(m.value(schema))))
                            .collect(),
                    ),
                )
            })
            .collect();
        Value::Record(vec![
            ("startRestoreTime".into(), s(&self.start_restore_time)),
            (
                "timeTakenInMillis".into(),
                Value::Long(self.time_taken_in_millis),
            ),
            (
                "instantsToRollback".into(),
                str_array(&self.instants_to_rollback),
            ),
            ("hoodieRestoreMetadata".into(), Value::Map(per_instant)),
            ("version".into(), version(self.version)),
            (
                "restoreInstantInfo".into(),
                Value::Array(self.restore_instant_info.iter().map(instant_info).collect()),
            ),
        ])
    }

    /// The bytes of a completed restore file (tables of version 6 and up).
    pub fn to_avro(&self) -> Result<Vec<u8>, AvroError> {
        self.to_avro_in(MetadataSchema::Current)
    }

    /// The bytes of a completed restore file in `schema`.
    pub fn to_avro_in(&self, schema: MetadataSchema) -> Result<Vec<u8>, AvroError> {
        schema.write(
            [
                (METADATA_SCHEMA_JSON, metadata_schema),
                (METADATA_SCHEMA_V5_JSON, metadata_schema_v5),
            ],
            self.value(schema),
        )
    }

    /// Read a completed restore file.
    pub fn from_avro(bytes: &[u8]) -> Result<Self, AvroError> {
        let v = read_single_record_as(bytes, metadata_schema()?)?;
        Self::from_value(&v)
    }

    /// Read a decoded `HoodieRestoreMetadata` record (also archived in layout-1 archive
    /// entries).
    pub(crate) fn from_value(v: &Value) -> Result<Self, AvroError> {
        let v = super::avro::unwrap_union(v);
        let hoodie_restore_metadata = match get(v, "hoodieRestoreMetadata")? {
            Value::Map(m) => m
                .iter()
                .map(|(k, list)| {
                    let Value::Array(items) = list else {
                        return Err(shape("hoodieRestoreMetadata", list));
                    };
                    let metas = items
                        .iter()
                        .filter(|i| !matches!(super::avro::unwrap_union(i), Value::Null))
                        .map(RollbackMetadata::from_value)
                        .collect::<Result<Vec<_>, _>>()?;
                    Ok((k.clone(), metas))
                })
                .collect::<Result<BTreeMap<_, _>, AvroError>>()?,
            other => return Err(shape("hoodieRestoreMetadata", other)),
        };
        let restore_instant_info = match get(v, "restoreInstantInfo")? {
            Value::Null => vec![],
            _ => get_instant_infos(v, "restoreInstantInfo")?,
        };
        Ok(Self {
            start_restore_time: get_string(v, "startRestoreTime")?,
            time_taken_in_millis: get_long(v, "timeTakenInMillis")?,
            instants_to_rollback: get_str_array(v, "instantsToRollback")?,
            hoodie_restore_metadata,
            version: get_opt_int(v, "version")?,
            restore_instant_info,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rollback::RollbackPartitionMetadata;

    fn info(t: &str) -> InstantInfo {
        InstantInfo {
            commit_time: t.into(),
            action: "commit".into(),
        }
    }

    #[test]
    fn restore_plans_round_trip_with_the_restore_point() {
        let plan = RestorePlan {
            instants_to_rollback: vec![info("20250103"), info("20250102")],
            version: Some(2),
            savepoint_to_restore_timestamp: Some("20250101".into()),
        };
        let bytes = plan.to_avro().unwrap();
        assert_eq!(RestorePlan::from_avro(&bytes).unwrap(), plan);
        // The embedded schema is Hudi's: the restore point is a null-first union.
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains(
            r#"{"name":"savepointToRestoreTimestamp","type":["null",{"type":"string","avro.java.string":"String"}],"default":null}"#
        ));
        let none = RestorePlan {
            savepoint_to_restore_timestamp: None,
            ..plan
        };
        assert_eq!(
            RestorePlan::from_avro(&none.to_avro().unwrap()).unwrap(),
            none
        );
    }

    #[test]
    fn restore_metadata_round_trips_with_child_rollbacks() {
        let child = RollbackMetadata {
            start_rollback_time: "20250104".into(),
            time_taken_in_millis: 3,
            total_files_deleted: 1,
            commits_rollback: vec!["20250103".into()],
            partition_metadata: BTreeMap::from([(
                "p0".to_string(),
                RollbackPartitionMetadata {
                    partition_path: "p0".into(),
                    success_delete_files: vec!["/t/p0/f-0_0-0-0_20250103.parquet".into()],
                    rollback_log_files: Some(BTreeMap::new()),
                    log_files_from_failed_commit: Some(BTreeMap::new()),
                    ..Default::default()
                },
            )]),
            version: Some(1),
            instants_rollback: vec![info("20250103")],
        };
        let m = RestoreMetadata {
            start_restore_time: "20250105".into(),
            time_taken_in_millis: 10,
            instants_to_rollback: vec!["20250103".into()],
            hoodie_restore_metadata: BTreeMap::from([("20250103".to_string(), vec![child])]),
            version: Some(1),
            restore_instant_info: vec![info("20250103")],
        };
        let bytes = m.to_avro().unwrap();
        assert_eq!(RestoreMetadata::from_avro(&bytes).unwrap(), m);
        assert!(RestoreMetadata::from_avro(b"junk").is_err());
    }
}
