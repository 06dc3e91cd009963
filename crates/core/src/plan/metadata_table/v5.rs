//! What a rollback on a table-version-5 table (Hudi 0.12/0.13) writes into its metadata table,
//! as Hudi 0.13.1 does it through Spark (`tests/interop/observations/spark-0.13.md`, read with
//! `HoodieTableMetadataUtil.processRollbackMetadata` and `ListingBasedRollbackStrategy` of
//! 0.13.1). Pure.
//!
//! - The records of the deltacommit at the rollback instant R ([`rollback_file_entries`]), or at
//!   the restore instant for all its child rollbacks together ([`FilesChanges`]): per
//!   data partition, the rollback's command-block log files as added files, and, only when the
//!   metadata table holds a *completed* deltacommit of the failed instant, the files the
//!   rollback deleted, marked deleted. Hudi 0.13 does not roll that deltacommit back (0.14+
//!   does, at `R006`): the records cancel its files instead.
//! - The plan of the metadata table's own rollback of a *pending* deltacommit of the failed
//!   instant (the writer died inside its metadata-table write), which Hudi 0.13's metadata
//!   writer does first under its EAGER policy at a fresh instant
//!   ([`plan_pending_deltacommit_rollback`]): listing-based, as the metadata table's write
//!   config asks.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::PlanError;
use crate::format::commit::WorkloadStat;
use crate::format::rollback::{RollbackMetadata, RollbackPlan, RollbackRequest};
use crate::storage::RelPath;
use crate::table::files::{BasePath, DataFile};

use super::{deltacommit_plan, partition_key};

/// One entry of a files-partition record: (file name, size, deleted).
pub type FileEntry = (String, i64, bool);

/// The files-partition changes of version-5 rollbacks, gathered as Hudi 0.13's
/// `processRollbackMetadata` gathers them (one rollback, or each child rollback of a restore):
/// files added and files deleted per data partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FilesChanges {
    added: BTreeMap<String, BTreeMap<String, i64>>,
    deleted: BTreeMap<String, BTreeSet<String>>,
}

impl FilesChanges {
    /// Add one rollback: per data partition, its command-block log files (added, with their
    /// sizes; the larger of two sizes of one file) and, when `synced` (the metadata table holds
    /// a completed deltacommit of the instant it rolled back), the files it deleted or failed to
    /// delete (deleted). A partition whose rollback wrote no log file of a non-zero size is
    /// skipped when the instant is not synced, as Hudi 0.13 skips it.
    pub fn add_rollback(&mut self, metadata: &RollbackMetadata, synced: bool) {
        let name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
        for pm in metadata.partition_metadata.values() {
            let logs = pm.rollback_log_files.iter().flatten();
            let non_zero = logs.clone().map(|(_, s)| *s).sum::<i64>() > 0;
            if !non_zero && !synced {
                continue;
            }
            let key = partition_key(&pm.partition_path);
            if synced {
                let gone = pm
                    .success_delete_files
                    .iter()
                    .chain(&pm.failed_delete_files);
                let names: Vec<String> = gone.map(|p| name(p)).collect();
                if !names.is_empty() {
                    self.deleted.entry(key.clone()).or_default().extend(names);
                }
            }
            let mut logs = logs.peekable();
            if logs.peek().is_some() {
                let added = self.added.entry(key).or_default();
                for (p, size) in logs {
                    let e = added.entry(name(p)).or_insert(*size);
                    *e = (*e).max(*size);
                }
            }
        }
    }

    /// Add the failed write's own log files of a merge-on-read rollback (`partition`, file name,
    /// its size on the store), which Hudi 0.13's rollback metadata does not name and so never
    /// records: hudi-keeper records them as Hudi 0.14+ does (`logFilesFromFailedCommit`), so
    /// that the metadata table lists what is on disk (their blocks are voided by the command
    /// block; a reader merges them as the listing-based view does, and the cleaner can reclaim
    /// them with their slice). The larger of two sizes of one file counts.
    pub fn add_failed_log(&mut self, partition: &str, name: &str, size: i64) {
        let e = self
            .added
            .entry(partition_key(partition))
            .or_default()
            .entry(name.to_string())
            .or_insert(size);
        *e = (*e).max(size);
    }

    /// The records' entries by record key: the added files, then the deleted ones (size 0; a
    /// name in both counts as deleted, as Hudi fills its map).
    pub fn entries(&self) -> BTreeMap<String, Vec<FileEntry>> {
        let keys: BTreeSet<&String> = self.added.keys().chain(self.deleted.keys()).collect();
        keys.into_iter()
            .map(|k| {
                let deleted = self.deleted.get(k);
                let gone = |n: &String| deleted.is_some_and(|d| d.contains(n));
                let mut entries: Vec<FileEntry> = self
                    .added
                    .get(k)
                    .into_iter()
                    .flatten()
                    .filter(|(n, _)| !gone(n))
                    .map(|(n, s)| (n.clone(), *s, false))
                    .collect();
                entries.extend(deleted.into_iter().flatten().map(|n| (n.clone(), 0, true)));
                (k.clone(), entries)
            })
            .collect()
    }
}

/// The files-partition records of one version-5 rollback, by record key
/// ([`FilesChanges::add_rollback`], `synced` as there).
pub fn rollback_file_entries(
    metadata: &RollbackMetadata,
    synced: bool,
) -> BTreeMap<String, Vec<FileEntry>> {
    let mut c = FilesChanges::default();
    c.add_rollback(metadata, synced);
    c.entries()
}

/// Hudi 0.13's listing-based plan of the metadata table's rollback of its *pending* deltacommit
/// `t`:
/// - for every metadata-table partition (`partitions`), a request deleting its files named with
///   `t` (`named_with_t`; the request is there when there are none);
/// - for each write stat of `t`'s workload profile (`stats`, from its inflight file) that goes
///   to an existing file slice (its `prevCommit` names one, its file group has a latest slice
///   `latest_base` at or before `t`, and that slice's base instant is before `t`), a request
///   appending a rollback command block to that slice. Its one entry names the stat's file
///   qualified, with the stat's `totalWriteBytes`; a workload profile's stat has no path, and
///   Hudi then names the metadata table's base path itself, with size 0.
///
/// `latest_base` maps (partition, file group) to the base instant of the latest file slice at
/// or before `t`. Errors: a file named with `t` that is outside the partitions, or not a file
/// of `t`.
pub fn plan_pending_deltacommit_rollback(
    t: &str,
    partitions: &[String],
    stats: &[WorkloadStat],
    named_with_t: &[RelPath],
    latest_base: &BTreeMap<(String, String), String>,
    base: &BasePath,
) -> Result<RollbackPlan, PlanError> {
    let mut deletes: BTreeMap<&str, Vec<String>> = partitions
        .iter()
        .map(|p| (p.as_str(), Vec::new()))
        .collect();
    for rel in named_with_t {
        let own = DataFile::parse(rel.file_name()).is_some_and(|f| f.instant() == t);
        let partition = rel.parent();
        let slot = deletes.get_mut(partition.as_str());
        match (own, slot) {
            (true, Some(list)) => list.push(base.render(rel)),
            _ => {
                return Err(PlanError::NotAttributable {
                    instant: t.to_string(),
                    path: rel.to_string(),
                    reason: "not a file of the instant in a metadata-table partition".into(),
                })
            }
        }
    }
    let mut requests = Vec::new();
    for (partition, files) in deletes {
        requests.push(RollbackRequest {
            partition_path: partition.to_string(),
            file_id: Some(String::new()),
            latest_base_instant: Some(String::new()),
            files_to_be_deleted: files,
            log_blocks_to_be_deleted: Some(BTreeMap::new()),
        });
        for s in stats.iter().filter(|s| s.partition == partition) {
            if s.prev_commit.is_none() {
                continue;
            }
            let key = (s.partition.clone(), s.file_id.clone());
            let Some(slice_base) = latest_base.get(&key).filter(|b| b.as_str() < t) else {
                continue;
            };
            let target = match &s.path {
                Some(p) => {
                    let rel = RelPath::parse(p).map_err(|_| PlanError::OutsideTable {
                        instant: t.to_string(),
                        path: p.clone(),
                    })?;
                    base.render_qualified(&rel)
                }
                None => base.qualified_root(),
            };
            requests.push(RollbackRequest {
                partition_path: s.partition.clone(),
                file_id: Some(s.file_id.clone()),
                latest_base_instant: Some(slice_base.clone()),
                files_to_be_deleted: vec![],
                log_blocks_to_be_deleted: Some(BTreeMap::from([(target, s.total_write_bytes)])),
            });
        }
    }
    Ok(deltacommit_plan(t, requests))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::rollback::RollbackPartitionMetadata;

    const T: &str = "20261205134203288";
    const INIT: &str = "00000000000000";

    fn metadata(parts: Vec<RollbackPartitionMetadata>) -> RollbackMetadata {
        RollbackMetadata {
            start_rollback_time: "2".into(),
            time_taken_in_millis: 0,
            total_files_deleted: 1,
            commits_rollback: vec![T.into()],
            partition_metadata: parts
                .into_iter()
                .map(|p| (p.partition_path.clone(), p))
                .collect(),
            version: Some(1),
            instants_rollback: vec![],
        }
    }

    fn mor() -> RollbackMetadata {
        metadata(vec![
            RollbackPartitionMetadata {
                partition_path: "p0".into(),
                rollback_log_files: Some(BTreeMap::from([(
                    "file:/t/p0/.a-0_2.log.3_1-0-1".to_string(),
                    105,
                )])),
                ..Default::default()
            },
            RollbackPartitionMetadata {
                partition_path: "p3".into(),
                success_delete_files: vec![format!("file:/t/p3/b-0_3-14-27_{T}.parquet")],
                rollback_log_files: Some(BTreeMap::new()),
                ..Default::default()
            },
        ])
    }

    /// As Hudi 0.13.1 recorded them (spark-0.13 observations, section 4): without the failed
    /// instant in the metadata table only the command-block files; with it, the deleted base
    /// file too.
    #[test]
    fn deleted_files_are_recorded_only_when_the_failed_deltacommit_completed() {
        let a = rollback_file_entries(&mor(), false);
        assert_eq!(
            a,
            BTreeMap::from([(
                "p0".to_string(),
                vec![(".a-0_2.log.3_1-0-1".to_string(), 105, false)]
            )])
        );
        let b = rollback_file_entries(&mor(), true);
        assert_eq!(b.len(), 2);
        assert_eq!(b["p3"], vec![(format!("b-0_3-14-27_{T}.parquet"), 0, true)]);
        // Copy-on-write, never in the metadata table: no record at all (an empty deltacommit).
        let cow = metadata(vec![RollbackPartitionMetadata {
            partition_path: "".into(),
            success_delete_files: vec![format!("file:/t/c-0_0-1-2_{T}.parquet")],
            ..Default::default()
        }]);
        assert!(rollback_file_entries(&cow, false).is_empty());
        assert_eq!(
            rollback_file_entries(&cow, true)["."],
            vec![(format!("c-0_0-1-2_{T}.parquet"), 0, true)]
        );
    }

    /// The plan Hudi 0.13.1's metadata writer made for the pending deltacommit a writer died in
    /// (spark-0.13 observations, `-mdtinflight`): an empty delete request for `files`, and a
    /// command block for the `files` slice naming the metadata table's base path with size 0.
    #[test]
    fn a_pending_deltacommit_is_planned_as_hudi_0_13_planned_it() {
        let base = BasePath::from_uri("file:///t/.hoodie/metadata");
        let stats = vec![
            WorkloadStat {
                partition: "files".into(),
                file_id: String::new(),
                path: None,
                prev_commit: None,
                total_write_bytes: 0,
            },
            WorkloadStat {
                partition: "files".into(),
                file_id: "files-0000".into(),
                path: None,
                prev_commit: Some(INIT.into()),
                total_write_bytes: 0,
            },
        ];
        let latest = BTreeMap::from([(
            ("files".to_string(), "files-0000".to_string()),
            INIT.to_string(),
        )]);
        let plan =
            plan_pending_deltacommit_rollback(T, &["files".into()], &stats, &[], &latest, &base)
                .unwrap();
        let reqs = plan.requests.unwrap();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].partition_path, "files");
        assert!(reqs[0].files_to_be_deleted.is_empty());
        assert_eq!(reqs[0].file_id.as_deref(), Some(""));
        assert_eq!(reqs[1].file_id.as_deref(), Some("files-0000"));
        assert_eq!(reqs[1].latest_base_instant.as_deref(), Some(INIT));
        assert_eq!(
            reqs[1].log_blocks_to_be_deleted,
            Some(BTreeMap::from([(
                "file:/t/.hoodie/metadata".to_string(),
                0
            )]))
        );
        // A slice started at or after t gets no command block; a file of t is deleted.
        let own = RelPath::parse(&format!("files/files-0000_0-1-2_{T}.hfile")).unwrap();
        let later = BTreeMap::from([(
            ("files".to_string(), "files-0000".to_string()),
            T.to_string(),
        )]);
        let plan = plan_pending_deltacommit_rollback(
            T,
            &["files".into()],
            &stats,
            std::slice::from_ref(&own),
            &later,
            &base,
        )
        .unwrap();
        let reqs = plan.requests.unwrap();
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            reqs[0].files_to_be_deleted,
            vec![format!(
                "/t/.hoodie/metadata/files/files-0000_0-1-2_{T}.hfile"
            )]
        );
        // A file not of t, or outside the partitions, is never planned.
        let other = RelPath::parse("files/.files-0000_00000000000000.log.5_0-25-40").unwrap();
        assert!(plan_pending_deltacommit_rollback(
            T,
            &["files".into()],
            &stats,
            &[other],
            &latest,
            &base
        )
        .is_err());
        assert!(plan_pending_deltacommit_rollback(
            T,
            &["column_stats".into()],
            &stats,
            &[own],
            &latest,
            &base
        )
        .is_err());
    }
    /// A restore records all its child rollbacks in one deltacommit (spark-0.13-restore
    /// observations): each child's command-block files added, and the files of each synced
    /// child marked deleted; a name deleted by one child and added by another is deleted.
    #[test]
    fn a_restore_gathers_its_children_into_one_set_of_records() {
        let c3 = metadata(vec![RollbackPartitionMetadata {
            partition_path: "p0".into(),
            success_delete_files: vec!["file:/t/p0/a-0_0-1-2_3.parquet".into()],
            rollback_log_files: Some(BTreeMap::from([(
                "file:/t/p0/.b-0_2.log.4_1-0-1".to_string(),
                105,
            )])),
            ..Default::default()
        }]);
        let t = metadata(vec![RollbackPartitionMetadata {
            partition_path: "p0".into(),
            success_delete_files: vec!["file:/t/p0/c-0_0-1-2_9.parquet".into()],
            rollback_log_files: Some(BTreeMap::from([
                ("file:/t/p0/.b-0_2.log.4_1-0-1".to_string(), 90),
                ("file:/t/p0/a-0_0-1-2_3.parquet".to_string(), 7),
            ])),
            ..Default::default()
        }]);
        let mut c = FilesChanges::default();
        c.add_rollback(&c3, true);
        c.add_rollback(&t, false);
        assert_eq!(
            c.entries(),
            BTreeMap::from([(
                "p0".to_string(),
                vec![
                    (".b-0_2.log.4_1-0-1".to_string(), 105, false),
                    ("a-0_0-1-2_3.parquet".to_string(), 0, true),
                ]
            )])
        );
        assert!(FilesChanges::default().entries().is_empty());
    }
    #[test]
    fn failed_log_files_are_added_with_their_sizes() {
        let mut c = FilesChanges::default();
        c.add_rollback(&mor(), false);
        c.add_failed_log("p0", ".a-0_2.log.2_0-14-24", 11000);
        c.add_failed_log("", ".c-0_2.log.2_0-14-24", 5);
        let e = c.entries();
        assert_eq!(
            e["p0"],
            vec![
                (".a-0_2.log.2_0-14-24".to_string(), 11000, false),
                (".a-0_2.log.3_1-0-1".to_string(), 105, false),
            ]
        );
        assert_eq!(e["."], vec![(".c-0_2.log.2_0-14-24".to_string(), 5, false)]);
    }
}
