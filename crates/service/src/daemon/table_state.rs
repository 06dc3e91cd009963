//! A registered table's state: its entry and settings, the cached handle that serializes its
//! polls and changes, and its status as the API shows it.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use hudi_keeper_core::exec::rollback::RollbackOptions;
use hudi_keeper_core::protocol::detect::{
    Assessment, LazyWritersEvidence, LeftAlone, WritersReport,
};
use hudi_keeper_core::Table;
use serde::Serialize;

use super::activity::Activity;
use super::audit_view::AuditState;
use super::config::{TableEntry, TableSettings};
use super::readiness::ReadyState;
use super::{metrics, state_files};

/// Where a table's registration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The config file.
    Config,
    /// `POST /api/v1/tables` (persisted in the state folder).
    Api,
    /// The `[[discover]]` source of this index in the config (`discovery`).
    Discovered(u16),
}

impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Source::Config => "config",
            Source::Api => "api",
            Source::Discovered(_) => "discovered",
        })
    }
}

/// The last rollback of a table, as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackView {
    pub instant: String,
    pub rollback_instant: Option<String>,
    pub at_ms: i64,
    pub outcome: &'static str,
    pub trigger: &'static str,
    pub files_deleted: usize,
    pub duration_ms: u64,
    pub error: Option<String>,
}

/// What the daemon knows about a table.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableStatus {
    pub polls: u64,
    pub last_poll_started_ms: Option<i64>,
    pub last_poll_finished_ms: Option<i64>,
    pub last_poll_duration_ms: Option<u64>,
    pub last_poll_ok: Option<bool>,
    pub last_error: Option<String>,
    pub consecutive_failures: u32,
    pub halted: bool,
    pub halted_reason: Option<String>,
    /// Pending instants at the last poll, with heartbeat age and verdict.
    pub pending: Vec<Assessment>,
    pub last_rollback: Option<Box<RollbackView>>,
    /// The newest completed rollback or restore on the active timeline at the last poll,
    /// whoever made it (a writer, Hudi's CLI, another hudi-keeper, this daemon).
    pub last_timeline_change: Option<TimelineChange>,
    pub rollbacks: u64,
    /// What is known about the table's writers, and the pending writes left alone.
    pub writers: WritersStatus,
    /// Its files in `state_dir` that could not be read at start (skipped: the table is judged
    /// without them, which only ever leaves more alone).
    pub state_files_unreadable: Vec<state_files::UnreadableStateFile>,
}

/// A completed rollback or restore seen on a table's timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimelineChange {
    /// `rollback` or `restore`.
    pub action: ChangeAction,
    /// When its completed file was written (epoch ms, the store's clock).
    pub completed_ms: i64,
}

/// What a [`TimelineChange`] was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeAction {
    Rollback,
    Restore,
}

impl ChangeAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rollback => "rollback",
            Self::Restore => "restore",
        }
    }
}

/// What the daemon knows about a table's writers (the writer policy, `docs/operations.md`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WritersStatus {
    /// Whether the table is known to have LAZY writers (a pending write without heartbeat file
    /// is failed once older than `min_instant_age` only when `evidence` is `assumed`).
    pub lazy_writers_known: bool,
    /// Why: `heartbeat_files_now`, `seen_before` (remembered in `state_dir`), `assumed`
    /// (`assume_lazy_writers`).
    pub evidence: Option<LazyWritersEvidence>,
    /// When the daemon first saw a heartbeat file on the table (epoch ms).
    pub heartbeats_first_seen_ms: Option<i64>,
    /// Heartbeat files at the last poll that listed them (only polls with pending writes do).
    pub heartbeat_files: Option<usize>,
    /// The last poll found a pending write without heartbeat file on a table judged LAZY that
    /// looks like an EAGER writer's (young, or on a table with heartbeat files).
    pub eager_writer_suspected: bool,
    /// Pending writes left alone at the last poll, by reason.
    pub left_alone: LeftAlone,
}

impl WritersStatus {
    pub(super) fn new(report: &WritersReport, heartbeats_first_seen_ms: Option<i64>) -> Self {
        Self {
            lazy_writers_known: report.lazy_writers_known,
            evidence: report.evidence,
            heartbeats_first_seen_ms,
            heartbeat_files: report.heartbeat_files,
            eager_writer_suspected: report.eager_writer_suspected,
            left_alone: report.left_alone,
        }
    }
}

/// Who a registered table is: its name and URI (what it is polled with is its resolved
/// `settings`), and the registration of a table registered through the API as it was sent,
/// which the registry keeps. A configured table's overrides stay in the config file, and a
/// discovered table's in its `[[discover]]` source: the table does not hold them (about 600
/// bytes a table).
#[derive(Debug)]
pub struct Identity {
    /// Shared with the keys of the daemon's map of tables and of its metrics (one copy).
    pub name: Arc<str>,
    pub uri: String,
    /// `Source::Api` only.
    pub(super) registration: Option<Box<TableEntry>>,
}

impl Identity {
    pub(super) fn of(entry: TableEntry, source: Source) -> Self {
        match source {
            Source::Api => Self {
                name: Arc::from(entry.name.as_str()),
                uri: entry.uri.clone(),
                registration: Some(Box::new(entry)),
            },
            Source::Config | Source::Discovered(_) => Self {
                name: Arc::from(entry.name),
                uri: entry.uri,
                registration: None,
            },
        }
    }
}

/// An epoch-ms time that may be unset, in 8 bytes (a `Mutex<Option<i64>>` takes 24 a table).
#[derive(Debug)]
pub(super) struct OptionalMs(std::sync::atomic::AtomicI64);

impl OptionalMs {
    /// Unset (no epoch-ms time a table has is this far back).
    const UNSET: i64 = i64::MIN;

    pub(super) fn new(ms: Option<i64>) -> Self {
        Self(std::sync::atomic::AtomicI64::new(ms.unwrap_or(Self::UNSET)))
    }

    pub(super) fn get(&self) -> Option<i64> {
        let ms = self.0.load(std::sync::atomic::Ordering::Acquire);
        (ms != Self::UNSET).then_some(ms)
    }

    pub(super) fn set(&self, ms: i64) {
        self.0.store(ms, std::sync::atomic::Ordering::Release);
    }
}

/// The `GET …/timeline` reads of one table running at once, at most
/// [`TIMELINE_READS_PER_TABLE`] (a counter: a semaphore costs 40 bytes a table).
#[derive(Debug, Default)]
pub(super) struct ReadSlots(std::sync::atomic::AtomicU8);

/// A slot of [`ReadSlots`], given back when dropped.
pub(super) struct ReadSlot<'a>(&'a ReadSlots);

impl ReadSlots {
    /// A slot, or `None` when all are taken.
    pub(super) fn try_take(&self) -> Option<ReadSlot<'_>> {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        self.0
            .fetch_update(AcqRel, Acquire, |n| {
                (usize::from(n) < TIMELINE_READS_PER_TABLE).then_some(n + 1)
            })
            .ok()
            .map(|_| ReadSlot(self))
    }
}

impl Drop for ReadSlot<'_> {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// One registered table.
#[derive(Debug)]
pub struct TableState {
    pub entry: Identity,
    pub source: Source,
    pub settings: Arc<TableSettings>,
    pub status: StdMutex<TableStatus>,
    /// This table's metrics.
    pub metrics: Arc<metrics::TableMetrics>,
    /// The opened table, cached between polls. Holding it also serializes a table's polls
    /// and changes: a poll never waits for it (it is skipped as busy), a change through the
    /// API waits for it at most `server.mutation_timeout`.
    pub(super) table: tokio::sync::Mutex<Option<Arc<Table>>>,
    /// The same opened table outside `table`'s mutex, for `GET …/timeline`, which never waits
    /// for the mutex. Kept equal to what `table` holds (see [`TableState::keep`]).
    pub(super) handle: StdMutex<Option<Arc<Table>>>,
    /// Bounds the `GET …/timeline` reads of this table running at once.
    pub(super) timeline_reads: ReadSlots,
    /// Bumped whenever the table is (re)scheduled; a due entry of an older generation is stale.
    pub(super) generation: std::sync::atomic::AtomicU64,
    /// When a heartbeat file was first seen on the table (epoch ms), as kept in `state_dir`.
    pub(super) heartbeats_seen_ms: OptionalMs,
    /// Its audits (`audits`).
    pub(super) audit: StdMutex<AuditState>,
    /// Bumped whenever its audit is (re)scheduled; a due entry of an older generation is stale.
    pub(super) audit_generation: std::sync::atomic::AtomicU64,
    /// When the leftover guard's periodic check of the table is due next (`None`: not yet
    /// scheduled: the first poll schedules it, `leftovers`).
    pub(super) guard_due: super::leftovers::GuardDue,
    /// What its last polls saw, for its poll rate (`activity`): only ever when it is polled.
    pub(super) activity: Activity,
}

impl TableState {
    /// A snapshot of the status.
    pub fn status(&self) -> TableStatus {
        self.status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Cache `table` (or forget the cached one): one copy, held in `cached` (the guard of
    /// `self.table`) and in the handle the timeline API reads.
    pub(super) fn keep(&self, cached: &mut Option<Arc<Table>>, table: Option<Table>) {
        let table = table.map(Arc::new);
        *self.handle.lock().unwrap_or_else(|e| e.into_inner()) = table.clone();
        *cached = table;
    }

    /// The opened table, without waiting for the mutex.
    pub(super) fn handle(&self) -> Option<Arc<Table>> {
        self.handle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The table's state for `/readyz`, without copying its status.
    pub(super) fn ready_state(&self) -> ReadyState {
        let s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        match (s.polls, s.last_poll_ok, s.halted) {
            (0, _, _) => ReadyState::NotPolledYet,
            (_, _, true) => ReadyState::Halted,
            (_, Some(true), _) => ReadyState::Ok,
            _ => ReadyState::LastPollFailed,
        }
    }

    /// Read or change what is known of its audits.
    pub fn audit_update<T>(&self, f: impl FnOnce(&mut AuditState) -> T) -> T {
        let mut guard = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut TableStatus)) {
        let mut guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard);
    }

    /// What is known about the writers besides the heartbeat files a poll sees: the
    /// operator's `assume_lazy_writers` (configuration, the same for every replica: the only
    /// evidence that can make a write without heartbeat file failed), else heartbeat files seen
    /// before (kept across restarts; it only names the verdict of a write left alone).
    pub(super) fn known_lazy_writers(&self) -> Option<LazyWritersEvidence> {
        let seen = self.heartbeats_seen_ms.get().is_some();
        LazyWritersEvidence::known(self.settings.assume_lazy_writers, seen)
    }

    /// The writers status of a poll that found no pending instant (nothing was listed).
    pub(super) fn idle_writers(&self) -> WritersStatus {
        let evidence = self.known_lazy_writers();
        WritersStatus {
            lazy_writers_known: evidence.is_some(),
            evidence,
            heartbeats_first_seen_ms: self.heartbeats_first_seen_ms(),
            ..Default::default()
        }
    }

    pub(super) fn heartbeats_first_seen_ms(&self) -> Option<i64> {
        self.heartbeats_seen_ms.get()
    }

    /// How this table's pending instants are judged (no lock: for looking only).
    pub(super) fn detection_options(&self) -> RollbackOptions {
        RollbackOptions {
            policy: self.settings.failed_writes_policy.detection(),
            heartbeat: self.settings.heartbeat,
            lazy_writers: self.known_lazy_writers(),
            max_write_duration: self
                .settings
                .max_write_duration_ms
                .map(Duration::from_millis),
            clustering_expiration: self
                .settings
                .clustering_expiration_ms
                .map(Duration::from_millis),
            ..Default::default()
        }
    }

    pub(super) fn rollback_options(&self) -> Option<RollbackOptions> {
        Some(RollbackOptions {
            force: false,
            delete_concurrency: self.settings.delete_concurrency,
            listing_cross_check: self.settings.listing_cross_check,
            lock: self.settings.lock.clone()?,
            ..self.detection_options()
        })
    }
}

/// `GET …/timeline` reads of one table at once; more are answered 503 with `Retry-After`.
pub(super) const TIMELINE_READS_PER_TABLE: usize = 2;

pub(super) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_gives_at_most_its_timeline_read_slots_and_takes_them_back() {
        let slots = ReadSlots::default();
        let taken: Vec<_> = (0..TIMELINE_READS_PER_TABLE)
            .map(|_| slots.try_take().expect("a free slot"))
            .collect();
        assert!(slots.try_take().is_none(), "more reads than slots");
        drop(taken);
        let again: Vec<_> = (0..TIMELINE_READS_PER_TABLE)
            .filter_map(|_| slots.try_take())
            .collect();
        assert_eq!(again.len(), TIMELINE_READS_PER_TABLE);
    }

    #[test]
    fn an_optional_time_is_unset_until_set() {
        let ms = OptionalMs::new(None);
        assert_eq!(ms.get(), None);
        ms.set(0);
        assert_eq!(ms.get(), Some(0));
        assert_eq!(OptionalMs::new(Some(-5)).get(), Some(-5));
        let seen = OptionalMs::new(Some(1_733_390_000_000));
        assert_eq!(seen.get(), Some(1_733_390_000_000));
    }
}
