//! Failed-write detection (hudi-format.md §3.2): which pending instants are candidates for a
//! rollback, and a verdict for each under the LAZY or EAGER policy. Pure: the caller supplies
//! the heartbeat observations, what each pending `replacecommit` is (both read by
//! [`super::observe`]), and what is known about the table's writers.
//!
//! **Fail closed.** A verdict that deletes rests only on what every process can see: the
//! timeline and heartbeat files with the store's modification times, and the table's
//! configuration. Nothing a single process remembers (what it saw while a write was young, in
//! memory or in its `state_dir`) can make a write failed; it may only make more be left alone.
//! A replica that takes a table over, a restart with lost or corrupt state, a poll interval
//! longer than the minimum age, a backoff or a halt all see the same verdicts.
//!
//! A heartbeat file proves a LAZY writer (LAZY writers start their heartbeat before they write
//! the requested instant): fresh, it is alive; expired, it is dead. A pending write with **no**
//! heartbeat file is, for the same reason, not a live LAZY writer's: it is an EAGER writer's
//! (Hudi's default, which writes no heartbeat and may still be running) or one whose heartbeat
//! file was lost. Heartbeat files of other writes do not tell which. So it is failed only
//!
//! * under LAZY, once at least the minimum age old, on a table whose operator stated that every
//!   writer is LAZY (configuration every process reads);
//! * under EAGER, once a newer write started after it (the single writer moved on);
//! * under either, once older than the table's maximum write duration (an operator's opt-in).
//!
//! Otherwise it is reported and left alone. Ages come from the store's clock (the instant's
//! first timeline file's modification time, the same clock as heartbeats), never from the
//! instant time read in some zone; an instant of unknown age is never failed.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::heartbeat::{duration_ms, HeartbeatPolicy, HeartbeatStatus};
use crate::human::Ms;
use crate::timeline::{Action, Instant, State, Timeline};

/// How failed writes of a table are found (`hoodie.cleaner.policy.failed.writes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailedWritesPolicy {
    /// Writers with heartbeats (several writers): a pending instant is failed once its
    /// heartbeat expired, or, without heartbeat file, once old enough on a table whose operator
    /// stated every writer is LAZY.
    Lazy,
    /// One writer without heartbeats (Hudi's default): a pending write is failed once a newer
    /// write started after it (or its heartbeat, if it has one, expired).
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
    /// No heartbeat file, at least the minimum age old, on a table whose operator stated that
    /// every writer is LAZY (they write their heartbeat before the instant, so this one died
    /// before its first heartbeat or lost it): a failed write.
    NoHeartbeat,
    /// No heartbeat file and at least the minimum age old, but nothing shows the table has LAZY
    /// writers: it may be an EAGER writer still running. Reported and left alone.
    NoHeartbeatUnconfirmed,
    /// Under EAGER: no heartbeat file, at least the minimum age old, and a newer write started
    /// after it (the single writer moved on): a failed write.
    Superseded,
    /// Under EAGER: no heartbeat file, at least the minimum age old, and the newest write: its
    /// writer may still be running. Reported and left alone.
    AwaitingNewerWrite,
    /// No heartbeat file and older than the table's maximum write duration (an operator's
    /// opt-in): a failed write.
    Overdue,
    /// No heartbeat file but too young to tell: wait.
    TooYoung,
    /// Under LAZY: no heartbeat file although younger than the minimum age, or at any age on a
    /// table whose heartbeat files (now, or seen before) show LAZY writers. A LAZY writer writes
    /// its heartbeat first, so this looks like an EAGER writer's write (which may still be
    /// running) on a table judged LAZY. Left alone, unless the operator states every writer is
    /// LAZY or it is older than a maximum write duration.
    EagerWriterSuspected,
    /// No heartbeat file and its age cannot be established from the store, or a heartbeat file
    /// whose modification time the store does not give: never rolled back automatically (fail
    /// closed).
    AgeUnknown,
    /// A pending rollback whose rollback heartbeat (`.hoodie/.heartbeat/<rollback instant>`,
    /// written by Hudi 1.2 writers under multi-writer and by hudi-keeper) is fresh, or of unknown
    /// age: another process is running it. Never resumed or taken over, whatever its age.
    RollbackInProgress,
    /// Not a write Hudi rolls back as failed (compaction, clustering, clean, rollback, …).
    NotACandidate,
    /// What it is could not be determined: never rolled back.
    Unknown,
}

impl Verdict {
    /// Whether the instant is a failed write to roll back.
    pub fn is_failed(self) -> bool {
        matches!(
            self,
            Verdict::Expired | Verdict::NoHeartbeat | Verdict::Superseded | Verdict::Overdue
        )
    }

    /// Whether the instant is a write that nothing proves dead and that is left alone, though it
    /// is old enough that it may be a failed one (the operator decides).
    pub fn is_left_alone(self) -> bool {
        matches!(
            self,
            Verdict::NoHeartbeatUnconfirmed | Verdict::AwaitingNewerWrite | Verdict::AgeUnknown
        )
    }

    /// Whether `rollback --instant` of it needs `--force` (its writer may be alive and nothing
    /// older than the minimum age says otherwise), is allowed without it, or is never allowed.
    pub fn named_rollback(self) -> NamedRollback {
        match self {
            Verdict::Expired
            | Verdict::NoHeartbeat
            | Verdict::Superseded
            | Verdict::Overdue
            | Verdict::NoHeartbeatUnconfirmed
            | Verdict::AwaitingNewerWrite => NamedRollback::Allowed,
            Verdict::Live
            | Verdict::TooYoung
            | Verdict::EagerWriterSuspected
            | Verdict::AgeUnknown => NamedRollback::NeedsForce,
            Verdict::RollbackInProgress | Verdict::NotACandidate | Verdict::Unknown => {
                NamedRollback::Never
            }
        }
    }

    /// The snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Live => "live",
            Verdict::Expired => "expired",
            Verdict::NoHeartbeat => "no_heartbeat",
            Verdict::NoHeartbeatUnconfirmed => "no_heartbeat_unconfirmed",
            Verdict::Superseded => "superseded",
            Verdict::AwaitingNewerWrite => "awaiting_newer_write",
            Verdict::Overdue => "overdue",
            Verdict::TooYoung => "too_young",
            Verdict::EagerWriterSuspected => "eager_writer_suspected",
            Verdict::AgeUnknown => "age_unknown",
            Verdict::RollbackInProgress => "rollback_in_progress",
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

/// What naming an instant to `rollback --instant` does, by its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedRollback {
    /// Rolled back: failed, or left alone only for want of proof (naming it is the operator's
    /// decision).
    Allowed,
    /// Only with `--force`: its writer may be alive.
    NeedsForce,
    /// Never: not a failed write at all.
    Never,
}

/// Why a table is known to have LAZY writers (writers that keep heartbeats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LazyWritersEvidence {
    /// Heartbeat files are in `.hoodie/.heartbeat/` now.
    HeartbeatFilesNow,
    /// Heartbeat files were seen on this table before (the daemon remembers it). Reported
    /// only: what one process remembers never makes a write failed.
    SeenBefore,
    /// The operator stated that every writer of the table is LAZY.
    Assumed,
}

impl LazyWritersEvidence {
    /// What a process knows of a table's writers before it lists the heartbeat files: the
    /// operator's statement that every writer is LAZY (configuration every process reads) first,
    /// else that this process saw heartbeat files on the table before (its memory: it names the
    /// verdict of a write left alone, and never makes one failed). The daemon and the model test
    /// (`crates/core/tests/failed_write_model.rs`) both decide with it.
    pub fn known(assume_lazy_writers: bool, seen_before: bool) -> Option<Self> {
        if assume_lazy_writers {
            Some(LazyWritersEvidence::Assumed)
        } else if seen_before {
            Some(LazyWritersEvidence::SeenBefore)
        } else {
            None
        }
    }

    /// In words, for reasons.
    pub fn describe(self) -> &'static str {
        match self {
            LazyWritersEvidence::HeartbeatFilesNow => "heartbeat files are on the table now",
            LazyWritersEvidence::SeenBefore => "heartbeat files were seen on the table before",
            LazyWritersEvidence::Assumed => "the operator stated every writer is LAZY",
        }
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
    /// The instant's age in ms: now − the modification time of its first timeline file (the
    /// store's clock, as heartbeats); `None` when the store gives none.
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
    /// Heartbeat file mtimes (epoch ms) of pending instants; an instant missing from the map
    /// has no heartbeat file.
    pub heartbeats: &'a BTreeMap<String, i64>,
    /// What each pending `replacecommit` is; a pending replacecommit missing from the map is
    /// [`ReplaceKind::Unknown`].
    pub replace_kinds: &'a BTreeMap<String, ReplaceKind>,
    /// Whether (and why) the table is known to have LAZY writers. Under LAZY, a pending write
    /// without heartbeat file is only failed (as [`Verdict::NoHeartbeat`]) when the evidence is
    /// [`LazyWritersEvidence::Assumed`]: heartbeat files now or seen before name the verdict of
    /// a write left alone, nothing more.
    pub lazy_writers: Option<LazyWritersEvidence>,
    /// The operator's opt-in: no write of this table runs longer than this, so a pending write
    /// without heartbeat file that is older is dead (under either policy).
    pub max_write_duration: Option<Duration>,
    /// Hudi 1.2's clustering expiration (`hoodie.clustering.enable.expirations` with
    /// `hoodie.clustering.expiration.threshold.mins`), under LAZY: a pending clustering whose
    /// heartbeat file exists and expired, at least this old, is rolled back as a failed write.
    /// `None` (Hudi's default): a pending clustering is never a candidate.
    pub clustering_expiration: Option<Duration>,
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

/// When an instant started, on the store's clock: the earliest modification time of its
/// requested or inflight files, in epoch ms. `None` when it has none, or the store reported no
/// time (the epoch or earlier): its age is then unknown.
pub fn instant_started_ms(instant: &Instant) -> Option<i64> {
    instant
        .files
        .iter()
        .filter(|f| f.name.state != State::Completed)
        .map(|f| f.last_modified.timestamp_millis())
        .min()
        .filter(|ms| *ms > 0)
}

/// Whether `instant` is a data write started by a writer (for the EAGER rule: a newer write
/// shows the single writer moved on). Conservative: a commit or deltacommit counts only with a
/// requested file of that action (a completed compaction's is `compaction.requested`), a
/// replacecommit only while pending and known to be a write (a completed one may be a
/// clustering); table services never count.
fn is_started_write(instant: &Instant, replace_kinds: &BTreeMap<String, ReplaceKind>) -> bool {
    match instant.action {
        Action::Commit | Action::DeltaCommit => instant
            .files
            .iter()
            .any(|f| f.name.state == State::Requested && f.name.action == instant.action),
        Action::ReplaceCommit => {
            instant.is_pending()
                && matches!(
                    replace_kinds.get(&instant.requested_time),
                    Some(ReplaceKind::Write)
                )
        }
        _ => false,
    }
}

/// Assess every pending instant of `timeline`, newest first (the order rollbacks run in).
pub fn assess(timeline: &Timeline, input: &DetectionInput<'_>) -> Vec<Assessment> {
    let newest_write = timeline
        .instants()
        .iter()
        .filter(|i| is_started_write(i, input.replace_kinds))
        .map(|i| i.requested_time.as_str())
        .max();
    let mut out: Vec<Assessment> = timeline
        .pending()
        .map(|i| assess_one(i, newest_write, input))
        .collect();
    out.reverse();
    out
}

fn assess_one(
    instant: &Instant,
    newest_write: Option<&str>,
    input: &DetectionInput<'_>,
) -> Assessment {
    let t = &instant.requested_time;
    let started_ms = instant_started_ms(instant);
    let instant_age_ms = started_ms.map(|ms| input.now_ms - ms);
    let mtime = input.heartbeats.get(t).copied();
    let status = input.heartbeat.check(input.now_ms, mtime, started_ms);
    let heartbeat_age_ms = status.age_ms();
    let (verdict, reason) = match not_a_failed_write(instant, input) {
        Some(found) => found,
        None => judge_write(status, instant, instant_age_ms, newest_write, input),
    };
    Assessment {
        requested_time: t.clone(),
        action: instant.action,
        state: instant.state,
        heartbeat_age_ms,
        instant_age_ms,
        verdict,
        reason,
    }
}

/// The verdict on an instant that is no write Hudi rolls back as failed (a table service, a
/// bootstrap, a clustering `replacecommit`), or on a `replacecommit` of unknown kind; `None`
/// for a write to judge by its heartbeat.
fn not_a_failed_write(instant: &Instant, input: &DetectionInput<'_>) -> Option<(Verdict, String)> {
    let t = &instant.requested_time;
    if instant.action == Action::Rollback {
        return Some(judge_pending_rollback(instant, input));
    }
    let clustering = instant.action == Action::Clustering
        || (instant.action == Action::ReplaceCommit
            && matches!(input.replace_kinds.get(t), Some(ReplaceKind::Clustering)));
    if clustering && input.policy == FailedWritesPolicy::Lazy {
        if let Some(threshold) = input.clustering_expiration {
            return Some(judge_clustering(instant, input, threshold));
        }
    }
    if let Some(reason) = non_candidate_reason(instant.action) {
        return Some((Verdict::NotACandidate, reason.to_string()));
    }
    if t.len() <= 14 && t.as_str() <= "00000000000002" {
        return Some((
            Verdict::NotACandidate,
            "a bootstrap instant; bootstrap rollback is out of scope".to_string(),
        ));
    }
    if instant.action != Action::ReplaceCommit {
        return None;
    }
    match input.replace_kinds.get(t) {
        Some(ReplaceKind::Write) => None,
        Some(ReplaceKind::Clustering) => Some((
            Verdict::NotACandidate,
            "a pending clustering (replacecommit with a clustering plan) is re-attempted by Hudi, never rolled back as a failed write".to_string(),
        )),
        Some(ReplaceKind::Unknown(why)) => Some((
            Verdict::Unknown,
            format!("cannot tell whether this replacecommit is a clustering: {why}"),
        )),
        None => Some((
            Verdict::Unknown,
            "the replacecommit's requested file was not read".to_string(),
        )),
    }
}

/// The verdict on a pending rollback, by its rollback heartbeat (Hudi 1.2's multi-writer
/// rollbacks and hudi-keeper's own keep `.hoodie/.heartbeat/<rollback instant>` fresh while they
/// run): fresh, or of unknown age, another process runs it ([`Verdict::RollbackInProgress`]);
/// expired, or absent (older writers write none), it is resumed by the rules of
/// [`crate::exec::rollback`] (an absent one only once older than the minimum age).
fn judge_pending_rollback(instant: &Instant, input: &DetectionInput<'_>) -> (Verdict, String) {
    let allowance = input.heartbeat.max_allowed_ms();
    let skew = duration_ms(input.heartbeat.clock_skew_margin);
    let mtime = input.heartbeats.get(&instant.requested_time).copied();
    match input.heartbeat.check(input.now_ms, mtime, None) {
        HeartbeatStatus::Alive { age_ms } => (
            Verdict::RollbackInProgress,
            format!("the rollback's heartbeat is {} old, within {} (interval × tolerable misses) + {} skew margin: another process is running it, so it is left to that process whatever its age", Ms(age_ms), Ms(allowance), Ms(skew)),
        ),
        HeartbeatStatus::AgeUnknown => (
            Verdict::RollbackInProgress,
            "the rollback has a heartbeat file, but the store gives no modification time for it, so another process may be running it: left alone".to_string(),
        ),
        HeartbeatStatus::Expired { age_ms } => (
            Verdict::NotACandidate,
            format!("a pending rollback whose heartbeat is {} old, beyond {} + {} skew margin: whoever ran it is gone, so it is resumed (never rolled back itself)", Ms(age_ms), Ms(allowance), Ms(skew)),
        ),
        _ => (
            Verdict::NotACandidate,
            "a pending rollback without heartbeat file is resumed once it is older than the minimum instant age (writers before Hudi 1.2 write no rollback heartbeat), never rolled back".to_string(),
        ),
    }
}

/// The verdict on a pending clustering with clustering expiration on (Hudi 1.2, LAZY only): an
/// expired clustering is failed once its heartbeat file exists and expired and it is at least
/// `threshold` old (by the store's clock: its first timeline file, where Hudi reads the instant
/// time). Without heartbeat file it stays a non-candidate: its writer may not have expirations
/// on, and then it writes none.
fn judge_clustering(
    instant: &Instant,
    input: &DetectionInput<'_>,
    threshold: Duration,
) -> (Verdict, String) {
    let skew = duration_ms(input.heartbeat.clock_skew_margin);
    let started_ms = instant_started_ms(instant);
    let mtime = input.heartbeats.get(&instant.requested_time).copied();
    let limit = duration_ms(threshold).saturating_add(skew);
    match (input.heartbeat.check(input.now_ms, mtime, started_ms), started_ms) {
        (HeartbeatStatus::Expired { age_ms }, Some(started)) => {
            let age = input.now_ms.saturating_sub(started);
            if age >= limit {
                (
                    Verdict::Expired,
                    format!("an expired clustering: its heartbeat is {} old, beyond {} + {} skew margin, and it is {} old, at least the clustering expiration threshold {} + {}: rolled back as Hudi 1.2 does with hoodie.clustering.enable.expirations", Ms(age_ms), Ms(input.heartbeat.max_allowed_ms()), Ms(skew), Ms(age), Ms(duration_ms(threshold)), Ms(skew)),
                )
            } else {
                (
                    Verdict::NotACandidate,
                    format!("a pending clustering whose heartbeat expired, but only {} old (clustering expiration threshold {} + {}): left alone until then", Ms(age), Ms(duration_ms(threshold)), Ms(skew)),
                )
            }
        }
        (HeartbeatStatus::Alive { age_ms }, _) => (
            Verdict::NotACandidate,
            format!("a pending clustering whose heartbeat is {} old: its job is running", Ms(age_ms)),
        ),
        (HeartbeatStatus::Expired { .. } | HeartbeatStatus::AgeUnknown, _) => (
            Verdict::NotACandidate,
            "a pending clustering whose heartbeat or start time has no modification time the store gives: its age cannot be established, so it is left alone".to_string(),
        ),
        _ => (
            Verdict::NotACandidate,
            "a pending clustering without heartbeat file: its job may not have clustering expirations on (then it writes none), so it is re-attempted by Hudi, never rolled back".to_string(),
        ),
    }
}

/// The verdict on a write, by its heartbeat status (and, without heartbeat file, its age, the
/// policy and what is known about the table's writers).
fn judge_write(
    status: HeartbeatStatus,
    instant: &Instant,
    instant_age_ms: Option<i64>,
    newest_write: Option<&str>,
    input: &DetectionInput<'_>,
) -> (Verdict, String) {
    let allowance = input.heartbeat.max_allowed_ms();
    let skew = duration_ms(input.heartbeat.clock_skew_margin);
    let min_age = duration_ms(input.heartbeat.min_instant_age);
    match status {
        HeartbeatStatus::Alive { age_ms } => (
            Verdict::Live,
            format!("heartbeat {} old, within {} (interval × tolerable misses) + {} skew margin: the writer is alive", Ms(age_ms), Ms(allowance), Ms(skew)),
        ),
        HeartbeatStatus::Expired { age_ms } => (
            Verdict::Expired,
            format!("heartbeat {} old, beyond {} (interval × tolerable misses) + {} skew margin: the writer is gone", Ms(age_ms), Ms(allowance), Ms(skew)),
        ),
        HeartbeatStatus::AgeUnknown => (
            Verdict::AgeUnknown,
            "a heartbeat file exists, but the store gives no modification time for it, so its writer may be beating right now: never rolled back automatically (`rollback --instant` with `--force` if you know its writer is gone)".to_string(),
        ),
        HeartbeatStatus::MissingAgeUnknown => (
            Verdict::AgeUnknown,
            "no heartbeat file, and the store gives no modification time for the instant's timeline files, so its age cannot be established: never rolled back automatically (`rollback --instant` with `--force` if you know its writer is gone)".to_string(),
        ),
        HeartbeatStatus::MissingTooYoung { instant_age_ms } => match input.policy {
            FailedWritesPolicy::Lazy => (
                Verdict::EagerWriterSuspected,
                format!("no heartbeat file although the instant is only {} old (minimum {} + {} skew margin): LAZY writers write their heartbeat before the instant, so an EAGER writer (Hudi's default, no heartbeats) seems to write this table; it may still be running. Judge the table as eager, or set hoodie.cleaner.policy.failed.writes=LAZY on every writer", Ms(instant_age_ms), Ms(min_age), Ms(skew)),
            ),
            FailedWritesPolicy::Eager => (
                Verdict::TooYoung,
                format!("no heartbeat file yet, but the instant is only {} old (minimum {} + {} skew margin): it may still be running", Ms(instant_age_ms), Ms(min_age), Ms(skew)),
            ),
        },
        HeartbeatStatus::Missing => judge_without_heartbeat(
            &instant.requested_time,
            instant_age_ms.unwrap_or_default(),
            newest_write,
            input,
        ),
    }
}

/// The verdict on a write without heartbeat file that is at least the minimum age old (`age`
/// ms): failed only on the operator's statement (LAZY), a newer write (EAGER), or past the
/// maximum write duration; otherwise left alone.
fn judge_without_heartbeat(
    t: &str,
    age: i64,
    newest_write: Option<&str>,
    input: &DetectionInput<'_>,
) -> (Verdict, String) {
    let skew = duration_ms(input.heartbeat.clock_skew_margin);
    let min_age = duration_ms(input.heartbeat.min_instant_age);
    let overdue = input.max_write_duration.and_then(|d| {
        let limit = duration_ms(d).saturating_add(skew);
        (age >= limit).then_some(d.as_millis())
    });
    let overdue_verdict = |max: u128| {
        (
            Verdict::Overdue,
            format!("no heartbeat file and the instant is {} old, beyond the table's maximum write duration {} + {} skew margin: no write of this table runs that long, so its writer is gone", Ms(age), Ms(max), Ms(skew)),
        )
    };
    match input.policy {
        FailedWritesPolicy::Lazy => match (input.lazy_writers, overdue) {
            // The operator's statement, in the configuration every process reads.
            (Some(LazyWritersEvidence::Assumed), _) => (
                Verdict::NoHeartbeat,
                format!("no heartbeat file and the instant is {} old (minimum {} + {} skew margin), on a table whose operator stated every writer is LAZY: a LAZY writer writes its heartbeat before its instant, so this one died before its first heartbeat or lost it", Ms(age), Ms(min_age), Ms(skew)),
            ),
            (_, Some(max)) => overdue_verdict(max),
            // Heartbeat files of other writes show LAZY writers, and a LAZY writer
            // would have one: an EAGER writer's write, which may still be running.
            (Some(evidence), None) => (
                Verdict::EagerWriterSuspected,
                format!("no heartbeat file and the instant is {} old, on a table with LAZY writers ({}): a LAZY writer writes its heartbeat before its instant, so this is an EAGER writer's write (Hudi's default, no heartbeats) that may still be running, such as a long Spark job, or one whose heartbeat file was lost. Nothing every process can see proves it dead: left alone. Set a maximum write duration (max_write_duration), state that every writer is LAZY (assume_lazy_writers), or roll it back by name (rollback --instant {} --force) once you know its writer is gone", Ms(age), evidence.describe(), t),
            ),
            (None, None) => (
                Verdict::NoHeartbeatUnconfirmed,
                format!("no heartbeat file and the instant is {} old, but no heartbeat file was ever seen on this table: it may be a LAZY writer that died, or an EAGER writer (Hudi's default, no heartbeats) still running. Left alone: say every writer is LAZY (--assume-lazy-writers / assume_lazy_writers), set a maximum write duration, or roll it back by name (rollback --instant {}) once you know its writer is gone", Ms(age), t),
            ),
        },
        FailedWritesPolicy::Eager => match (newest_write.filter(|n| *n > t), overdue) {
            (Some(newer), _) => (
                Verdict::Superseded,
                format!("no heartbeat file, the instant is {} old (minimum {} + {} skew margin), and write {} started after it: under EAGER the single writer has moved on, so this write is dead", Ms(age), Ms(min_age), Ms(skew), newer),
            ),
            (None, Some(max)) => overdue_verdict(max),
            (None, None) => (
                Verdict::AwaitingNewerWrite,
                format!("no heartbeat file and the instant is {} old, but it is the newest write: under EAGER its writer may still be running. Left alone until a newer write starts (or past a maximum write duration, when one is set); roll it back by name (rollback --instant {}) once you know its writer is gone", Ms(age), t),
            ),
        },
    }
}

/// How many pending writes are left alone, by reason (verdict).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LeftAlone {
    /// [`Verdict::NoHeartbeatUnconfirmed`].
    pub no_heartbeat_unconfirmed: usize,
    /// [`Verdict::AwaitingNewerWrite`].
    pub awaiting_newer_write: usize,
    /// [`Verdict::AgeUnknown`].
    pub age_unknown: usize,
}

impl LeftAlone {
    /// Count the left-alone verdicts of `assessments`.
    pub fn count(assessments: &[Assessment]) -> Self {
        let mut out = Self::default();
        for a in assessments {
            match a.verdict {
                Verdict::NoHeartbeatUnconfirmed => out.no_heartbeat_unconfirmed += 1,
                Verdict::AwaitingNewerWrite => out.awaiting_newer_write += 1,
                Verdict::AgeUnknown => out.age_unknown += 1,
                _ => {}
            }
        }
        out
    }

    /// (reason, count) pairs, in a fixed order (metric label values).
    pub fn by_reason(&self) -> [(&'static str, usize); 3] {
        [
            ("no_heartbeat_unconfirmed", self.no_heartbeat_unconfirmed),
            ("awaiting_newer_write", self.awaiting_newer_write),
            ("age_unknown", self.age_unknown),
        ]
    }
}

/// What is known about a table's writers, and what follows for writes without heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WritersReport {
    /// The policy the table is judged under.
    pub policy: FailedWritesPolicy,
    /// Heartbeat files in `.hoodie/.heartbeat/` when it was last listed (it is listed only
    /// when there is a pending write to judge).
    pub heartbeat_files: Option<usize>,
    /// Whether the table is known to have LAZY writers.
    pub lazy_writers_known: bool,
    /// Why, when it is.
    pub evidence: Option<LazyWritersEvidence>,
    /// A young pending write without heartbeat file was found under LAZY: EAGER writers seem
    /// to write this table.
    pub eager_writer_suspected: bool,
    /// Pending writes left alone, by reason.
    pub left_alone: LeftAlone,
    /// What this means, in words.
    pub hint: String,
}

impl WritersReport {
    /// The report for `assessments` judged with `input`'s policy and evidence;
    /// `heartbeat_files` is what the listing of the heartbeat folder found, if it was listed.
    pub fn new(
        policy: FailedWritesPolicy,
        evidence: Option<LazyWritersEvidence>,
        max_write_duration: Option<Duration>,
        heartbeat_files: Option<usize>,
        assessments: &[Assessment],
    ) -> Self {
        let eager_writer_suspected = assessments
            .iter()
            .any(|a| a.verdict == Verdict::EagerWriterSuspected);
        let max = max_write_duration.map(|d| d.as_secs());
        let hint = match (policy, evidence, max) {
            _ if eager_writer_suspected => "a pending write has no heartbeat file on a table judged under the LAZY policy: LAZY writers write their heartbeat first, so EAGER writers (Hudi's default, no heartbeats) seem to write this table, and their writes may still be running. Such a write is left alone (nothing every process can see proves it dead) unless every writer is stated LAZY (assume_lazy_writers) or it is older than a maximum write duration. Judge the table as eager, or set hoodie.cleaner.policy.failed.writes=LAZY on every writer".to_string(),
            (FailedWritesPolicy::Lazy, Some(LazyWritersEvidence::Assumed), _) => "every writer is stated LAZY: a pending write without heartbeat file is failed once older than the minimum age".to_string(),
            (FailedWritesPolicy::Lazy, Some(e), None) => format!("LAZY writers ({}): a pending write is failed once its heartbeat expired; one without heartbeat file may be an EAGER writer's and is left alone; if every writer is LAZY, say so (--assume-lazy-writers, assume_lazy_writers)", e.describe()),
            (FailedWritesPolicy::Lazy, Some(e), Some(m)) => format!("LAZY writers ({}): a pending write is failed once its heartbeat expired; one without heartbeat file may be an EAGER writer's and is left alone until older than the maximum write duration ({m} s)", e.describe()),
            (FailedWritesPolicy::Lazy, None, None) => "no heartbeat file seen on this table: a pending write without heartbeat file may be an EAGER writer's and is left alone; if every writer is LAZY, say so (--assume-lazy-writers, assume_lazy_writers)".to_string(),
            (FailedWritesPolicy::Lazy, None, Some(m)) => format!("no heartbeat file seen on this table: a pending write without heartbeat file may be an EAGER writer's and is left alone until older than the maximum write duration ({m} s)"),
            (FailedWritesPolicy::Eager, _, None) => "EAGER writers: a pending write without heartbeat file is failed once a newer write started after it; the newest one is left alone".to_string(),
            (FailedWritesPolicy::Eager, _, Some(m)) => format!("EAGER writers: a pending write without heartbeat file is failed once a newer write started after it, or once older than the maximum write duration ({m} s)"),
        };
        Self {
            policy,
            heartbeat_files,
            lazy_writers_known: evidence.is_some(),
            evidence,
            eager_writer_suspected,
            left_alone: LeftAlone::count(assessments),
            hint,
        }
    }
}

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
