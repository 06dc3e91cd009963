//! The active timeline: instants, their file names, and the queries later stages need.

mod action;
pub mod archived;
mod file_name;
mod time;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use action::{Action, State, UnknownAction};
pub use file_name::{is_valid, looks_like_timeline_file, FileNameError, TimelineFileName};
pub use time::{format_instant, instant_to_epoch_ms, InstantZone};

use crate::config::{TableConfig, TimelineLayout};
use crate::storage::{FileMeta, RelPath, Storage, StorageError};

/// One instant as Hudi reports it: one entry per requested time (and action family), in its
/// latest state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Instant {
    /// The instant (requested) time.
    pub requested_time: String,
    /// The action as Hudi reports it: for a completed instant, the action of its completed file
    /// (a completed compaction is a `commit`).
    pub action: Action,
    /// The latest state.
    pub state: State,
    /// The completion time: from the file name in layout 2, from the completed file's
    /// modification time for legacy layout-2 files; `None` in layout 1 and while pending.
    pub completion_time: Option<String>,
    /// The action of the instant's requested/inflight files (`compaction` for a completed
    /// compaction); equals `action` when there are none.
    #[serde(skip)]
    pub pending_action: Action,
    /// The timeline files of this instant present on storage, oldest state first.
    #[serde(skip)]
    pub files: Vec<TimelineFile>,
}

/// One file of the timeline folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineFile {
    /// The parsed name.
    pub name: TimelineFileName,
    /// The path relative to the table base path.
    pub path: RelPath,
    /// The size in bytes.
    pub size: u64,
    /// The modification time.
    pub last_modified: DateTime<Utc>,
}

impl Instant {
    /// Whether the instant is not completed.
    pub fn is_pending(&self) -> bool {
        self.state.is_pending()
    }

    /// The file of the given state, if present.
    pub fn file(&self, state: State) -> Option<&TimelineFile> {
        self.files.iter().find(|f| f.name.state == state)
    }

    /// The file of the latest state.
    pub fn latest_file(&self) -> Option<&TimelineFile> {
        self.files.iter().max_by_key(|f| f.name.state)
    }
}

/// A timeline-looking file whose name did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MalformedFile {
    /// The file name.
    pub name: String,
    /// Why it was not accepted.
    pub reason: String,
}

/// A loaded active timeline, sorted as Hudi sorts it (requested time, then action, then state).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    instants: Vec<Instant>,
    malformed: Vec<MalformedFile>,
    layout: Option<TimelineLayout>,
}

/// The family an action belongs to for grouping files into instants (Hudi's comparable action).
fn family(a: Action) -> Action {
    a.completed_action()
}

impl Timeline {
    /// Build a timeline from the files of a timeline folder (one level), in any order.
    ///
    /// Names not starting with a digit are not timeline files and are ignored; names that start
    /// with a digit but do not parse are kept in [`Timeline::malformed`].
    pub fn from_files(files: Vec<FileMeta>, layout: TimelineLayout, zone: InstantZone) -> Self {
        let mut malformed = Vec::new();
        let mut groups: BTreeMap<(String, Action), Vec<TimelineFile>> = BTreeMap::new();
        for meta in files {
            let name = meta.file_name().to_string();
            if !looks_like_timeline_file(&name) {
                continue;
            }
            match TimelineFileName::parse(&name, layout) {
                Ok(parsed) => {
                    let key = (parsed.requested_time.clone(), family(parsed.action));
                    groups.entry(key).or_default().push(TimelineFile {
                        name: parsed,
                        path: meta.path,
                        size: meta.size,
                        last_modified: meta.last_modified,
                    });
                }
                Err(e) => malformed.push(MalformedFile {
                    name,
                    reason: e.reason,
                }),
            }
        }
        let mut instants: Vec<Instant> = groups
            .into_iter()
            .map(|((requested_time, fam), mut files)| {
                files.sort_by_key(|f| f.name.state);
                let latest = files.last().map(|f| f.name.clone());
                let (state, action, completion_time) = match latest {
                    Some(l) if l.state == State::Completed => {
                        let c = l.completion_time.clone().or_else(|| {
                            (layout == TimelineLayout::V2).then(|| {
                                let f = files.last().map(|f| f.last_modified).unwrap_or_default();
                                format_instant(f, zone)
                            })
                        });
                        (State::Completed, l.action, c)
                    }
                    Some(l) => (l.state, l.action, None),
                    None => (State::Requested, fam, None),
                };
                let pending_action = files
                    .iter()
                    .find(|f| f.name.state != State::Completed)
                    .map(|f| f.name.action)
                    .unwrap_or(action);
                Instant {
                    requested_time,
                    action,
                    state,
                    completion_time,
                    pending_action,
                    files,
                }
            })
            .collect();
        instants.sort_by(|a, b| {
            (&a.requested_time, a.action, a.state).cmp(&(&b.requested_time, b.action, b.state))
        });
        malformed.sort_by(|a, b| a.name.cmp(&b.name));
        Timeline {
            instants,
            malformed,
            layout: Some(layout),
        }
    }

    /// Load the active timeline of a table with one listing of its timeline folder.
    pub async fn load(
        storage: &Storage,
        config: &TableConfig,
        zone: InstantZone,
    ) -> Result<Self, StorageError> {
        let listing = storage.list_dir(&config.timeline_path()).await?;
        Ok(Self::from_files(
            listing.files,
            config.timeline_layout,
            zone,
        ))
    }

    /// Every instant, sorted.
    pub fn instants(&self) -> &[Instant] {
        &self.instants
    }

    /// Timeline-looking files that did not parse.
    pub fn malformed(&self) -> &[MalformedFile] {
        &self.malformed
    }

    /// The layout the timeline was read with.
    pub fn layout(&self) -> Option<TimelineLayout> {
        self.layout
    }

    /// Instants not completed.
    pub fn pending(&self) -> impl Iterator<Item = &Instant> {
        self.instants.iter().filter(|i| i.is_pending())
    }

    /// Completed instants.
    pub fn completed(&self) -> impl Iterator<Item = &Instant> {
        self.instants.iter().filter(|i| !i.is_pending())
    }

    /// The commits timeline: `commit`, `deltacommit`, `replacecommit` and `clustering` instants
    /// in any state (pending compactions are not part of it, as in Hudi).
    pub fn commits(&self) -> impl Iterator<Item = &Instant> {
        self.instants.iter().filter(|i| {
            matches!(
                i.action,
                Action::Commit | Action::DeltaCommit | Action::ReplaceCommit | Action::Clustering
            )
        })
    }

    /// The last completed instant of the commits timeline.
    pub fn last_completed_commit(&self) -> Option<&Instant> {
        self.commits().filter(|i| !i.is_pending()).last()
    }

    /// The last completed instant of any action.
    pub fn last_completed(&self) -> Option<&Instant> {
        self.completed().last()
    }

    /// Instants whose requested time sorts after `time`.
    pub fn after<'a>(&'a self, time: &'a str) -> impl Iterator<Item = &'a Instant> + 'a {
        self.instants
            .iter()
            .filter(move |i| i.requested_time.as_str() > time)
    }

    /// The instants with this requested time (usually one).
    pub fn find(&self, requested_time: &str) -> impl Iterator<Item = &Instant> {
        let t = requested_time.to_string();
        self.instants.iter().filter(move |i| i.requested_time == t)
    }

    /// The greatest requested or completion time on the timeline.
    pub fn max_time(&self) -> Option<&str> {
        self.instants
            .iter()
            .flat_map(|i| std::iter::once(&i.requested_time).chain(i.completion_time.as_ref()))
            .map(String::as_str)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str], dir: &str) -> Vec<FileMeta> {
        names
            .iter()
            .map(|n| FileMeta {
                path: RelPath::parse(&format!("{dir}/{n}")).unwrap(),
                size: 0,
                last_modified: DateTime::from_timestamp_millis(1_737_864_503_628).unwrap(),
            })
            .collect()
    }

    fn summary(t: &Timeline) -> Vec<(String, &'static str, &'static str, Option<String>)> {
        t.instants()
            .iter()
            .map(|i| {
                (
                    i.requested_time.clone(),
                    i.action.as_str(),
                    i.state.as_str(),
                    i.completion_time.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn layout_1_reports_one_instant_per_time_in_its_latest_state() {
        let t = Timeline::from_files(
            files(
                &[
                    "hoodie.properties",
                    "001.commit.requested",
                    "001.inflight",
                    "001.commit",
                    "002.compaction.requested",
                    "002.compaction.inflight",
                    "002.commit",
                    "003.deltacommit.requested",
                    "003.deltacommit.inflight",
                    "004.rollback.requested",
                    "005.commit.requested",
                    ".001.commit.crc",
                    "006.junk",
                ],
                ".hoodie",
            ),
            TimelineLayout::V1,
            InstantZone::Utc,
        );
        assert_eq!(
            summary(&t),
            vec![
                ("001".into(), "commit", "completed", None),
                ("002".into(), "commit", "completed", None),
                ("003".into(), "deltacommit", "inflight", None),
                ("004".into(), "rollback", "requested", None),
                ("005".into(), "commit", "requested", None),
            ]
        );
        assert_eq!(t.instants()[1].pending_action, Action::Compaction);
        assert_eq!(t.malformed().len(), 1);
        assert_eq!(t.malformed()[0].name, "006.junk");
        assert_eq!(t.pending().count(), 3);
        assert_eq!(t.last_completed_commit().unwrap().requested_time, "002");
        assert_eq!(t.after("003").count(), 2);
    }

    #[test]
    fn layout_2_takes_completion_times_from_names_or_mtime() {
        let t = Timeline::from_files(
            files(
                &[
                    "20250126040823628.deltacommit.requested",
                    "20250126040823628.deltacommit.inflight",
                    "20250126040823628_20250126040825001.deltacommit",
                    "20240101000000000.commit",
                    "20250126040900000.clustering.requested",
                    "20250126040900000.clustering.inflight",
                ],
                ".hoodie/timeline",
            ),
            TimelineLayout::V2,
            InstantZone::Utc,
        );
        assert_eq!(
            summary(&t),
            vec![
                (
                    "20240101000000000".into(),
                    "commit",
                    "completed",
                    Some("20250126040823628".into())
                ),
                (
                    "20250126040823628".into(),
                    "deltacommit",
                    "completed",
                    Some("20250126040825001".into())
                ),
                ("20250126040900000".into(), "clustering", "inflight", None),
            ]
        );
        assert_eq!(t.max_time(), Some("20250126040900000"));
    }

    #[test]
    fn an_empty_folder_is_an_empty_timeline() {
        let t = Timeline::from_files(vec![], TimelineLayout::V2, InstantZone::Utc);
        assert!(t.instants().is_empty());
        assert!(t.last_completed().is_none());
    }
}
