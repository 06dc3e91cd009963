//! Which files a savepoint of `T` keeps (hudi-format.md §6, observed with Hudi 0.15 and 1.1 in
//! `tests/interop/observations/savepoint-restore.md`). Pure.
//!
//! Per partition, the file names of `T`'s view: in each file group the latest file slice whose
//! base file was written by a completed instant at or before `T`, with all of that slice's log
//! files (Hudi filters slices by base instant only, so log files written after `T` are kept
//! too). The cleaner keeps every file a savepoint names, so the list errs on the side of more:
//! file groups replaced at or before `T` (clustering, insert-overwrite) are kept as well.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::TimelineLayout;
use crate::storage::FileMeta;
use crate::table::files::DataFile;
use crate::timeline::{Action, Timeline};

/// What a savepoint is planned from.
#[derive(Debug, Clone)]
pub struct SavepointInput<'a> {
    /// The active timeline.
    pub timeline: &'a Timeline,
    /// Its layout (log files are named by their base instant in layout 1, by the writing
    /// deltacommit in layout 2).
    pub layout: TimelineLayout,
    /// The commit to savepoint.
    pub target: &'a str,
    /// Every file below the base path outside `.hoodie/`.
    pub data_files: &'a [FileMeta],
    /// Whether to list partitions without a file slice (with an empty list), as Hudi does when
    /// it lists partitions from storage; Hudi 1.x reading partitions from the metadata table
    /// leaves them out.
    pub list_empty_partitions: bool,
    /// The oldest commit the last completed clean retained (`earliestCommitToRetain`): older
    /// commits may have lost files to it, and Hudi refuses to savepoint them.
    pub earliest_retained: Option<&'a str>,
}

/// Why a savepoint cannot be taken; nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SavepointRefusal(pub String);

/// The last clean's `earliestCommitToRetain` when `t` is older than it: the cleaner may have
/// deleted file versions of `t`'s view, so `t` can be neither savepointed (Hudi's own check)
/// nor restored to without a savepoint that kept them. The one home of that rule.
pub fn cleaned_beyond<'a>(t: &str, earliest_retained: Option<&'a str>) -> Option<&'a str> {
    earliest_retained.filter(|e| t < *e)
}

/// The commit a savepoint defaults to: the latest completed commit.
pub fn default_target(timeline: &Timeline) -> Option<String> {
    timeline
        .last_completed_commit()
        .map(|i| i.requested_time.clone())
}

/// Partition → file names of `T`'s view, in Hudi's order (base file, then log files newest
/// first).
pub fn plan_savepoint(
    input: &SavepointInput<'_>,
) -> Result<BTreeMap<String, Vec<String>>, SavepointRefusal> {
    check_savepoint_point(input)?;
    let tl = input.timeline;
    let t = input.target;
    let completed: BTreeSet<&str> = tl
        .completed()
        .filter(|i| i.action.is_write())
        .map(|i| i.requested_time.as_str())
        .collect();
    let pending: BTreeSet<&str> = tl
        .pending()
        .filter(|i| i.action.is_write())
        .map(|i| i.requested_time.as_str())
        .collect();

    // (partition, file group) -> files
    type Group<'f> = Vec<(&'f str, DataFile)>;
    let mut groups: BTreeMap<(String, String), Group<'_>> = BTreeMap::new();
    let mut partitions = BTreeSet::new();
    for f in input.data_files {
        let partition = f.path.parent().to_string();
        let name = f.path.file_name();
        if name == ".hoodie_partition_metadata" || name.starts_with(".hoodie_partition_metadata.") {
            partitions.insert(partition);
            continue;
        }
        if let Some(d) = DataFile::parse(name) {
            groups
                .entry((partition, d.file_id().to_string()))
                .or_default()
                .push((name, d));
        }
    }
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if input.list_empty_partitions {
        for p in partitions {
            out.entry(p).or_default();
        }
    }
    for ((partition, _), files) in groups {
        let base = files
            .iter()
            .filter(|(_, d)| !d.is_log() && d.instant() <= t && completed.contains(d.instant()))
            .max_by(|a, b| a.1.instant().cmp(b.1.instant()));
        let mut logs: Vec<&(&str, DataFile)> = files
            .iter()
            .filter(|(_, d)| match (d, base) {
                (DataFile::Log { instant, .. }, Some((_, b))) => match input.layout {
                    TimelineLayout::V1 => instant == b.instant(),
                    TimelineLayout::V2 => {
                        instant.as_str() >= b.instant() && !pending.contains(instant.as_str())
                    }
                },
                // A file group of log files only: those at or before T.
                (DataFile::Log { instant, .. }, None) => {
                    instant.as_str() <= t && completed.contains(instant.as_str())
                }
                _ => false,
            })
            .collect();
        if base.is_none() && logs.is_empty() {
            continue;
        }
        logs.sort_by_key(|l| std::cmp::Reverse(log_order(&l.1)));
        let list = out.entry(partition).or_default();
        if let Some((name, _)) = base {
            list.push(name.to_string());
        }
        list.extend(logs.iter().map(|(name, _)| name.to_string()));
    }
    Ok(out)
}

/// `T` must be a completed commit on the active timeline, not cleaned beyond, and not
/// savepointed already.
fn check_savepoint_point(input: &SavepointInput<'_>) -> Result<(), SavepointRefusal> {
    let tl = input.timeline;
    let t = input.target;
    let Some(point) = tl.find(t).find(|i| {
        matches!(
            i.action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        )
    }) else {
        let earliest = tl.instants().first().map(|i| i.requested_time.as_str());
        return Err(SavepointRefusal(match earliest {
            Some(e) if t < e => format!("{t} is older than the active timeline (which starts at {e}); its files may be cleaned already"),
            _ => format!("there is no commit at {t} on the active timeline"),
        }));
    };
    if point.is_pending() {
        return Err(SavepointRefusal(format!(
            "{t} is not completed; only completed commits can be savepointed"
        )));
    }
    if let Some(e) = cleaned_beyond(t, input.earliest_retained) {
        return Err(SavepointRefusal(format!(
            "{t} is older than {e}, the oldest commit the last clean retained: files of its view may be cleaned already (Hudi refuses this savepoint too)"
        )));
    }
    if tl
        .find(t)
        .any(|i| i.action == Action::Savepoint && !i.is_pending())
    {
        return Err(SavepointRefusal(format!("{t} is already savepointed")));
    }
    Ok(())
}

fn log_order(d: &DataFile) -> (String, u32, String) {
    match d {
        DataFile::Log {
            instant,
            version,
            write_token,
            ..
        } => (instant.clone(), *version, write_token.clone()),
        DataFile::Base { instant, .. } => (instant.clone(), 0, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::RelPath;
    use crate::timeline::InstantZone;

    fn metas(paths: &[&str]) -> Vec<FileMeta> {
        paths
            .iter()
            .map(|p| FileMeta {
                path: RelPath::parse(p).unwrap(),
                size: 1,
                last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
            })
            .collect()
    }

    fn timeline(names: &[&str], layout: TimelineLayout) -> Timeline {
        let dir = match layout {
            TimelineLayout::V1 => ".hoodie",
            TimelineLayout::V2 => ".hoodie/timeline",
        };
        let paths: Vec<String> = names.iter().map(|n| format!("{dir}/{n}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        Timeline::from_files(metas(&refs), layout, InstantZone::Utc)
    }

    #[test]
    fn a_v6_merge_on_read_savepoint_keeps_the_latest_slice_at_t_with_all_its_logs() {
        let tl = timeline(
            &[
                "101.deltacommit",
                "102.deltacommit",
                "103.deltacommit",
                "104.commit",
                "105.deltacommit.inflight",
            ],
            TimelineLayout::V1,
        );
        let files = metas(&[
            "p0/.hoodie_partition_metadata",
            "p0/f1_0-0-0_101.parquet",
            "p0/.f1_101.log.1_0-0-0",
            "p0/.f1_101.log.2_0-0-0",
            "p0/.f1_101.log.3_1-0-1",
            "p0/f1_0-0-0_104.parquet",
            "p0/f2_0-0-0_103.parquet",
            "p0/f1_0-0-0_105.parquet",
            "p3/.hoodie_partition_metadata",
        ]);
        let input = SavepointInput {
            timeline: &tl,
            layout: TimelineLayout::V1,
            target: "102",
            data_files: &files,
            list_empty_partitions: true,
            earliest_retained: None,
        };
        let sp = plan_savepoint(&input).unwrap();
        assert_eq!(
            sp["p0"],
            [
                "f1_0-0-0_101.parquet",
                ".f1_101.log.3_1-0-1",
                ".f1_101.log.2_0-0-0",
                ".f1_101.log.1_0-0-0"
            ]
        );
        assert!(sp["p3"].is_empty());
        let without = SavepointInput {
            list_empty_partitions: false,
            ..input
        };
        assert!(!plan_savepoint(&without).unwrap().contains_key("p3"));
    }

    #[test]
    fn a_v9_savepoint_keeps_later_committed_logs_of_the_slice_but_not_pending_ones() {
        let tl = timeline(
            &[
                "101_111.deltacommit",
                "102_112.deltacommit",
                "103_113.deltacommit",
                "104.deltacommit.inflight",
            ],
            TimelineLayout::V2,
        );
        let files = metas(&[
            "p0/f1_0-0-0_101.parquet",
            "p0/.f1_102.log.1_0-0-0",
            "p0/.f1_103.log.1_0-0-0",
            "p0/.f1_104.log.1_0-0-0",
        ]);
        let sp = plan_savepoint(&SavepointInput {
            timeline: &tl,
            layout: TimelineLayout::V2,
            target: "102",
            data_files: &files,
            list_empty_partitions: false,
            earliest_retained: None,
        })
        .unwrap();
        assert_eq!(
            sp["p0"],
            [
                "f1_0-0-0_101.parquet",
                ".f1_103.log.1_0-0-0",
                ".f1_102.log.1_0-0-0"
            ]
        );
    }

    #[test]
    fn refuses_pending_missing_archived_and_already_savepointed_commits() {
        let tl = timeline(
            &[
                "101.commit",
                "102.commit",
                "102.savepoint.inflight",
                "102.savepoint",
                "103.inflight",
            ],
            TimelineLayout::V1,
        );
        let files = metas(&[]);
        let refusal = |t: &str| {
            plan_savepoint(&SavepointInput {
                timeline: &tl,
                layout: TimelineLayout::V1,
                target: t,
                data_files: &files,
                list_empty_partitions: true,
                earliest_retained: Some("102"),
            })
            .unwrap_err()
            .0
        };
        assert!(refusal("103").contains("not completed"));
        assert!(refusal("102").contains("already savepointed"));
        assert!(refusal("101").contains("the oldest commit the last clean retained"));
        assert!(refusal("100").contains("older than the active timeline"));
        assert!(refusal("1015").contains("no commit at 1015"));
        assert_eq!(default_target(&tl).as_deref(), Some("102"));
    }
}
