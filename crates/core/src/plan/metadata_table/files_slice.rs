//! The file slice of the metadata table's `files` partition that Hudi 1.x (table versions 8 and
//! 9) reads, from the names in the partition folder and the metadata table's active timeline.
//! Pure.
//!
//! Read from Hudi 1.1.1 (1.0.1 alike): `HoodieTableMetadataUtil.getPartitionLatestMergedFileSlices`
//! asks the listing-based `HoodieTableFileSystemView` (its timeline: the metadata table's write
//! timeline in every state) for `getLatestMergedFileSlicesBeforeOrOn(files, <latest completed
//! instant, or pending compaction>)`:
//!
//! - `HoodieFileGroup.addBaseFile`: a base file opens the slice of its instant;
//! - `HoodieFileGroup.addLogFile`, log files in `LogFileComparator` order (deltacommit, version,
//!   write token): a log file's name carries the deltacommit that wrote it; it joins the slice of
//!   the latest base instant at or before that deltacommit's completion time
//!   (`CompletionTimeQueryViewV2.getCompletionTime`); with no such slice, a slice of its own
//!   instant; with no completion time (pending), the latest slice;
//! - `isFileSliceCommitted`: a slice counts when its base instant is at or before the write
//!   timeline's last instant and on it (in any state) or before it starts;
//! - `getLatestFileSliceBeforeOrOn`: the latest such slice at or before the bound;
//! - `filterUncommittedLogs`: only log files of deltacommits completed on the metadata table
//!   (or older than its write timeline: archived) are read.
//!
//! A pending compaction (whose slice Hudi merges with the one before,
//! `fetchMergedFileSlice`) is not handled: the callers do not read the metadata table then.
//! The completion time of a deltacommit older than the active timeline is Hudi's archived
//! timeline's, which is not read: its requested time stands in (the metadata table compacts
//! inline, under the writer's lock, after its deltacommits complete, so no base instant falls
//! between the two).

use std::collections::BTreeMap;

use crate::table::files::DataFile;
use crate::timeline::{Action, Timeline};

/// The file slice to read: its base file and log files in reading order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesSlice {
    /// The file group.
    pub file_id: String,
    /// The slice's base instant.
    pub base_instant: String,
    /// The base file's name.
    pub base_file: Option<String>,
    /// The log files' names, in the order Hudi reads them.
    pub logs: Vec<String>,
}

/// One file group: its slices by base instant, and its log files (deltacommit, version, write
/// token, name).
type Group = (
    BTreeMap<String, FilesSlice>,
    Vec<(String, u32, String, String)>,
);

/// Hudi's write timeline (`getWriteTimeline`): the actions a file slice is made by.
fn is_write(a: Action) -> bool {
    matches!(
        a,
        Action::Commit
            | Action::DeltaCommit
            | Action::Compaction
            | Action::LogCompaction
            | Action::ReplaceCommit
            | Action::Clustering
    )
}

/// The slice of the `files` partition Hudi 1.x reads (see the module docs), from the `names` in
/// its folder and the metadata table's timeline `tl`, or why there is none to read.
pub fn latest_files_slice_v8(names: &[String], tl: &Timeline) -> Result<FilesSlice, String> {
    let write: Vec<&str> = tl
        .instants()
        .iter()
        .filter(|i| is_write(i.action) || is_write(i.pending_action))
        .map(|i| i.requested_time.as_str())
        .collect();
    let (Some(first_write), Some(last_write)) = (write.iter().min(), write.iter().max()) else {
        return Err("the metadata table has no write on its timeline".into());
    };
    let completion: BTreeMap<&str, &str> = tl
        .completed()
        .map(|i| {
            let c = i.completion_time.as_deref().unwrap_or(&i.requested_time);
            (i.requested_time.as_str(), c)
        })
        .collect();
    let bound = tl
        .completed()
        .map(|i| i.requested_time.as_str())
        .max()
        .ok_or("the metadata table has no completed instant")?;
    let first_active = tl.instants().first().map(|i| i.requested_time.as_str());

    // file group -> (base instant -> slice), and its log files
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for name in names {
        let Some(f) = DataFile::parse(name) else {
            continue;
        };
        let (slices, logs) = groups.entry(f.file_id().to_string()).or_default();
        match f {
            DataFile::Base {
                file_id, instant, ..
            } => {
                slices
                    .entry(instant.clone())
                    .or_insert_with(|| FilesSlice {
                        file_id,
                        base_instant: instant,
                        ..Default::default()
                    })
                    .base_file = Some(name.clone());
            }
            DataFile::Log {
                instant,
                version,
                write_token,
                cdc: false,
                ..
            } => logs.push((instant, version, write_token, name.clone())),
            DataFile::Log { .. } => {}
        }
    }
    let mut latest = Vec::new();
    for (file_id, (mut slices, mut logs)) in groups {
        logs.sort();
        for (instant, _, _, name) in logs {
            let key = if slices.is_empty() {
                instant.clone()
            } else {
                let done = completion.get(instant.as_str()).copied().or_else(|| {
                    // Older than the active timeline: archived, completed at about its time.
                    first_active
                        .is_some_and(|f| instant.as_str() < f)
                        .then_some(instant.as_str())
                });
                match done {
                    Some(c) => {
                        let c = if c.len() == instant.len() {
                            c
                        } else {
                            &instant
                        };
                        slices
                            .keys()
                            .rev()
                            .find(|b| b.as_str() <= c)
                            .cloned()
                            .unwrap_or_else(|| instant.clone())
                    }
                    None => slices.keys().next_back().cloned().unwrap_or_default(),
                }
            };
            slices
                .entry(key.clone())
                .or_insert_with(|| FilesSlice {
                    file_id: file_id.clone(),
                    base_instant: key,
                    ..Default::default()
                })
                .logs
                .push(name);
        }
        let committed = |b: &str| b <= *last_write && (write.contains(&b) || b < *first_write);
        let Some(mut slice) = slices
            .into_values()
            .rev()
            .find(|s| committed(&s.base_instant) && s.base_instant.as_str() <= bound)
        else {
            continue;
        };
        slice.logs.retain(|name| {
            DataFile::parse(name)
                .is_some_and(|f| completion.contains_key(f.instant()) || f.instant() < *first_write)
        });
        latest.push(slice);
    }
    match latest.len() {
        1 => Ok(latest.remove(0)),
        0 => Err("the metadata table's `files` partition has no committed file slice".into()),
        n => Err(format!(
            "the metadata table's `files` partition has {n} file groups; hudi-keeper reads one"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TimelineLayout;
    use crate::storage::{FileMeta, RelPath};
    use crate::timeline::InstantZone;

    /// A layout-2 timeline from (file name) entries.
    fn timeline(names: &[&str]) -> Timeline {
        let files = names
            .iter()
            .map(|n| FileMeta {
                path: RelPath::parse(&format!(".hoodie/timeline/{n}")).unwrap(),
                size: 1,
                last_modified: chrono::Utc::now(),
            })
            .collect();
        Timeline::from_files(files, TimelineLayout::V2, InstantZone::Utc)
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    const INIT: &str = "00000000000000010";

    #[test]
    fn log_files_join_the_slice_their_deltacommit_completed_in() {
        let tl = timeline(&[
            "00000000000000010.deltacommit.requested",
            "00000000000000010_00000000000000011.deltacommit",
            "20240101000000001.deltacommit.requested",
            "20240101000000001_20240101000000003.deltacommit",
            // a compaction at 2, started before 1 completed
            "20240101000000002.compaction.requested",
            "20240101000000002_20240101000000004.commit",
            "20240101000000005.deltacommit.requested",
            "20240101000000005_20240101000000006.deltacommit",
        ]);
        let listed = names(&[
            &format!("files-0000-0_0-1-0_{INIT}.hfile"),
            &format!(".files-0000-0_{INIT}.log.1_0-1-0"),
            ".files-0000-0_20240101000000001.log.1_0-1-0",
            "files-0000-0_0-2-0_20240101000000002.hfile",
            ".files-0000-0_20240101000000005.log.1_0-1-0",
        ]);
        let s = latest_files_slice_v8(&listed, &tl).unwrap();
        assert_eq!(s.base_instant, "20240101000000002");
        assert_eq!(
            s.base_file.as_deref(),
            Some("files-0000-0_0-2-0_20240101000000002.hfile")
        );
        // 1 completed at 3, after the compaction's 2: it belongs to the new slice.
        assert_eq!(
            s.logs,
            names(&[
                ".files-0000-0_20240101000000001.log.1_0-1-0",
                ".files-0000-0_20240101000000005.log.1_0-1-0"
            ])
        );
    }

    #[test]
    fn pending_log_files_and_slices_after_the_last_completed_instant_are_not_read() {
        let tl = timeline(&[
            "00000000000000010.deltacommit.requested",
            "00000000000000010_00000000000000011.deltacommit",
            "20240101000000001.deltacommit.requested",
            "20240101000000001_20240101000000002.deltacommit",
            "20240101000000007.deltacommit.inflight",
        ]);
        let listed = names(&[
            &format!("files-0000-0_0-1-0_{INIT}.hfile"),
            ".files-0000-0_20240101000000001.log.1_0-1-0",
            ".files-0000-0_20240101000000007.log.1_0-1-0",
            // a base file of an instant on no timeline, after its end
            "files-0000-0_0-2-0_20240101000000009.hfile",
        ]);
        let s = latest_files_slice_v8(&listed, &tl).unwrap();
        assert_eq!(s.base_instant, INIT);
        assert_eq!(
            s.logs,
            names(&[".files-0000-0_20240101000000001.log.1_0-1-0"])
        );
    }

    #[test]
    fn log_files_read_in_deltacommit_then_version_order() {
        let tl = timeline(&[
            "20240101000000001.deltacommit.requested",
            "20240101000000001_20240101000000002.deltacommit",
            "20240101000000003.deltacommit.requested",
            "20240101000000003_20240101000000004.deltacommit",
        ]);
        let listed = names(&[
            ".files-0000-0_20240101000000003.log.1_0-1-0",
            ".files-0000-0_20240101000000001.log.10_0-1-0",
            ".files-0000-0_20240101000000001.log.2_0-1-0",
        ]);
        let s = latest_files_slice_v8(&listed, &tl).unwrap();
        // No base file: the first log file's instant opens the slice.
        assert_eq!(s.base_instant, "20240101000000001");
        assert_eq!(
            s.logs,
            names(&[
                ".files-0000-0_20240101000000001.log.2_0-1-0",
                ".files-0000-0_20240101000000001.log.10_0-1-0",
                ".files-0000-0_20240101000000003.log.1_0-1-0"
            ])
        );
        assert!(latest_files_slice_v8(&[], &tl).is_err());
        assert!(latest_files_slice_v8(&listed, &timeline(&[])).is_err());
    }
}
