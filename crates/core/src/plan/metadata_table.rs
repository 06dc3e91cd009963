//! What a rollback on a table-version-6 table (Hudi 0.14/0.15) writes into its metadata table,
//! read from Hudi 0.15's `HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata, R)`
//! and checked against its output in the interop harness (`../shared/v6-metadata-table.md`).
//! Pure.
//!
//! - The records of the deltacommit at the rollback instant R: files-partition records only,
//!   one per data partition whose rollback appended log files ([`rollback_file_records`]).
//! - The plan of the metadata table's own rollback of a completed deltacommit T at `R006`:
//!   listing-based, as the metadata table's write config asks; files named with T are deleted,
//!   and the log files T appended to older file slices get a rollback command block
//!   ([`plan_completed_deltacommit_rollback`]).

pub mod files_listing;
pub mod files_slice;
pub mod name_hash;
pub mod v5;

use std::collections::BTreeMap;

use crate::error::PlanError;
use crate::format::commit::JsonWriteStat;
use crate::format::rollback::{InstantInfo, RollbackMetadata, RollbackPlan, RollbackRequest};
use crate::storage::RelPath;
use crate::table::files::{BasePath, DataFile};

/// The suffix Hudi 0.x appends to the data table's rollback instant for the metadata table's
/// own rollback (`HoodieTableMetadataUtil.OperationSuffix.METADATA_INDEXER`… `ROLLBACK` = 006).
pub const ROLLBACK_SUFFIX: &str = "006";

/// The key of a data partition's record in the `files` partition: its path, `.` for a
/// non-partitioned table.
pub fn partition_key(partition: &str) -> String {
    if partition.is_empty() {
        ".".to_string()
    } else {
        partition.to_string()
    }
}

/// The files-partition records of a rollback (by record key): for every data partition whose
/// rollback appended log files, those log files and the log files of the failed commit, by
/// file name, with their sizes (the larger of two sizes of one file). No file is marked
/// deleted: the files a rollback deleted were never in the metadata table (a failed write
/// never completed its deltacommit there), or the metadata table's own rollback undoes them.
pub fn rollback_file_records(
    metadata: &RollbackMetadata,
) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for pm in metadata.partition_metadata.values() {
        let Some(rollback_logs) = pm.rollback_log_files.as_ref().filter(|m| !m.is_empty()) else {
            continue;
        };
        let files = out.entry(partition_key(&pm.partition_path)).or_default();
        let failed = pm.log_files_from_failed_commit.iter().flatten();
        for (path, size) in rollback_logs.iter().chain(failed) {
            let name = path.rsplit('/').next().unwrap_or(path).to_string();
            let e = files.entry(name).or_insert(*size);
            *e = (*e).max(*size);
        }
    }
    out
}

/// The metadata table's listing-based rollback plan of its completed deltacommit `t`, from the
/// deltacommit's write stats (`stats`) and the metadata table's files named with `t`
/// (`named_with_t`, relative to the metadata table's base path `base`):
/// - a file named with `t` (a base file, or a log file of a file slice `t` started) is deleted;
/// - a log file `t` appended to an older file slice (its stat's base instant is not `t`) gets a
///   rollback command block: a request with its file group, base instant, and the qualified
///   path with the size the stat records, as Hudi 0.15 plans it.
pub fn plan_completed_deltacommit_rollback(
    t: &str,
    stats: &[JsonWriteStat],
    named_with_t: &[RelPath],
    base: &BasePath,
) -> Result<RollbackPlan, PlanError> {
    let mut requests = Vec::new();
    for rel in named_with_t {
        match DataFile::parse(rel.file_name()) {
            Some(f) if f.instant() == t => {}
            _ => {
                return Err(PlanError::NotAttributable {
                    instant: t.to_string(),
                    path: rel.to_string(),
                    reason: "not a metadata-table file named with the instant".into(),
                })
            }
        }
        requests.push(RollbackRequest {
            partition_path: partition_of(rel),
            file_id: Some(String::new()),
            latest_base_instant: Some(String::new()),
            files_to_be_deleted: vec![base.render_qualified(rel)],
            log_blocks_to_be_deleted: Some(BTreeMap::new()),
        });
    }
    let mut appends: BTreeMap<(String, String, String), BTreeMap<String, i64>> = BTreeMap::new();
    for s in stats {
        let rel = RelPath::parse(&s.path).map_err(|_| PlanError::OutsideTable {
            instant: t.to_string(),
            path: s.path.clone(),
        })?;
        let Some(DataFile::Log {
            file_id, instant, ..
        }) = DataFile::parse(rel.file_name())
        else {
            // A base file: named with `t` (a compaction is not a deltacommit), deleted above.
            continue;
        };
        if instant == t {
            continue;
        }
        appends
            .entry((s.partition.clone(), file_id, instant))
            .or_default()
            .insert(base.render_qualified(&rel), s.file_size);
    }
    for ((partition, file_id, base_instant), logs) in appends {
        requests.push(RollbackRequest {
            partition_path: partition,
            file_id: Some(file_id),
            latest_base_instant: Some(base_instant),
            files_to_be_deleted: vec![],
            log_blocks_to_be_deleted: Some(logs),
        });
    }
    Ok(deltacommit_plan(t, requests))
}

/// A rollback plan (version 1) of the metadata table's deltacommit `t` with `requests`.
pub(crate) fn deltacommit_plan(t: &str, requests: Vec<RollbackRequest>) -> RollbackPlan {
    RollbackPlan {
        instant_to_rollback: Some(InstantInfo {
            commit_time: t.to_string(),
            action: "deltacommit".to_string(),
        }),
        requests: Some(requests),
        version: Some(1),
    }
}

fn partition_of(rel: &RelPath) -> String {
    let p = rel.parent();
    p.as_str().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rollback::RollbackPartitionMetadata;

    const T: &str = "20261201113845808";

    #[test]
    fn records_list_rollback_logs_and_failed_logs_of_partitions_that_got_blocks() {
        let mut md = RollbackMetadata {
            start_rollback_time: "2".into(),
            time_taken_in_millis: 0,
            total_files_deleted: 1,
            commits_rollback: vec![],
            partition_metadata: BTreeMap::new(),
            version: Some(1),
            instants_rollback: vec![],
        };
        md.partition_metadata.insert(
            "p0".into(),
            RollbackPartitionMetadata {
                partition_path: "p0".into(),
                rollback_log_files: Some(BTreeMap::from([(
                    "file:/t/p0/.a-0_1.log.3_1-0-1".to_string(),
                    105,
                )])),
                log_files_from_failed_commit: Some(BTreeMap::from([(
                    ".a-0_1.log.2_0-0-0".to_string(),
                    1,
                )])),
                ..Default::default()
            },
        );
        // Only deletes: no record.
        md.partition_metadata.insert(
            "p3".into(),
            RollbackPartitionMetadata {
                partition_path: "p3".into(),
                success_delete_files: vec!["file:/t/p3/b-0_0-0-0_2.parquet".into()],
                rollback_log_files: Some(BTreeMap::new()),
                ..Default::default()
            },
        );
        // A non-partitioned table's key is ".".
        md.partition_metadata.insert(
            "".into(),
            RollbackPartitionMetadata {
                partition_path: "".into(),
                rollback_log_files: Some(BTreeMap::from([(
                    "file:/t/.c-0_1.log.2_1-0-1".into(),
                    7,
                )])),
                log_files_from_failed_commit: Some(BTreeMap::from([(
                    ".c-0_1.log.2_1-0-1".into(),
                    1,
                )])),
                ..Default::default()
            },
        );
        let records = rollback_file_records(&md);
        assert_eq!(
            records,
            BTreeMap::from([
                (
                    ".".to_string(),
                    BTreeMap::from([(".c-0_1.log.2_1-0-1".to_string(), 7)])
                ),
                (
                    "p0".to_string(),
                    BTreeMap::from([
                        (".a-0_1.log.2_0-0-0".to_string(), 1),
                        (".a-0_1.log.3_1-0-1".to_string(), 105)
                    ])
                ),
            ])
        );
    }

    #[test]
    fn a_completed_deltacommit_gets_command_blocks_for_appends_and_deletes_for_its_own_files() {
        let base = BasePath::from_uri("file:///t/.hoodie/metadata");
        let stats = vec![
            JsonWriteStat {
                partition: "files".into(),
                file_id: "files-0000-0".into(),
                path: "files/.files-0000-0_00000000000000010.log.5_0-0-0".into(),
                prev_commit: Some("00000000000000010".into()),
                file_size: 13475,
            },
            JsonWriteStat {
                partition: "column_stats".into(),
                file_id: "col-0000-0".into(),
                path: format!("column_stats/.col-0000-0_{T}.log.1_0-0-0"),
                prev_commit: None,
                file_size: 10,
            },
        ];
        let own =
            vec![RelPath::parse(&format!("column_stats/.col-0000-0_{T}.log.1_0-0-0")).unwrap()];
        let plan = plan_completed_deltacommit_rollback(T, &stats, &own, &base).unwrap();
        let reqs = plan.requests.unwrap();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].partition_path, "column_stats");
        assert_eq!(
            reqs[0].files_to_be_deleted,
            vec![format!(
                "file:/t/.hoodie/metadata/column_stats/.col-0000-0_{T}.log.1_0-0-0"
            )]
        );
        assert_eq!(reqs[1].file_id.as_deref(), Some("files-0000-0"));
        assert_eq!(
            reqs[1].latest_base_instant.as_deref(),
            Some("00000000000000010")
        );
        assert_eq!(
            reqs[1].log_blocks_to_be_deleted,
            Some(BTreeMap::from([(
                "file:/t/.hoodie/metadata/files/.files-0000-0_00000000000000010.log.5_0-0-0"
                    .to_string(),
                13475
            )]))
        );
        // A file not named with the instant is never planned for deletion.
        let other =
            vec![RelPath::parse("files/.files-0000-0_00000000000000010.log.5_0-0-0").unwrap()];
        assert!(plan_completed_deltacommit_rollback(T, &stats, &other, &base).is_err());
    }
}
