//! Failed-write detection (hudi-format.md §3.2): which pending instants are candidates for a
//! rollback, and a verdict for each under the LAZY or EAGER policy. Pure: the caller supplies
//! the heartbeat observations and what each pending `replacecommit` is.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::heartbeat::{HeartbeatPolicy, HeartbeatStatus};
use crate::timeline::{instant_to_epoch_ms, Action, Instant, InstantZone, State, Timeline};

/// How failed writes of a table are found (`hoodie.cleaner.policy.failed.writes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailedWritesPolicy {
    /// Several writers with heartbeats: a pending instant is failed once its heartbeat expired.
    Lazy,
    /// One writer without heartbeats: every pending write that is not in progress is failed,
    /// as the next write of a single writer would find it.
    Eager,
}

impl fmt::Display for FailedWritesPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailedWritesPolicy::Lazy => "lazy",
            FailedWritesPolicy::Eager => "eager",
        })
    }
}

/// What a pending `replacecommit` is, from its requested file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaceKind {
    /// A clustering (its requested file holds a clustering plan): never a failed write.
    Clustering,
    /// Insert-overwrite, delete-partition and the like: a write like any other.
    Write,
    /// The requested file could not be read or decoded: never rolled back.
    Unknown(String),
}

/// The verdict on one pending instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Its writer's heartbeat is fresh: alive, never rolled back.
    Live,
    /// Its heartbeat expired: a failed write.
    Expired,
    /// It has no heartbeat and is older than the minimum age: a failed write.
    NoHeartbeat,
    /// It has no heartbeat but is too young to tell: wait.
    TooYoung,
    /// Not a write Hudi rolls back as failed (compaction, clustering, clean, rollback, …).
    NotACandidate,
    /// What it is could not be determined: never rolled back.
    Unknown,
}

impl Verdict {
    /// Whether the instant is a failed write to roll back.
    pub fn is_failed(self) -> bool {
        matches!(self, Verdict::Expired | Verdict::NoHeartbeat)
    }

    /// The snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Live => "live",
            Verdict::Expired => "expired",
            Verdict::NoHeartbeat => "no_heartbeat",
            Verdict::TooYoung => "too_young",
            Verdict::NotACandidate => "not_a_candidate",
            Verdict::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The assessment of one pending instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    /// The instant time.
    pub requested_time: String,
    /// The pending action.
    pub action: Action,
    /// Requested or inflight.
    pub state: State,
    /// The heartbeat's age (now − mtime) in ms, when a heartbeat file exists.
    pub heartbeat_age_ms: Option<i64>,
    /// The instant's age (now − instant time) in ms, when its time is a moment.
    pub instant_age_ms: Option<i64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in words an operator can check.
    pub reason: String,
}

/// What detection needs besides the timeline.
#[derive(Debug, Clone)]
pub struct DetectionInput<'a> {
    /// Now, in epoch ms, on this process's clock.
    pub now_ms: i64,
    /// The policy.
    pub policy: FailedWritesPolicy,
    /// Heartbeat thresholds.
    pub heartbeat: HeartbeatPolicy,
    /// The zone of the table's instant times.
    pub zone: InstantZone,
    /// Heartbeat file mtimes (epoch ms) of pending instants; an instant missing from the map
    /// has no heartbeat file.
    pub heartbeats: &'a BTreeMap<String, i64>,
    /// What each pending `replacecommit` is; a pending replacecommit missing from the map is
    /// [`ReplaceKind::Unknown`].
    pub replace_kinds: &'a BTreeMap<String, ReplaceKind>,
}

/// Why a pending instant of this action is never a failed write, or `None` for candidates
/// (commit, deltacommit, replacecommit).
pub fn non_candidate_reason(action: Action) -> Option<&'static str> {
    match action {
        Action::Commit | Action::DeltaCommit | Action::ReplaceCommit => None,
        Action::Compaction => Some(
            "a pending compaction is re-attempted by Hudi, never rolled back as a failed write",
        ),
        Action::LogCompaction => Some(
            "a pending log compaction is re-attempted by Hudi, never rolled back as a failed write",
        ),
        Action::Clustering => Some(
            "a pending clustering is re-attempted by Hudi, never rolled back as a failed write",
        ),
        Action::Clean => Some("a pending clean is finished by the next clean"),
        Action::Rollback => Some("a pending rollback is resumed, never rolled back"),
        Action::Restore => Some(
            "a pending restore must be finished (run `hudi-keeper restore` to its restore point again), never rolled back",
        ),
        Action::Indexing => Some("a pending indexing is managed by Hudi's async indexer"),
        Action::Savepoint => Some(
            "a pending savepoint is not a data write (`hudi-keeper savepoint create --instant` of its time completes it)",
        ),
    }
}

/// Assess every pending instant of `timeline`, newest first (the order rollbacks run in).
pub fn assess(timeline: &Timeline, input: &DetectionInput<'_>) -> Vec<Assessment> {
    let mut out: Vec<Assessment> = timeline.pending().map(|i| assess_one(i, input)).collect();
    out.reverse();
    out
}

fn assess_one(instant: &Instant, input: &DetectionInput<'_>) -> Assessment {
    let t = &instant.requested_time;
    let instant_ms = instant_to_epoch_ms(t, input.zone);
    let instant_age_ms = instant_ms.map(|ms| input.now_ms - ms);
    let mtime = input.heartbeats.get(t).copied();
    let status = input.heartbeat.check(input.now_ms, mtime, instant_ms);
    let heartbeat_age_ms = status.age_ms();
    let done = |verdict: Verdict, reason: String| Assessment {
        requested_time: t.clone(),
        action: instant.action,
        state: instant.state,
        heartbeat_age_ms,
        instant_age_ms,
        verdict,
        reason,
    };

    if let Some(reason) = non_candidate_reason(instant.action) {
        return done(Verdict::NotACandidate, reason.to_string());
    }
    if t.len() <= 14 && t.as_str() <= "00000000000002" {
        return done(
            Verdict::NotACandidate,
            "a bootstrap instant; bootstrap rollback is out of scope".to_string(),
        );
    }
    if instant.action == Action::ReplaceCommit {
        match input.replace_kinds.get(t) {
            Some(ReplaceKind::Write) => {}
            Some(ReplaceKind::Clustering) => {
                return done(
                    Verdict::NotACandidate,
                    "a pending clustering (replacecommit with a clustering plan) is re-attempted by Hudi, never rolled back as a failed write".to_string(),
                )
            }
            Some(ReplaceKind::Unknown(why)) => {
                return done(
                    Verdict::Unknown,
                    format!("cannot tell whether this replacecommit is a clustering: {why}"),
                )
            }
            None => {
                return done(
                    Verdict::Unknown,
                    "the replacecommit's requested file was not read".to_string(),
                )
            }
        }
    }

    let allowance = input.heartbeat.max_allowed_ms();
    let skew = input.heartbeat.clock_skew_margin.as_millis();
    let min_age = input.heartbeat.min_instant_age.as_millis();
    let policy = input.policy;
    match status {
        HeartbeatStatus::Alive { age_ms } => done(
            Verdict::Live,
            format!("heartbeat {age_ms} ms old, within {allowance} ms (interval × tolerable misses) + {skew} ms skew margin: the writer is alive"),
        ),
        HeartbeatStatus::Expired { age_ms } => done(
            Verdict::Expired,
            format!("heartbeat {age_ms} ms old, beyond {allowance} ms (interval × tolerable misses) + {skew} ms skew margin: the writer is gone"),
        ),
        HeartbeatStatus::Missing => {
            let age = instant_age_ms
                .map(|a| format!("{a} ms old"))
                .unwrap_or_else(|| "of unknown age".to_string());
            let why = match policy {
                FailedWritesPolicy::Lazy => "a LAZY writer that died before its first heartbeat, or after deleting it",
                FailedWritesPolicy::Eager => "under EAGER a single writer's next write rolls it back",
            };
            done(
                Verdict::NoHeartbeat,
                format!("no heartbeat file and the instant is {age} (minimum {min_age} ms + {skew} ms skew margin): {why}"),
            )
        }
        HeartbeatStatus::MissingTooYoung { instant_age_ms } => done(
            Verdict::TooYoung,
            format!("no heartbeat file yet, but the instant is only {instant_age_ms} ms old (minimum {min_age} ms + {skew} ms skew margin): it may still be running"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{FileMeta, RelPath};
    use crate::table::TimelineLayout;
    use std::time::Duration;

    const NOW: i64 = 1_737_864_503_628 + 3_600_000; // 2025-01-26 05:08:23.628 UTC

    fn timeline(names: &[&str]) -> Timeline {
        let files = names
            .iter()
            .map(|n| FileMeta {
                path: RelPath::parse(&format!(".hoodie/timeline/{n}")).unwrap(),
                size: 0,
                last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
            })
            .collect();
        Timeline::from_files(files, TimelineLayout::V2, InstantZone::Utc)
    }

    fn run(
        t: &Timeline,
        policy: FailedWritesPolicy,
        heartbeats: &[(&str, i64)],
        replace: &[(&str, ReplaceKind)],
    ) -> Vec<(String, Verdict)> {
        let hb = heartbeats
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let rk = replace
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let input = DetectionInput {
            now_ms: NOW,
            policy,
            heartbeat: HeartbeatPolicy {
                interval: Duration::from_secs(60),
                tolerable_misses: 2,
                min_instant_age: Duration::from_secs(600),
                clock_skew_margin: Duration::ZERO,
            },
            zone: InstantZone::Utc,
            heartbeats: &hb,
            replace_kinds: &rk,
        };
        assess(t, &input)
            .into_iter()
            .map(|a| (a.requested_time, a.verdict))
            .collect()
    }

    #[test]
    fn lazy_verdicts_follow_the_heartbeat() {
        let t = timeline(&[
            "20250126040000000_20250126040001000.commit",
            "20250126041000000.commit.requested",
            "20250126041000000.inflight",
            "20250126042000000.deltacommit.requested",
            "20250126043000000.commit.requested",
            "20250126050500000.commit.requested",
        ]);
        let v = run(
            &t,
            FailedWritesPolicy::Lazy,
            &[
                ("20250126041000000", NOW - 120_001),
                ("20250126042000000", NOW - 1_000),
            ],
            &[],
        );
        assert_eq!(
            v,
            vec![
                ("20250126050500000".into(), Verdict::TooYoung),
                ("20250126043000000".into(), Verdict::NoHeartbeat),
                ("20250126042000000".into(), Verdict::Live),
                ("20250126041000000".into(), Verdict::Expired),
            ]
        );
    }

    #[test]
    fn table_services_and_clustering_are_never_candidates() {
        let t = timeline(&[
            "20250126041000000.compaction.requested",
            "20250126042000000.logcompaction.inflight",
            "20250126043000000.clustering.inflight",
            "20250126044000000.clean.requested",
            "20250126045000000.rollback.inflight",
            "20250126046000000.replacecommit.requested",
            "20250126047000000.replacecommit.inflight",
            "20250126048000000.replacecommit.inflight",
            "20250126049000000.indexing.inflight",
            "20250126049100000.restore.inflight",
        ]);
        let v = run(
            &t,
            FailedWritesPolicy::Eager,
            &[],
            &[
                ("20250126046000000", ReplaceKind::Clustering),
                ("20250126047000000", ReplaceKind::Write),
                ("20250126048000000", ReplaceKind::Unknown("corrupt".into())),
            ],
        );
        let failed: Vec<_> = v.iter().filter(|(_, v)| v.is_failed()).collect();
        assert_eq!(
            failed,
            vec![&("20250126047000000".into(), Verdict::NoHeartbeat)]
        );
        assert!(v.contains(&("20250126048000000".into(), Verdict::Unknown)));
        assert_eq!(
            v.iter()
                .filter(|(_, v)| *v == Verdict::NotACandidate)
                .count(),
            8
        );
    }

    #[test]
    fn eager_never_overrides_a_live_heartbeat_or_a_young_instant() {
        let t = timeline(&[
            "20250126041000000.commit.requested",
            "20250126050000000.commit.requested",
        ]);
        let v = run(
            &t,
            FailedWritesPolicy::Eager,
            &[("20250126041000000", NOW - 5_000)],
            &[],
        );
        assert_eq!(
            v,
            vec![
                ("20250126050000000".into(), Verdict::TooYoung),
                ("20250126041000000".into(), Verdict::Live),
            ]
        );
    }

    #[test]
    fn completed_instants_are_not_assessed() {
        let t = timeline(&["20250126040000000_20250126040001000.deltacommit"]);
        assert!(run(&t, FailedWritesPolicy::Lazy, &[], &[]).is_empty());
    }
}
