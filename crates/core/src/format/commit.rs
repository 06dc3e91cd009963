//! `HoodieCommitMetadata`: in Avro (the layout-2 form of a completed commit or deltacommit), the
//! schema a metadata-table deltacommit records, and the empty deltacommit Hudi 1.x writes into
//! the metadata table after restoring it (`partitionToWriteStats: {}`, the metadata record
//! schema in `extraMetadata`); in JSON (layout 1, table version 6), the write stats a rollback
//! reads and the metadata-table deltacommit Hudi 0.15 writes for a rollback.

use std::collections::{BTreeSet, HashMap};
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

/// One write stat of a layout-1 (table version 6) commit metadata file, which is JSON: the fields
/// a rollback reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonWriteStat {
    /// The partition (the map key it is listed under).
    pub partition: String,
    /// The file group.
    pub file_id: String,
    /// The file written, relative to the base path (`files/.files-0000-0_…log.5_0-0-0`).
    pub path: String,
    /// The file slice's base instant the write went to (`prevCommit`), when it names one.
    pub prev_commit: Option<String>,
    /// The file's size after the write.
    pub file_size: i64,
}

/// The write stats of a JSON commit metadata file (`partitionToWriteStats`), or why it cannot be
/// read. A stat without a `path` is skipped (Hudi writes none such for files it wrote).
pub fn json_write_stats(bytes: &[u8]) -> Result<Vec<JsonWriteStat>, String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let stats = v
        .get("partitionToWriteStats")
        .and_then(|s| s.as_object())
        .ok_or("no partitionToWriteStats")?;
    let mut out = Vec::new();
    for (partition, list) in stats {
        for stat in list.as_array().into_iter().flatten() {
            let Some(path) = stat.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let text = |k: &str| {
                stat.get(k)
                    .and_then(|x| x.as_str())
                    .filter(|s| !s.is_empty() && *s != "null")
                    .map(str::to_string)
            };
            out.push(JsonWriteStat {
                partition: partition.clone(),
                file_id: text("fileId").unwrap_or_default(),
                path: path.to_string(),
                prev_commit: text("prevCommit"),
                file_size: stat
                    .get("fileSizeInBytes")
                    .and_then(|x| x.as_i64())
                    .unwrap_or(0),
            });
        }
    }
    Ok(out)
}

/// One write stat of a pending deltacommit's JSON metadata (the workload profile Hudi writes
/// into `<t>.deltacommit.inflight`), as Hudi 0.13's listing-based rollback reads it: a stat
/// without a `path` counts (the profile of a metadata-table write has none), and `prevCommit`
/// `"null"` is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadStat {
    /// The partition (the map key it is listed under).
    pub partition: String,
    /// The file group (empty for the inserts' stat).
    pub file_id: String,
    /// The file written, relative to the base path, when the stat names one.
    pub path: Option<String>,
    /// The base instant of the file slice the write goes to.
    pub prev_commit: Option<String>,
    /// `totalWriteBytes`.
    pub total_write_bytes: i64,
}

/// The write stats of a pending deltacommit's JSON metadata ([`WorkloadStat`]); none for an
/// empty file (Hudi reads it as empty commit metadata). `Err` when it is not such JSON.
pub fn json_workload_stats(bytes: &[u8]) -> Result<Vec<WorkloadStat>, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Some(stats) = v.get("partitionToWriteStats") else {
        return Ok(Vec::new());
    };
    let stats = match stats {
        serde_json::Value::Null => return Ok(Vec::new()),
        serde_json::Value::Object(m) => m,
        _ => return Err("partitionToWriteStats is not an object".into()),
    };
    let mut out = Vec::new();
    for (partition, list) in stats {
        let list = list
            .as_array()
            .ok_or_else(|| format!("the write stats of partition `{partition}` are not a list"))?;
        for stat in list {
            let text = |k: &str| {
                stat.get(k)
                    .and_then(|x| x.as_str())
                    .filter(|s| !s.is_empty() && *s != "null")
                    .map(str::to_string)
            };
            out.push(WorkloadStat {
                partition: partition.clone(),
                file_id: text("fileId").unwrap_or_default(),
                path: text("path"),
                prev_commit: text("prevCommit"),
                total_write_bytes: stat
                    .get("totalWriteBytes")
                    .and_then(|x| x.as_i64())
                    .unwrap_or(0),
            });
        }
    }
    Ok(out)
}

/// The partitions the workload of an inflight commit or deltacommit names: the keys of the
/// `partitionToWriteStats` Hudi writes into `<t>.inflight` / `<t>.deltacommit.inflight` (and
/// their layout-2 names) when it profiles a write before writing, one per partition the write
/// goes to (`BaseCommitActionExecutor.saveWorkloadProfileMetadataToInflight`). JSON on tables
/// of version 6, Avro from version 8 on; told apart by the Avro container's magic bytes.
///
/// `Ok(None)` when the file holds no workload: empty (bulk inserts, Flink, a write that did not
/// profile) or with no partition named. `Err` when it holds something that does not read as
/// commit metadata: the caller must not narrow anything on it.
pub fn workload_partitions(bytes: &[u8]) -> Result<Option<BTreeSet<String>>, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let partitions: BTreeSet<String> = if bytes.starts_with(b"Obj\x01") {
        let v = read_single_record(bytes).map_err(|e| e.to_string())?;
        match field(&v, "partitionToWriteStats") {
            Some(Value::Map(m)) => m.keys().cloned().collect(),
            Some(Value::Null) | None => BTreeSet::new(),
            Some(_) => return Err("partitionToWriteStats is not a map".into()),
        }
    } else {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        match v.get("partitionToWriteStats") {
            Some(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            Some(serde_json::Value::Null) | None if v.is_object() => BTreeSet::new(),
            _ => return Err("not commit metadata with a partitionToWriteStats map".into()),
        }
    };
    Ok((!partitions.is_empty()).then_some(partitions))
}

/// The Avro (layout 2) commit metadata Hudi writes into an inflight file for a profiled write:
/// one write stat per partition with the number of inserts planned there (fileId empty,
/// prevCommit `00000000000000`), nothing else set. For test tables and the demo.
pub fn workload_commit_metadata(partitions: &[(&str, i64)]) -> Result<Vec<u8>, AvroError> {
    let stats: HashMap<String, Value> = partitions
        .iter()
        .map(|(p, inserts)| {
            let stat = Value::Record(vec![
                ("fileId".into(), Value::String(String::new())),
                ("prevCommit".into(), Value::String("00000000000000".into())),
                ("numInserts".into(), Value::Long(*inserts)),
            ]);
            (p.to_string(), Value::Array(vec![stat]))
        })
        .collect();
    let record = Value::Record(vec![
        ("partitionToWriteStats".into(), Value::Map(stats)),
        ("compacted".into(), Value::Boolean(false)),
        ("extraMetadata".into(), Value::Map(HashMap::new())),
        ("operationType".into(), Value::String("UPSERT".into())),
    ])
    .resolve(schema()?)
    .map_err(|e| AvroError::Shape(e.to_string()))?;
    write_single_record(SCHEMA_JSON, schema()?, record)
}

/// A log file a metadata-table deltacommit appended, for its JSON commit metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendedLog {
    /// The metadata-table partition (`files`).
    pub partition: String,
    /// The file group (`files-0000-0`).
    pub file_id: String,
    /// The file slice's base instant.
    pub base_instant: String,
    /// The base file of the slice, if it has one.
    pub base_file: Option<String>,
    /// The slice's log files before this one, by name.
    pub earlier_logs: Vec<String>,
    /// The log file written (its name).
    pub log_file: String,
    /// Its log version.
    pub log_version: u32,
    /// Its size.
    pub size: i64,
    /// Records written.
    pub records: i64,
}

/// The JSON commit metadata (layout 1) of a metadata-table deltacommit, as Hudi 0.15 writes it:
/// a write stat per appended log file (none for a rollback that appended no log file),
/// `compacted` false, the metadata record schema in `extraMetadata`, operation
/// `UPSERT_PREPPED`.
pub fn json_deltacommit_metadata(appended: &[AppendedLog], schema_text: &str) -> Vec<u8> {
    use serde_json::json;
    let mut by_partition = serde_json::Map::new();
    for a in appended {
        let mut logs = a.earlier_logs.clone();
        logs.push(a.log_file.clone());
        let stat = json!({
            "fileId": a.file_id,
            "path": format!("{}/{}", a.partition, a.log_file),
            "cdcStats": null,
            "prevCommit": a.base_instant,
            "numWrites": a.records,
            "numDeletes": 0,
            "numUpdateWrites": a.records,
            "numInserts": 0,
            "totalWriteBytes": a.size,
            "totalWriteErrors": 0,
            "tempPath": null,
            "partitionPath": a.partition,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": a.size,
            "minEventTime": null,
            "maxEventTime": null,
            "runtimeStats": null,
            "logVersion": a.log_version,
            "logOffset": 0,
            "baseFile": a.base_file.clone().unwrap_or_default(),
            "logFiles": logs,
            "recordsStats": null,
        });
        if let Some(list) = by_partition
            .entry(a.partition.clone())
            .or_insert_with(|| serde_json::Value::Array(vec![]))
            .as_array_mut()
        {
            list.push(stat);
        }
    }
    let v = json!({
        "partitionToWriteStats": by_partition,
        "compacted": false,
        "extraMetadata": { "schema": schema_text },
        "operationType": "UPSERT_PREPPED",
    });
    serde_json::to_vec_pretty(&v).unwrap_or_default()
}

/// The `extraMetadata.schema` of a JSON (layout 1) commit metadata file, if it has one.
pub fn json_schema_of(bytes: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    v.get("extraMetadata")?
        .get("schema")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inflight_workload_names_its_partitions_in_either_encoding() {
        let avro = workload_commit_metadata(&[("2024/01/01", 10), ("p=a%3A1/hr=2", 5)]).unwrap();
        let want: BTreeSet<String> = ["2024/01/01", "p=a%3A1/hr=2"].map(String::from).into();
        assert_eq!(workload_partitions(&avro).unwrap(), Some(want.clone()));
        let json = br#"{"partitionToWriteStats":{"2024/01/01":[{"fileId":"","prevCommit":"00000000000000","numInserts":10}],"p=a%3A1/hr=2":[]},"compacted":false,"extraMetadata":{},"operationType":"UPSERT"}"#;
        assert_eq!(workload_partitions(json).unwrap(), Some(want));
        // A non-partitioned table's one partition is the root.
        let root = workload_commit_metadata(&[("", 3)]).unwrap();
        assert_eq!(
            workload_partitions(&root).unwrap(),
            Some(BTreeSet::from([String::new()]))
        );
    }

    #[test]
    fn no_workload_is_none_and_a_damaged_one_is_an_error() {
        for none in [
            &b""[..],
            b"  \n",
            br#"{"partitionToWriteStats":{}}"#,
            br#"{"compacted":false}"#,
        ] {
            assert_eq!(
                workload_partitions(none).unwrap(),
                None,
                "{:?}",
                String::from_utf8_lossy(none)
            );
        }
        let empty_avro = workload_commit_metadata(&[]).unwrap();
        assert_eq!(workload_partitions(&empty_avro).unwrap(), None);
        let mut cut = workload_commit_metadata(&[("p", 1)]).unwrap();
        cut.truncate(cut.len() - 20);
        for bad in [
            &cut[..],
            b"{not json",
            br#"{"partitionToWriteStats":[]}"#,
            b"[1,2]",
            b"Obj\x01",
        ] {
            assert!(
                workload_partitions(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

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

    #[test]
    fn a_json_deltacommit_lists_its_log_file_and_reads_back() {
        let appended = AppendedLog {
            partition: "files".into(),
            file_id: "files-0000-0".into(),
            base_instant: "00000000000000010".into(),
            base_file: Some("files-0000-0_0-0-0_00000000000000010.hfile".into()),
            earlier_logs: vec![".files-0000-0_00000000000000010.log.1_0-0-0".into()],
            log_file: ".files-0000-0_00000000000000010.log.2_0-0-0".into(),
            log_version: 2,
            size: 1234,
            records: 3,
        };
        let bytes = json_deltacommit_metadata(&[appended], "{\"type\":\"record\"}");
        assert_eq!(
            json_schema_of(&bytes).as_deref(),
            Some("{\"type\":\"record\"}")
        );
        let stats = json_write_stats(&bytes).unwrap();
        assert_eq!(
            stats,
            vec![JsonWriteStat {
                partition: "files".into(),
                file_id: "files-0000-0".into(),
                path: "files/.files-0000-0_00000000000000010.log.2_0-0-0".into(),
                prev_commit: Some("00000000000000010".into()),
                file_size: 1234,
            }]
        );
        let empty = json_deltacommit_metadata(&[], "{}");
        assert_eq!(json_write_stats(&empty).unwrap(), vec![]);
        assert!(json_write_stats(b"{}").is_err());
    }
    #[test]
    fn a_metadata_table_workload_profile_reads_with_its_path_less_stats() {
        let inflight = br#"{"partitionToWriteStats":{"files":[
            {"fileId":"","path":null,"prevCommit":"null","totalWriteBytes":0},
            {"fileId":"files-0000","path":null,"prevCommit":"00000000000000","totalWriteBytes":0}
        ]},"compacted":false,"extraMetadata":{},"operationType":"UPSERT_PREPPED"}"#;
        let stats = json_workload_stats(inflight).unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].file_id, "");
        assert_eq!(stats[0].prev_commit, None);
        assert_eq!(stats[1].file_id, "files-0000");
        assert_eq!(stats[1].prev_commit.as_deref(), Some("00000000000000"));
        assert_eq!(stats[1].path, None);
        assert_eq!(json_workload_stats(b"").unwrap(), vec![]);
        assert_eq!(json_workload_stats(b"{}").unwrap(), vec![]);
        assert!(json_workload_stats(b"{").is_err());
        assert!(json_workload_stats(br#"{"partitionToWriteStats":{"files":{}}}"#).is_err());
    }
}
