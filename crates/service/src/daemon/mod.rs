//! `hudi-keeper serve`: polls every registered table on its interval, rolls back writes whose
//! heartbeat expired, and serves health, metrics and an API.
//!
//! One task per table polls it (with jitter, exponential backoff on errors, and a halted state
//! after repeated failures); a global semaphore bounds polls running at once, so a slow table
//! never holds up another's schedule beyond that bound. A table's opened handle (its
//! `hoodie.properties`) is cached, so an idle table costs one listing of its timeline per poll.

pub mod cluster;
pub mod config;
mod deadline;
mod enclosing;
pub mod evidence;
pub mod http;
pub mod membership;
pub mod metrics;
pub mod own_changes;
mod registry;
mod state_files;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hudi_keeper_core::exec::restore::{preview_restore, restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{
    assess_table, preview, rollback, RollbackDone, RollbackOptions, RollbackPreview, Selection,
};
use hudi_keeper_core::exec::savepoint::{create_savepoint, preview_savepoint, SavepointRequest};
use hudi_keeper_core::protocol::detect::{
    Assessment, LazyWritersEvidence, LeftAlone, WritersReport,
};
use hudi_keeper_core::storage::Storage;
use hudi_keeper_core::timeline::Timeline;
use hudi_keeper_core::Table;
use serde::Serialize;
use tokio::sync::{RwLock, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, info_span, warn, Instrument};

use config::{Config, PolicySetting, TableEntry, TableSettings};
use metrics::Metrics;

/// `hudi-keeper serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The config file (TOML). Without this flag, `config/hudi-keeper.toml` is read when it
    /// exists; environment variables `HUDI_KEEPER_SERVER__…` / `HUDI_KEEPER_DEFAULTS__…` override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen here instead of `server.listen`.
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
}

/// Where a table's registration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The config file.
    Config,
    /// `POST /api/v1/tables` (persisted in the state folder).
    Api,
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
    pub rollbacks: u64,
    /// What is known about the table's writers, and the pending writes left alone.
    pub writers: WritersStatus,
    /// Its files in `state_dir` that could not be read at start (skipped: the table is judged
    /// without them, which only ever leaves more alone).
    pub state_files_unreadable: Vec<state_files::UnreadableStateFile>,
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
    fn new(report: &WritersReport, heartbeats_first_seen_ms: Option<i64>) -> Self {
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

/// One registered table.
#[derive(Debug)]
pub struct TableState {
    pub entry: TableEntry,
    pub source: Source,
    /// Where the table is, to find a second registration of it through the API.
    location: Option<Box<config::Location>>,
    pub settings: Arc<TableSettings>,
    pub status: StdMutex<TableStatus>,
    /// This table's metrics.
    pub metrics: Arc<metrics::TableMetrics>,
    /// The opened table, cached between polls. Holding it also serializes a table's polls
    /// and changes: a poll never waits for it (it is skipped as busy), a change through the
    /// API waits for it at most `server.mutation_timeout`.
    table: tokio::sync::Mutex<Option<Arc<Table>>>,
    /// The same opened table outside `table`'s mutex, for `GET …/timeline`, which never waits
    /// for the mutex. Kept equal to what `table` holds (see [`TableState::keep`]).
    handle: StdMutex<Option<Arc<Table>>>,
    /// Bounds the `GET …/timeline` reads of this table running at once.
    timeline_reads: Semaphore,
    /// Bumped whenever the table is (re)scheduled; a due entry of an older generation is stale.
    generation: std::sync::atomic::AtomicU64,
    /// When a heartbeat file was first seen on the table (epoch ms), as kept in `state_dir`.
    heartbeats_seen_ms: StdMutex<Option<i64>>,
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
    fn keep(&self, cached: &mut Option<Arc<Table>>, table: Option<Table>) {
        let table = table.map(Arc::new);
        *self.handle.lock().unwrap_or_else(|e| e.into_inner()) = table.clone();
        *cached = table;
    }

    /// The opened table, without waiting for the mutex.
    fn handle(&self) -> Option<Arc<Table>> {
        self.handle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The table's state for `/readyz`, without copying its status.
    fn ready_state(&self) -> ReadyState {
        let s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        match (s.polls, s.last_poll_ok, s.halted) {
            (0, _, _) => ReadyState::NotPolledYet,
            (_, _, true) => ReadyState::Halted,
            (_, Some(true), _) => ReadyState::Ok,
            _ => ReadyState::LastPollFailed,
        }
    }

    fn update(&self, f: impl FnOnce(&mut TableStatus)) {
        let mut guard = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard);
    }

    /// What is known about the writers besides the heartbeat files a poll sees: the
    /// operator's `assume_lazy_writers` (configuration, the same for every replica: the only
    /// evidence that can make a write without heartbeat file failed), else heartbeat files seen
    /// before (kept across restarts; it only names the verdict of a write left alone).
    fn known_lazy_writers(&self) -> Option<LazyWritersEvidence> {
        let seen = self
            .heartbeats_seen_ms
            .lock()
            .map(|s| s.is_some())
            .unwrap_or_else(|e| e.into_inner().is_some());
        LazyWritersEvidence::known(self.settings.assume_lazy_writers, seen)
    }

    /// The writers status of a poll that found no pending instant (nothing was listed).
    fn idle_writers(&self) -> WritersStatus {
        let evidence = self.known_lazy_writers();
        WritersStatus {
            lazy_writers_known: evidence.is_some(),
            evidence,
            heartbeats_first_seen_ms: self.heartbeats_first_seen_ms(),
            ..Default::default()
        }
    }

    fn heartbeats_first_seen_ms(&self) -> Option<i64> {
        *self
            .heartbeats_seen_ms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// How this table's pending instants are judged (no lock: for looking only).
    fn detection_options(&self) -> RollbackOptions {
        RollbackOptions {
            policy: self.settings.failed_writes_policy.detection(),
            heartbeat: self.settings.heartbeat,
            lazy_writers: self.known_lazy_writers(),
            max_write_duration: self
                .settings
                .max_write_duration_ms
                .map(Duration::from_millis),
            ..Default::default()
        }
    }

    fn rollback_options(&self) -> Option<RollbackOptions> {
        Some(RollbackOptions {
            force: false,
            delete_concurrency: self.settings.delete_concurrency,
            listing_cross_check: self.settings.listing_cross_check,
            lock: self.settings.lock.clone()?,
            ..self.detection_options()
        })
    }
}

/// Why an API call on a table could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("no table named `{0}`")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// Beyond what the operator allowed the API.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Failed(String),
    /// The table is busy (a change holds it, or too many reads run): retry later.
    #[error("{0}")]
    Busy(String),
    /// Another replica owns the table (`[cluster]`): changes go to it.
    #[error("`{table}` is owned by {owner}, another replica: send changes to it")]
    NotOwner { table: String, owner: String },
}

/// `GET …/timeline` reads of one table at once; more are answered 503 with `Retry-After`.
const TIMELINE_READS_PER_TABLE: usize = 2;

/// A table due at a time, with the generation it was scheduled under.
type Due = (tokio::time::Instant, u64, Arc<TableState>);

/// An entry of the scheduler's timer heap, ordered by due time.
struct HeapEntry {
    due: tokio::time::Instant,
    generation: u64,
    state: Arc<TableState>,
}

impl PartialEq for HeapEntry {
    fn eq(&self, other: &Self) -> bool {
        self.due == other.due
    }
}
impl Eq for HeapEntry {}
impl PartialOrd for HeapEntry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapEntry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.due.cmp(&other.due)
    }
}

/// The running daemon.
#[derive(Debug)]
pub struct Daemon {
    pub config: Config,
    /// The replicas sharing the tables, and which one this is (a view `membership` replaces).
    cluster: cluster::ClusterView,
    /// `[cluster] mode = "zookeeper"`: how this replica registers and sees the others.
    membership: Option<membership::ZkMembership>,
    pub metrics: Metrics,
    tables: RwLock<BTreeMap<String, Arc<TableState>>>,
    polls: Arc<Semaphore>,
    /// `/metrics` scrapes served at once (`server.max_concurrent_scrapes`, both listeners).
    pub scrapes: Arc<Semaphore>,
    shutdown: CancellationToken,
    /// Cancelled once the shutdown grace is over: work still running is dropped.
    abandon: CancellationToken,
    tracker: TaskTracker,
    /// The configured tables, until `start` registers them.
    initial: StdMutex<Vec<TableEntry>>,
    /// Tables to put on the scheduler's timer heap.
    timer: tokio::sync::mpsc::UnboundedSender<Due>,
    /// The tables registered through the API, on disk (`state_dir/api-tables/`).
    api_tables: Arc<registry::Registry>,
    /// Object-store clients shared between tables of one bucket.
    stores: hudi_keeper_core::storage::StoreCache,
    /// Distinct table settings (most tables share the defaults).
    interned: StdMutex<Vec<Arc<TableSettings>>>,
    /// Serializes writes of the registry's files.
    registry_write: tokio::sync::Mutex<()>,
    /// What became of the registry at start.
    registry: StdMutex<RegistryState>,
    /// Which tables were seen with heartbeat files (`state_dir/writer-evidence/`).
    evidence: evidence::EvidenceStore,
    /// The rollbacks and restores this daemon started (`state_dir/own-changes/`).
    own_changes: Arc<own_changes::OwnChangesStore>,
}

/// What became of the registry (`state_dir/api-tables/`, see [`registry`]) at start.
#[derive(Debug, Default)]
struct RegistryState {
    /// Some of it could not be read (or `tables.json` moved): why, naming files relative to
    /// `state_dir`. Then the API neither registers nor unregisters tables.
    unreadable: Option<String>,
    /// Entries not restored, and why; their files are kept until they are deleted.
    not_restored: Vec<(TableEntry, String)>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Daemon {
    /// Build the daemon from a loaded config; tables registered through the API earlier are
    /// read back from the state folder.
    pub fn new(mut config: Config) -> anyhow::Result<Arc<Self>> {
        // The configured tables move into the registry at start; the config keeps the rest.
        let initial = std::mem::take(&mut config.tables);
        let api_tables = Arc::new(registry::Registry::new(&config.server.state_dir));
        let evidence =
            evidence::EvidenceStore::load(&config.server.state_dir.join("writer-evidence"))?;
        let own_changes = Arc::new(own_changes::OwnChangesStore::load(
            &config.server.state_dir.join("own-changes"),
        )?);
        // A StatefulSet pod's name ends in its index: `POD_NAME` (set from the downward API),
        // else the host name Kubernetes gives the pod.
        let pod_name = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok());
        let cluster = cluster::Cluster::from_config(&config.cluster, pod_name.as_deref())
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        let membership = match cluster.mode() {
            cluster::ClusterMode::Zookeeper => Some(
                membership::ZkMembership::from_config(&config)
                    .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?,
            ),
            _ => None,
        };
        if cluster.is_shared() {
            info!(
                mode = cluster.mode().as_str(),
                replicas = cluster.replicas(),
                name = %cluster.my_name(),
                "sharing the tables with other replicas"
            );
        }
        let metrics = Metrics::new();
        metrics.cluster_replicas.set(cluster.replicas() as i64);
        metrics
            .state_files_unreadable
            .set((evidence.unreadable_count() + own_changes.unreadable_count()) as i64);
        let cluster = cluster::ClusterView::new(cluster);
        let (timer, incoming) = tokio::sync::mpsc::unbounded_channel();
        let daemon = Arc::new(Self {
            cluster,
            membership,
            timer,
            polls: Arc::new(Semaphore::new(config.server.max_concurrent_polls)),
            scrapes: Arc::new(Semaphore::new(config.server.max_concurrent_scrapes)),
            metrics,
            tables: RwLock::new(BTreeMap::new()),
            shutdown: CancellationToken::new(),
            abandon: CancellationToken::new(),
            tracker: TaskTracker::new(),
            initial: StdMutex::new(initial),
            api_tables,
            registry_write: tokio::sync::Mutex::new(()),
            registry: StdMutex::new(RegistryState::default()),
            evidence,
            own_changes,
            stores: hudi_keeper_core::storage::StoreCache::new(),
            interned: StdMutex::new(Vec::new()),
            config,
        });
        daemon.tracker.spawn(daemon.clone().run_scheduler(incoming));
        Ok(daemon)
    }

    /// Register the configured tables and the persisted API tables, and start polling.
    pub async fn start(self: &Arc<Self>) -> anyhow::Result<()> {
        let initial = std::mem::take(&mut *self.initial.lock().unwrap_or_else(|e| e.into_inner()));
        for entry in initial {
            if entry.demo {
                ensure_demo_table(&entry.uri)?;
            }
            self.add(entry, Source::Config, None)
                .await
                .map_err(|e| anyhow::anyhow!(e))?;
        }
        self.restore_registry().await;
        if let Some(m) = self.membership.clone() {
            let base = (*self.cluster()).clone();
            self.tracker.spawn(m.run(self.clone(), base));
        }
        Ok(())
    }

    /// The current view of the replicas sharing the tables.
    pub fn cluster(&self) -> Arc<cluster::Cluster> {
        self.cluster.current()
    }

    /// Make `next` the view of the replicas (`membership`): the tables whose owner changed are
    /// counted, their per-table series follow their owner, and the ones this replica now owns
    /// are polled within a second (spread) rather than at their next interval.
    pub async fn apply_cluster(&self, next: cluster::Cluster) {
        let before = self.cluster.replace(next.clone());
        if *before == next {
            return;
        }
        // Under the read lock: a table added meanwhile reads the new view under the write lock.
        let tables = self.tables.read().await;
        let moved = before.moved(&next, tables.keys().map(String::as_str));
        let mut taken = 0usize;
        for (name, state) in tables.iter() {
            let owns = next.owns(name);
            state
                .metrics
                .not_owned
                .store(!owns, std::sync::atomic::Ordering::Relaxed);
            if owns && !before.owns(name) {
                taken += 1;
                let interval = Duration::from_millis(state.settings.poll_interval_ms);
                self.schedule(state, jitter(interval.min(Duration::from_secs(1)), 1.0));
            }
        }
        let owned = tables.keys().filter(|n| next.owns(n)).count();
        drop(tables);
        self.metrics.cluster_replicas.set(next.replicas() as i64);
        self.metrics.cluster_membership_changes.inc();
        self.metrics.cluster_ownership_changes.inc_by(moved as u64);
        info!(
            members = ?next.members(),
            member = next.me().is_some(),
            owned,
            moved,
            taken,
            "cluster: the replicas changed"
        );
    }

    /// Register the tables kept in the registry, each checked as a registration through the
    /// API is now. A file that cannot be read, or an entry that is refused, is reported (error
    /// log, `hudi_keeper_registry_errors_total`, `/readyz`) while every other table runs.
    async fn restore_registry(self: &Arc<Self>) {
        let dir = self
            .config
            .server
            .state_dir
            .join(registry::DIR)
            .display()
            .to_string();
        // An entry is about the size of the registration's body.
        let max_bytes = (self.config.server.max_body_bytes as u64)
            .saturating_mul(4)
            .max(1 << 20);
        let restored = self.api_tables.load(max_bytes);
        if let Some(error) = restored.problem {
            error!(dir = %dir, error = %error, "the registry of tables registered through the API cannot be read whole: the tables it could not read are not watched (the configured ones are), and registrations through the API are refused until it is fixed and the daemon restarted");
            self.metrics
                .registry_errors
                .with_label_values(&["unreadable"])
                .inc();
            self.registry_state().unreadable = Some(error);
        }
        for entry in restored.entries {
            let refused = match self.config.check_api_entry(&entry) {
                Err(config::ApiRefusal::Forbidden(e) | config::ApiRefusal::Invalid(e)) => Some(e),
                Ok(()) => self
                    .add(entry.clone(), Source::Api, None)
                    .await
                    .err()
                    .map(|e| e.to_string()),
            };
            if let Some(error) = refused {
                // The name as read, escaped: it was not checked yet.
                error!(table = %entry.name.escape_debug(), dir = %dir, error = %error, "a table registered through the API is not restored (its file is kept: fix the config and restart, or DELETE /api/v1/tables/{{name}})");
                self.metrics
                    .registry_errors
                    .with_label_values(&["not_restored"])
                    .inc();
                self.registry_state().not_restored.push((entry, error));
            }
        }
    }

    fn registry_state(&self) -> std::sync::MutexGuard<'_, RegistryState> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The registry's state for `/readyz`: whether it was read and every entry restored.
    pub fn registry_report(&self) -> (bool, serde_json::Value) {
        let r = self.registry_state();
        let ok = r.unreadable.is_none() && r.not_restored.is_empty();
        let report = serde_json::json!({
            "ok": ok,
            // Below state_dir: /readyz answers without the token, and says nothing of the host.
            "file": registry::Registry::shown_name(),
            "error": r.unreadable,
            "not_restored": r.not_restored.iter().map(|(e, why)| serde_json::json!({"name": e.name, "uri": e.uri, "error": why})).collect::<Vec<_>>(),
        });
        (ok, report)
    }

    /// Refused while the registry could not be read whole at start: a write would be made on a
    /// registry only partly known.
    fn registry_writable(&self) -> Result<(), TableError> {
        match &self.registry_state().unreadable {
            Some(e) => Err(TableError::Conflict(format!(
                "the registry of tables registered through the API (state_dir/{}/) could not be read whole at start ({e}); fix it or move the file away and restart before registering or unregistering tables through the API",
                registry::DIR
            ))),
            None => Ok(()),
        }
    }

    /// The tables, by name.
    pub async fn tables(&self) -> Vec<Arc<TableState>> {
        self.tables.read().await.values().cloned().collect()
    }

    /// A page of the tables in name order: how many are registered, at most `limit` whose names
    /// sort after `after`, and whether more follow.
    pub async fn tables_page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> (usize, Vec<Arc<TableState>>, bool) {
        use std::ops::Bound;
        let tables = self.tables.read().await;
        let from = match after {
            Some(a) => Bound::Excluded(a),
            None => Bound::Unbounded,
        };
        let mut range = tables.range::<str, _>((from, Bound::Unbounded));
        let page: Vec<_> = range.by_ref().take(limit).map(|(_, t)| t.clone()).collect();
        let more = range.next().is_some();
        (tables.len(), page, more)
    }

    /// One table.
    pub async fn table(&self, name: &str) -> Result<Arc<TableState>, TableError> {
        self.tables
            .read()
            .await
            .get(name)
            .cloned()
            .ok_or_else(|| TableError::NotFound(name.to_string()))
    }

    /// Register `entry`. A registration through the API (`limit`: `server.max_api_tables`) is
    /// refused when that many tables are registered through the API already, counted under
    /// the same lock as the insert, so that requests at once cannot pass it together.
    async fn add(
        self: &Arc<Self>,
        entry: TableEntry,
        source: Source,
        limit: Option<usize>,
    ) -> Result<Arc<TableState>, TableError> {
        // Only needed to find a second registration through the API (off without prefixes).
        let location = (!self.config.server.allowed_table_uris.is_empty())
            .then(|| config::Location::of_table(&entry.uri))
            .flatten()
            .map(Box::new);
        let settings = self
            .config
            .defaults
            .resolve(&entry)
            .map_err(TableError::Invalid)?;
        let settings = {
            let mut interned = self.interned.lock().unwrap_or_else(|e| e.into_inner());
            match interned.iter().find(|s| ***s == settings) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(settings);
                    interned.push(s.clone());
                    s
                }
            }
        };
        let mut tables = self.tables.write().await;
        if let Some(refused) = registered_already(&tables, &entry, source, location.as_deref()) {
            return Err(refused);
        }
        if let Some(limit) = limit {
            self.check_api_limit(&tables, limit)?;
        }
        let state = Arc::new(TableState {
            entry: entry.clone(),
            source,
            location,
            settings,
            status: StdMutex::new(TableStatus {
                state_files_unreadable: [
                    self.evidence.unreadable(&entry.name),
                    self.own_changes.unreadable(&entry.name),
                ]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
                ..TableStatus::default()
            }),
            metrics: self.metrics.table(&entry.name),
            table: tokio::sync::Mutex::new(None),
            handle: StdMutex::new(None),
            timeline_reads: Semaphore::new(TIMELINE_READS_PER_TABLE),
            generation: std::sync::atomic::AtomicU64::new(0),
            heartbeats_seen_ms: StdMutex::new(
                self.evidence
                    .get(&entry.name, &entry.uri)
                    .map(|e| e.heartbeats_first_seen_ms),
            ),
        });
        let cluster = self.cluster();
        state.metrics.not_owned.store(
            !cluster.owns(&entry.name),
            std::sync::atomic::Ordering::Relaxed,
        );
        tables.insert(entry.name.clone(), state.clone());
        self.metrics.tables.set(tables.len() as i64);
        drop(tables);
        info!(table = %entry.name, uri = %entry.uri, owner = %cluster.owner(&entry.name).map(|o| o.name).unwrap_or_else(|| "none yet".into()), policy = state.settings.failed_writes_policy.as_str(), lock = %state.settings.lock_provider, "registered table");
        // The first poll comes soon, spread over up to a second (or the interval).
        let interval = Duration::from_millis(state.settings.poll_interval_ms);
        self.schedule(&state, jitter(interval.min(Duration::from_secs(1)), 1.0));
        Ok(state)
    }

    /// Refused when `limit` tables are registered through the API (with the entries kept but not
    /// restored, which hold a file each too).
    fn check_api_limit(
        &self,
        tables: &BTreeMap<String, Arc<TableState>>,
        limit: usize,
    ) -> Result<(), TableError> {
        let kept = self.registry_state().not_restored.len();
        let api = tables.values().filter(|t| t.source == Source::Api).count();
        if api + kept >= limit {
            return Err(TableError::Conflict(format!(
                "{} tables are registered through the API (server.max_api_tables = {limit}): DELETE one first, or raise server.max_api_tables",
                api + kept
            )));
        }
        Ok(())
    }

    /// Register a table through the API and persist it: only what
    /// [`Config::check_api_entry`] allows, never a table registered already (by the config or
    /// the API, under any name) nor a folder inside a table's base path (registered or not),
    /// at most `server.max_api_tables` of them, and only while the registry can be written. A
    /// registration that could not be persisted is undone.
    pub async fn register(self: &Arc<Self>, entry: TableEntry) -> Result<(), TableError> {
        self.config.check_api_entry(&entry).map_err(|r| match r {
            config::ApiRefusal::Forbidden(e) => TableError::Forbidden(e),
            config::ApiRefusal::Invalid(e) => TableError::Invalid(e),
        })?;
        if self.cluster().is_shared() {
            return Err(TableError::Conflict(
                "replicas sharing tables (cluster.mode = \"static\" or \"zookeeper\") take their tables from the configuration they all share, not through the API of one of them".into(),
            ));
        }
        self.registry_writable()?;
        if self
            .registry_state()
            .not_restored
            .iter()
            .any(|(e, _)| e.name == entry.name)
        {
            return Err(TableError::Conflict(format!(
                "a table named `{}` is in the registry but was not restored; DELETE it first",
                entry.name
            )));
        }
        let limit = self.config.server.max_api_tables;
        {
            // What can be told without reading storage first: nothing is read for a
            // registration refused anyway.
            let location = (!self.config.server.allowed_table_uris.is_empty())
                .then(|| config::Location::of_table(&entry.uri))
                .flatten();
            let tables = self.tables.read().await;
            if let Some(refused) =
                registered_already(&tables, &entry, Source::Api, location.as_ref())
            {
                return Err(refused);
            }
            self.check_api_limit(&tables, limit)?;
        }
        self.check_not_inside_a_table(&entry).await?;
        let name = entry.name.clone();
        let state = self.add(entry, Source::Api, Some(limit)).await?;
        if let Err(e) = self.save(&state).await {
            let mut tables = self.tables.write().await;
            if tables.get(&name).is_some_and(|t| Arc::ptr_eq(t, &state)) {
                tables.remove(&name);
                self.metrics.tables.set(tables.len() as i64);
                drop(tables);
                self.metrics.remove_table(&name);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Refused when the folder `entry` names lies inside a table's base path, registered or
    /// not (see [`enclosing`]), or when that cannot be told.
    async fn check_not_inside_a_table(&self, entry: &TableEntry) -> Result<(), TableError> {
        let Some(folders) = self.config.enclosing_folders(&entry.uri) else {
            return Ok(()); // not one the API registers: check_api_entry said why
        };
        let settings = self
            .config
            .defaults
            .resolve(entry)
            .map_err(TableError::Invalid)?;
        // A client of the stores the tables share only for the defaults' options: one per
        // bucket. Options of the registration's own (a timeout, a region: any number of
        // variants) get a client for this look alone, which does not outlive it.
        let shared = entry.storage_options.is_empty().then_some(&self.stores);
        match enclosing::find(folders, &settings.storage_options, shared).await {
            Ok(()) => Ok(()),
            Err(enclosing::Enclosed::Inside(base)) => Err(TableError::Conflict(format!(
                "`{}` lies inside the table at `{base}` (it has .hoodie/hoodie.properties): register the table's base path, not a folder of it",
                entry.uri
            ))),
            Err(enclosing::Enclosed::Unknown(e)) => {
                warn!(table = %entry.name, error = %e, "could not tell whether a registration lies inside a table: refused");
                Err(TableError::Failed(format!(
                    "cannot tell whether `{}` lies inside another table's base path, so it is not registered (send it again once the store answers): {e}",
                    entry.uri
                )))
            }
        }
    }

    /// Unregister a table (its poll loop stops) and persist the change.
    pub async fn unregister(&self, name: &str) -> Result<(), TableError> {
        self.registry_writable()?;
        let dormant = {
            let mut r = self.registry_state();
            let before = r.not_restored.len();
            r.not_restored.retain(|(e, _)| e.name != name);
            before != r.not_restored.len()
        };
        if dormant {
            info!(table = %name.escape_debug(), "removed a table that was not restored from the registry");
            return self.forget(name).await;
        }
        let state = self.table(name).await?;
        if state.source == Source::Config {
            return Err(TableError::Conflict(format!(
                "`{name}` comes from the config file; remove it there"
            )));
        }
        // Wait for a poll or change of the table to end, and keep new ones out, before it goes:
        // until it is gone, its name and location cannot be registered again, so no second
        // state of the table (with a mutex of its own) can run a change next to this one's, or
        // resume a rollback of this one's as its own.
        let held = state.table.lock().await;
        {
            let mut tables = self.tables.write().await;
            if !tables.get(name).is_some_and(|s| Arc::ptr_eq(s, &state)) {
                // Unregistered by another call meanwhile.
                return Err(TableError::NotFound(name.to_string()));
            }
            tables.remove(name);
            self.metrics.tables.set(tables.len() as i64);
            self.metrics.remove_table(name);
        }
        drop(held);
        self.refresh_halted().await;
        info!(table = %name, "unregistered table");
        self.forget(name).await
    }

    /// Clear a table's halted state and poll it now.
    pub async fn resume(&self, name: &str) -> Result<(), TableError> {
        let state = self.table(name).await?;
        state.update(|s| {
            s.halted = false;
            s.halted_reason = None;
            s.consecutive_failures = 0;
        });
        state
            .metrics
            .halted
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.refresh_halted().await;
        self.schedule(&state, Duration::ZERO);
        info!(table = %name, "resumed table");
        Ok(())
    }

    async fn refresh_halted(&self) {
        let n = self
            .tables
            .read()
            .await
            .values()
            .filter(|t| t.status().halted)
            .count();
        self.metrics.tables_halted.set(n as i64);
    }

    /// Keep the table `state` registered through the API in the registry: its own file, written
    /// while it is still the table registered under its name (else a later change of that name
    /// decides).
    async fn save(&self, state: &Arc<TableState>) -> Result<(), TableError> {
        self.registry_writable()?;
        let _w = self.registry_write.lock().await;
        let current = self
            .tables
            .read()
            .await
            .get(&state.entry.name)
            .is_some_and(|t| Arc::ptr_eq(t, state));
        if !current {
            return Ok(());
        }
        let (registry, entry) = (self.api_tables.clone(), state.entry.clone());
        self.registry_io(move || registry.put(&entry)).await
    }

    /// Remove the table `name` from the registry, unless it was registered again meanwhile (its
    /// own registration writes its file).
    async fn forget(&self, name: &str) -> Result<(), TableError> {
        self.registry_writable()?;
        let _w = self.registry_write.lock().await;
        if self
            .tables
            .read()
            .await
            .get(name)
            .is_some_and(|t| t.source == Source::Api)
        {
            return Ok(());
        }
        let (registry, name) = (self.api_tables.clone(), name.to_string());
        self.registry_io(move || registry.remove(&name)).await
    }

    /// Run a write of the registry on the blocking pool; a failure is counted and logged.
    async fn registry_io(
        &self,
        io: impl FnOnce() -> anyhow::Result<()> + Send + 'static,
    ) -> Result<(), TableError> {
        let written = tokio::task::spawn_blocking(io)
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the write ended abnormally: {e}")));
        written.map_err(|e| {
            self.metrics
                .registry_errors
                .with_label_values(&["write"])
                .inc();
            error!(error = %format!("{e:#}"), "could not write the registry of tables registered through the API");
            TableError::Failed(format!(
                "could not persist the registry: {}",
                e.root_cause()
            ))
        })
    }

    /// Put `state` on the timer heap, `after` from now (replacing any earlier entry of it).
    fn schedule(&self, state: &Arc<TableState>, after: Duration) {
        let generation = state
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let due = tokio::time::Instant::now() + after;
        let _ = self.timer.send((due, generation, state.clone()));
    }

    /// The scheduler: one timer heap for every table (a task per table would cost each idle
    /// table a kilobyte or more). A due table is polled on its own task, at most
    /// `server.max_concurrent_polls` at once, so a slow table never holds up the others beyond
    /// that bound; when the poll ends, the table is put back with its next delay (its interval
    /// with jitter, or a backoff after a failure).
    async fn run_scheduler(
        self: Arc<Self>,
        mut incoming: tokio::sync::mpsc::UnboundedReceiver<Due>,
    ) {
        use std::cmp::Reverse;
        let mut heap: std::collections::BinaryHeap<Reverse<HeapEntry>> =
            std::collections::BinaryHeap::new();
        loop {
            let next = heap.peek().map(|Reverse(e)| e.due);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                msg = incoming.recv() => match msg {
                    Some((due, generation, state)) => heap.push(Reverse(HeapEntry { due, generation, state })),
                    None => return,
                },
                _ = async {
                    match next {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => {
                    while let Some(Reverse(e)) = heap.peek() {
                        if e.due > tokio::time::Instant::now() {
                            break;
                        }
                        let Some(Reverse(e)) = heap.pop() else { break };
                        self.clone().dispatch(e.state, e.generation).await;
                    }
                }
            }
        }
    }

    /// A table came due: once a poll slot is free, poll it on its own task (or skip it if
    /// halted, unregistered, or rescheduled since). The scheduler waits here for the slot, so
    /// tables due meanwhile stay in its heap.
    async fn dispatch(self: Arc<Self>, state: Arc<TableState>, generation: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if state.generation.load(Relaxed) != generation {
            return;
        }
        let name = state.entry.name.clone();
        let registered = self
            .tables
            .read()
            .await
            .get(&name)
            .is_some_and(|t| Arc::ptr_eq(t, &state));
        if !registered {
            return;
        }
        let interval = Duration::from_millis(state.settings.poll_interval_ms);
        if state.status().halted {
            state.metrics.poll("skipped_halted");
            self.schedule(&state, interval);
            return;
        }
        if !self.cluster().owns(&name) {
            // Another replica polls it (or none, while this one is not registered): this costs
            // a timer entry per interval and no request. A table this replica comes to own is
            // rescheduled at once (`apply_cluster`).
            self.schedule(&state, interval);
            return;
        }
        // The poll slot before the task: a table waiting for one is a heap entry, not a
        // spawned task holding its poll's future (about 3 KiB each), which at a start with
        // 100,000 tables due at once made 400 MB of queued tasks the allocator never gave back.
        let permit = tokio::select! {
            p = self.polls.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = self.shutdown.cancelled() => return,
        };
        let daemon = self.clone();
        self.tracker.spawn(
            async move {
                // Never wait for the table while holding a poll slot: a change (through the
                // API, up to server.mutation_timeout) holds it, so this poll is skipped as
                // busy, neither a success nor a failure, and the table comes due again.
                let Ok(mut cached) = state.table.try_lock() else {
                    drop(permit);
                    state.metrics.poll("skipped_busy");
                    info!(table = %state.entry.name, "a change holds the table: poll skipped as busy");
                    if state.generation.load(Relaxed) == generation {
                        daemon.schedule(&state, jitter(interval, 0.1));
                    }
                    return;
                };
                let ok = tokio::select! {
                    ok = daemon.poll(&state, &mut cached, permit) => ok,
                    _ = daemon.abandon.cancelled() => return,
                };
                drop(cached);
                let failures = state.status().consecutive_failures;
                let delay = if ok {
                    jitter(interval, 0.1)
                } else {
                    let backoff = interval.saturating_mul(2u32.saturating_pow(failures.min(16)));
                    backoff.min(daemon.config.server.max_backoff.max(interval))
                };
                // Only if nothing (a resume) rescheduled it meanwhile.
                if state.generation.load(Relaxed) == generation {
                    daemon.schedule(&state, delay);
                }
            }
            .instrument(info_span!("table", table = %name)),
        );
    }

    /// Poll a table once, holding its mutex (`cached`) and a poll slot (`permit`, given back
    /// before a rollback starts); `false` when the poll failed.
    async fn poll(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> bool {
        let name = state.entry.name.as_str();
        let started = std::time::Instant::now();
        state.update(|s| s.last_poll_started_ms = Some(now_ms()));
        let result = self.poll_inner(state, cached, permit).await;
        if result.is_err() {
            // Open the table afresh next time: it may have been moved, re-created or upgraded.
            state.keep(cached, None);
        }
        let elapsed = started.elapsed();
        self.metrics.poll_duration.observe(elapsed.as_secs_f64());
        state.metrics.last_poll_duration.set(elapsed.as_secs_f64());
        state
            .metrics
            .last_poll_timestamp
            .set(now_ms() as f64 / 1000.0);
        let halt_after = self.config.server.halt_after_failures;
        let mut halted_now = false;
        state.update(|s| {
            s.polls += 1;
            s.last_poll_finished_ms = Some(now_ms());
            s.last_poll_duration_ms = Some(elapsed.as_millis() as u64);
            s.last_poll_ok = Some(result.is_ok());
            match &result {
                Ok(()) => {
                    s.consecutive_failures = 0;
                    s.last_error = None;
                }
                Err(e) => {
                    s.consecutive_failures += 1;
                    s.last_error = Some(e.clone());
                    if s.consecutive_failures >= halt_after && !s.halted {
                        s.halted = true;
                        s.halted_reason = Some(format!(
                            "{} consecutive failed polls; last: {e}",
                            s.consecutive_failures
                        ));
                        halted_now = true;
                    }
                }
            }
        });
        let outcome = if result.is_ok() { "ok" } else { "error" };
        state.metrics.poll(outcome);
        if let Err(e) = &result {
            warn!(table = %name, error = %e, "poll failed");
        }
        if halted_now {
            error!(table = %name, "table halted after repeated failures; resume it with POST /api/v1/tables/{name}/resume");
            state
                .metrics
                .halted
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.refresh_halted().await;
        }
        result.is_ok()
    }

    async fn open(&self, state: &TableState) -> Result<Table, String> {
        self.config
            .check_table_location(&state.entry.uri, state.source == Source::Api)?;
        let storage = Storage::open_with(
            &state.entry.uri,
            &state.settings.storage_options,
            Some(&self.stores),
        )
        .map_err(|e| e.to_string())?
        .with_interceptor(self.metrics.request_counter(&state.entry.name));
        Table::open_storage(storage)
            .await
            .map_err(|e| e.to_string())
    }

    async fn poll_inner(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(), String> {
        // The reads end by the poll deadline (they change nothing: a late one is dropped).
        let limit = self.config.server.poll_timeout;
        let deadline = tokio::time::Instant::now() + limit;
        if cached.is_none() {
            let opened = deadline::within(deadline, limit, self.open(state)).await?;
            state.keep(cached, Some(opened));
        }
        let Some(table) = cached.as_ref() else {
            return Err("the table could not be opened".into());
        };
        let listed =
            deadline::within(deadline, limit, async { Ok(table.timeline().await) }).await?;
        let timeline = match listed {
            Ok(t) => t,
            Err(e) => {
                // Re-open next time: the table may have moved or been re-created.
                state.keep(cached, None);
                return Err(e.to_string());
            }
        };
        record_pending(state, &timeline);
        self.forget_finished_changes(state, &timeline).await;
        let has_pending = timeline.pending().next().is_some();
        if !has_pending {
            state.metrics.oldest_pending_age.set(0.0);
            state.metrics.stalest_heartbeat_age.set(0.0);
            state
                .metrics
                .failed_instants
                .store(0, std::sync::atomic::Ordering::Relaxed);
            let writers = state.idle_writers();
            state
                .metrics
                .set_writers(writers.left_alone.by_reason(), false);
            state.update(|s| {
                s.pending.clear();
                s.writers = writers;
            });
            return Ok(());
        }
        // One listing of the heartbeat folder (in `assess_table`).
        let judged = deadline::within(deadline, limit, async {
            assess_table(table, &timeline, &state.detection_options())
                .await
                .map_err(|e| e.to_string())
        })
        .await?;
        self.note_heartbeats(state, &judged.writers).await;
        let assessments = judged.assessments;
        let oldest = assessments
            .iter()
            .filter(|a| a.verdict != hudi_keeper_core::protocol::detect::Verdict::NotACandidate)
            .filter_map(|a| a.instant_age_ms)
            .max()
            .unwrap_or(0);
        let stalest = assessments
            .iter()
            .filter_map(|a| a.heartbeat_age_ms)
            .max()
            .unwrap_or(0);
        let failed = assessments.iter().filter(|a| a.verdict.is_failed()).count();
        state
            .metrics
            .oldest_pending_age
            .set(oldest.max(0) as f64 / 1000.0);
        state
            .metrics
            .stalest_heartbeat_age
            .set(stalest.max(0) as f64 / 1000.0);
        state
            .metrics
            .failed_instants
            .store(failed as i64, std::sync::atomic::Ordering::Relaxed);
        state.metrics.set_writers(
            judged.writers.left_alone.by_reason(),
            judged.writers.eager_writer_suspected,
        );
        let writers = WritersStatus::new(&judged.writers, state.heartbeats_first_seen_ms());
        state.update(|s| {
            s.pending = assessments.clone();
            s.writers = writers;
        });
        if let Some(r) = timeline
            .pending()
            .find(|i| i.action == hudi_keeper_core::timeline::Action::Restore)
        {
            let own = self
                .own_changes
                .get(&state.entry.name, &state.entry.uri)
                .into_iter()
                .find(|c| {
                    c.kind == own_changes::ChangeKind::Restore && c.instant == r.requested_time
                });
            let options = state
                .rollback_options()
                .filter(|_| state.settings.failed_writes_policy != PolicySetting::Observe);
            if let (Some(own), Some(options)) = (own, options) {
                // This daemon started it and was stopped (killed, or cut off at a safe point):
                // nobody else runs it, so it is finished now.
                drop(permit);
                return self.resume_own_restore(state, table, own, options).await;
            }
            // The table is between states until the restore finishes (its writers refuse to
            // write too); its pending instants belong to the restore. Not a failed poll.
            warn!(table = %state.entry.name, restore = %r.requested_time, "a restore is pending: automatic rollbacks are paused until it is finished (run the restore again, or POST /api/v1/tables/{{name}}/restore)");
            return Ok(());
        }
        let pending_rollback = timeline
            .pending()
            .any(|i| i.action == hudi_keeper_core::timeline::Action::Rollback);
        if state.settings.failed_writes_policy == PolicySetting::Observe
            || (failed == 0 && !pending_rollback)
        {
            return Ok(());
        }
        let Some(options) = state.rollback_options() else {
            return Ok(());
        };
        let options = self.journaled(state, options, false);
        // The reads are over: the poll slot goes back before the change, which may run up to
        // server.mutation_timeout (+ shutdown_grace) and must not keep other tables from
        // their polls. The table's mutex stays held, so one change per table at most.
        drop(permit);
        let started = std::time::Instant::now();
        let options = &options;
        match self
            .mutate(table, |t| async move {
                rollback(&t, &Selection::AllFailed, options, None).await
            })
            .await
        {
            Ok(done) => {
                for d in &done {
                    self.record_rollback(state, d, "auto");
                }
                Ok(())
            }
            Err(e) => {
                self.record_failure(state, "auto", "(failed writes)", &e.to_string(), started);
                Err(e.to_string())
            }
        }
    }

    /// Finish a restore this daemon started and did not finish (it was killed or stopped at a
    /// safe point): the same restore point, resumed with the restore's own plan.
    async fn resume_own_restore(
        &self,
        state: &TableState,
        table: &Table,
        own: own_changes::OwnChange,
        options: RollbackOptions,
    ) -> Result<(), String> {
        let name = &state.entry.name;
        info!(table = %name, restore_instant = %own.instant, target = %own.target, "resuming the restore this daemon started before it stopped");
        let options = RestoreOptions {
            rollback: self.journaled(state, options, own.require_savepoint),
            require_savepoint: own.require_savepoint,
        };
        let started = std::time::Instant::now();
        let (target, options) = (&own.target, &options);
        match self
            .mutate(table, |t| async move {
                restore(&t, target, options, None).await
            })
            .await
        {
            Ok(done) => {
                info!(table = %name, target = %target, restore_instant = %done.restore_instant, undone = done.undone.len(), "resumed restore finished");
                Ok(())
            }
            Err(e) => {
                let what = format!("(restore {})", own.instant);
                self.record_failure(state, "auto", &what, &e.to_string(), started);
                Err(e.to_string())
            }
        }
    }

    /// Heartbeat files on the table prove it has LAZY writers: remember that in `state_dir`
    /// (once), for the writers report (`seen_before`) when no heartbeat file is left, after
    /// restarts too. It never makes a write failed. A failed write of the state is retried at
    /// the next poll that sees heartbeat files.
    async fn note_heartbeats(&self, state: &TableState, writers: &WritersReport) {
        if writers.heartbeat_files.unwrap_or(0) == 0 || state.heartbeats_first_seen_ms().is_some() {
            return;
        }
        let name = state.entry.name.as_str();
        match self.evidence.record(name, &state.entry.uri, now_ms()).await {
            Ok(e) => {
                *state
                    .heartbeats_seen_ms
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(e.heartbeats_first_seen_ms);
                info!(table = %name, "heartbeat files seen: the table has LAZY writers; a pending write of it without heartbeat file is an EAGER writer's or lost its heartbeat, and is left alone unless assume_lazy_writers or max_write_duration says otherwise");
            }
            Err(e) => {
                warn!(table = %name, error = %format!("{e:#}"), "could not keep the heartbeat evidence in state_dir; retried at the next poll")
            }
        }
    }

    fn record_rollback(&self, state: &TableState, d: &RollbackDone, trigger: &'static str) {
        use std::sync::atomic::Ordering::Relaxed;
        let name = state.entry.name.as_str();
        state.metrics.rollback(true, trigger);
        self.metrics
            .rollback_duration
            .observe(d.duration_ms as f64 / 1000.0);
        state
            .metrics
            .files_deleted
            .fetch_add(d.files_deleted as u64, Relaxed);
        if d.lock_wait_ms > 0 {
            state.metrics.lock_waits.fetch_add(1, Relaxed);
            state
                .metrics
                .lock_wait_ms
                .fetch_add(d.lock_wait_ms, Relaxed);
        }
        info!(table = %name, instant = %d.instant, rollback_instant = %d.rollback_instant, files = d.files_deleted, trigger, "rolled back a failed write");
        state.update(|s| {
            s.rollbacks += 1;
            s.pending.retain(|a| a.requested_time != d.instant);
            s.last_rollback = Some(Box::new(RollbackView {
                instant: d.instant.clone(),
                rollback_instant: Some(d.rollback_instant.clone()),
                at_ms: now_ms(),
                outcome: "success",
                trigger,
                files_deleted: d.files_deleted,
                duration_ms: d.duration_ms,
                error: None,
            }))
        });
    }

    fn record_failure(
        &self,
        state: &TableState,
        trigger: &'static str,
        instant: &str,
        error: &str,
        started: std::time::Instant,
    ) {
        state.metrics.rollback(false, trigger);
        state.update(|s| {
            s.last_rollback = Some(Box::new(RollbackView {
                instant: instant.to_string(),
                rollback_instant: None,
                at_ms: now_ms(),
                outcome: "failure",
                trigger,
                files_deleted: 0,
                duration_ms: started.elapsed().as_millis() as u64,
                error: Some(error.to_string()),
            }))
        });
    }

    /// A manual rollback (or its preview) through the API.
    pub async fn manual_rollback(
        &self,
        name: &str,
        instant: Option<String>,
        dry_run: bool,
    ) -> Result<ManualRollback, TableError> {
        let state = self.table(name).await?;
        if !dry_run {
            self.check_owner(name)?;
        }
        if state.settings.failed_writes_policy == PolicySetting::Observe && !dry_run {
            return Err(TableError::Conflict(format!(
                "`{name}` is an observe table: hudi-keeper never changes it"
            )));
        }
        let options = match state.rollback_options() {
            Some(o) => o,
            None if dry_run => state.detection_options(),
            None => {
                return Err(TableError::Conflict(format!(
                    "`{name}` has no lock.provider: it cannot be changed"
                )))
            }
        };
        let options = self.journaled(&state, options, false);
        let selection = match &instant {
            Some(t) => Selection::Instant(t.clone()),
            None => Selection::AllFailed,
        };
        let mut cached = self.lock_table(&state).await?;
        let table = &self.opened(&state, &mut cached).await?;
        if dry_run {
            let plans = self
                .read_within(async { preview(table, &selection, &options).await.map_err(refusal) })
                .await?;
            return Ok(ManualRollback::Plan(plans));
        }
        let started = std::time::Instant::now();
        let (selection, options) = (&selection, &options);
        match self
            .mutate(table, |t| async move {
                rollback(&t, selection, options, None).await
            })
            .await
        {
            Ok(done) => {
                for d in &done {
                    self.record_rollback(&state, d, "manual");
                }
                Ok(ManualRollback::Done(done))
            }
            Err(e) => {
                self.record_failure(
                    &state,
                    "manual",
                    instant.as_deref().unwrap_or("(failed writes)"),
                    &e.to_string(),
                    started,
                );
                Err(e.into_table_error())
            }
        }
    }

    /// The table handle, opened on first use.
    async fn with_table<T, F, Fut>(&self, state: &Arc<TableState>, work: F) -> Result<T, TableError>
    where
        F: FnOnce(Table) -> Fut,
        Fut: std::future::Future<Output = Result<T, TableError>>,
    {
        let mut cached = self.lock_table(state).await?;
        let table = self.opened(state, &mut cached).await?;
        work(table).await
    }

    /// The table's mutex for a change through the API: a poll holds it only for its reads
    /// (`server.poll_timeout`), another change up to `server.mutation_timeout` (+ grace). The
    /// wait ends after `server.mutation_timeout` (also when the client has gone meanwhile).
    async fn lock_table<'a>(
        &self,
        state: &'a TableState,
    ) -> Result<tokio::sync::MutexGuard<'a, Option<Arc<Table>>>, TableError> {
        let limit = self.config.server.mutation_timeout;
        tokio::time::timeout(limit, state.table.lock())
            .await
            .map_err(|_| {
                TableError::Busy(format!(
                    "`{}` is busy: another change held it for server.mutation_timeout ({} s); retry later",
                    state.entry.name,
                    limit.as_secs()
                ))
            })
    }

    /// The cached table, or the table opened now (within `server.poll_timeout`) and cached.
    async fn opened(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
    ) -> Result<Table, TableError> {
        if let Some(t) = cached.as_deref() {
            return Ok(t.clone());
        }
        let opened = self
            .read_within(async { self.open(state).await.map_err(TableError::Failed) })
            .await?;
        state.keep(cached, Some(opened.clone()));
        Ok(opened)
    }

    /// `work` (reads only: opening a table, a dry run) unless `server.poll_timeout` passes
    /// first; then it is dropped and the request fails.
    async fn read_within<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, TableError>>,
    ) -> Result<T, TableError> {
        let limit = self.config.server.poll_timeout;
        tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
            Err(TableError::Failed(format!(
                "timed out: the store did not answer within server.poll_timeout ({} s)",
                limit.as_secs()
            )))
        })
    }

    /// `options` with this daemon's journal of the changes it starts on `state`'s table
    /// (`state_dir/own-changes/`), and its own pending rollbacks, which it resumes at once.
    fn journaled(
        &self,
        state: &TableState,
        options: RollbackOptions,
        require_savepoint: bool,
    ) -> RollbackOptions {
        let (name, uri) = (&state.entry.name, &state.entry.uri);
        RollbackOptions {
            journal: Some(Arc::new(own_changes::TableJournal {
                store: self.own_changes.clone(),
                name: name.clone(),
                uri: uri.clone(),
                require_savepoint,
            })),
            own_rollbacks: self.own_changes.rollbacks(name, uri),
            ..options
        }
    }

    /// Forget the recorded changes of `state`'s table that are no longer pending. Called with
    /// the table's mutex held (no change of this daemon runs on it meanwhile).
    async fn forget_finished_changes(&self, state: &TableState, timeline: &Timeline) {
        let pending: std::collections::BTreeSet<&str> = timeline
            .pending()
            .map(|i| i.requested_time.as_str())
            .collect();
        let (name, uri) = (&state.entry.name, &state.entry.uri);
        if let Err(e) = self.own_changes.retain_pending(name, uri, &pending).await {
            warn!(table = %name, error = %format!("{e:#}"), "could not update state_dir/own-changes; retried at the next poll");
        }
    }

    /// Options to change a table through the API: its lock is required, observe tables are
    /// never changed.
    fn change_options(
        &self,
        name: &str,
        state: &TableState,
        dry_run: bool,
    ) -> Result<RollbackOptions, TableError> {
        if state.settings.failed_writes_policy == PolicySetting::Observe && !dry_run {
            return Err(TableError::Conflict(format!(
                "`{name}` is an observe table: hudi-keeper never changes it"
            )));
        }
        match state.rollback_options() {
            Some(o) => Ok(o),
            None if dry_run => Ok(state.detection_options()),
            None => Err(TableError::Conflict(format!(
                "`{name}` has no lock.provider: it cannot be changed"
            ))),
        }
    }

    /// Restore a table to `target` (a savepoint when `require_savepoint`), or with `dry_run`
    /// return the plan. Holds the table's handle for the whole restore, so its polls wait.
    /// Changes to a table go through the replica that owns it (dry runs are answered anywhere).
    fn check_owner(&self, name: &str) -> Result<(), TableError> {
        match self.cluster().owner(name) {
            Some(owner) if owner.this_replica => Ok(()),
            Some(owner) => Err(TableError::NotOwner {
                table: name.to_string(),
                owner: owner.name,
            }),
            None => Err(TableError::Busy(format!(
                "no replica owns `{name}` as this one sees the cluster (it is not registered in ZooKeeper): retry later"
            ))),
        }
    }

    pub async fn manual_restore(
        &self,
        name: &str,
        target: String,
        require_savepoint: bool,
        dry_run: bool,
    ) -> Result<serde_json::Value, TableError> {
        let state = self.table(name).await?;
        if !dry_run {
            self.check_owner(name)?;
        }
        let options = RestoreOptions {
            rollback: self.journaled(
                &state,
                self.change_options(name, &state, dry_run)?,
                require_savepoint,
            ),
            require_savepoint,
        };
        self.with_table(&state, |table| async move {
            if dry_run {
                let plan = self
                    .read_within(async {
                        preview_restore(&table, &target, &options)
                            .await
                            .map_err(refusal)
                    })
                    .await?;
                return Ok(serde_json::json!({"table": name, "dry_run": true, "restore": plan}));
            }
            let (target, options) = (&target, &options);
            let done = self
                .mutate(&table, |t| async move { restore(&t, target, options, None).await })
                .await
                .map_err(deadline::MutationError::into_table_error)?;
            info!(table = name, target = %target, restore_instant = %done.restore_instant, undone = done.undone.len(), "restored through the API");
            Ok(serde_json::json!({"table": name, "dry_run": false, "restore": done}))
        })
        .await
    }

    /// Savepoint a commit of a table (the latest completed one when `instant` is `None`), or
    /// with `dry_run` return what would be written.
    pub async fn manual_savepoint(
        &self,
        name: &str,
        request: SavepointRequest,
        dry_run: bool,
    ) -> Result<serde_json::Value, TableError> {
        let state = self.table(name).await?;
        if !dry_run {
            self.check_owner(name)?;
        }
        let options = self.change_options(name, &state, dry_run)?;
        self.with_table(&state, |table| async move {
            let created = if dry_run {
                self.read_within(async {
                    preview_savepoint(&table, &request).await.map_err(refusal)
                })
                .await?
            } else {
                let (request, lock) = (&request, &options.lock);
                self.mutate(&table, |t| async move {
                    create_savepoint(&t, request, lock).await
                })
                .await
                .map_err(deadline::MutationError::into_table_error)?
            };
            Ok(serde_json::json!({"table": name, "dry_run": dry_run, "savepoint": created}))
        })
        .await
    }

    /// The active timeline of a table. Never waits for the table's mutex (a poll or a change
    /// may hold it for long): it reads through the cached handle's clone (the table is opened
    /// only when no handle is cached); at most [`TIMELINE_READS_PER_TABLE`] such reads of a
    /// table run at once (more are `Busy`); the read ends by `server.poll_timeout`.
    pub async fn timeline(&self, name: &str) -> Result<Timeline, TableError> {
        let state = self.table(name).await?;
        let Ok(_read) = state.timeline_reads.try_acquire() else {
            return Err(TableError::Busy(format!(
                "`{name}`: {TIMELINE_READS_PER_TABLE} timeline reads of the table run already; retry later"
            )));
        };
        self.read_within(async {
            let table = match state.handle() {
                Some(t) => t,
                None => Arc::new(self.open(&state).await.map_err(TableError::Failed)?),
            };
            table
                .timeline()
                .await
                .map_err(|e| TableError::Failed(e.to_string()))
        })
        .await
    }

    /// Whether every table has been polled at least once, and every table that is not halted
    /// succeeded its last poll.
    pub async fn readiness(&self) -> Readiness {
        let mut r = Readiness::default();
        // Read under the lock for the tables' names, in name order; nothing is cloned but the
        // names listed.
        for t in self.tables.read().await.values() {
            let state = t.ready_state();
            r.tables.total += 1;
            match state {
                ReadyState::Ok => r.tables.ok += 1,
                ReadyState::NotPolledYet => r.tables.not_polled_yet += 1,
                ReadyState::LastPollFailed => r.tables.last_poll_failed += 1,
                ReadyState::Halted => r.tables.halted += 1,
            }
            if state != ReadyState::Ok {
                if r.not_ok.len() < READINESS_NAMES_MAX {
                    r.not_ok.push(NotOkTable {
                        name: t.entry.name.clone(),
                        state,
                    });
                } else {
                    r.not_ok_more += 1;
                }
            }
        }
        r.ready = r.tables.not_polled_yet == 0 && r.tables.last_poll_failed == 0;
        r
    }
}

/// At most this many tables are named in `/readyz` (the counts cover them all): a probe of a
/// daemon with 100,000 tables must stay small.
pub const READINESS_NAMES_MAX: usize = 100;

/// The tables' part of `/readyz`.
#[derive(Debug, Default, Serialize)]
pub struct Readiness {
    /// Every table polled at least once, and every table not halted succeeded its last poll.
    pub ready: bool,
    /// The tables by state.
    pub tables: ReadyCounts,
    /// The tables that are not `ok`, in name order, at most [`READINESS_NAMES_MAX`].
    pub not_ok: Vec<NotOkTable>,
    /// How many more tables are not `ok` than `not_ok` names.
    pub not_ok_more: usize,
}

/// How many tables are in each readiness state.
#[derive(Debug, Default, Serialize)]
pub struct ReadyCounts {
    pub total: usize,
    pub ok: usize,
    pub not_polled_yet: usize,
    pub last_poll_failed: usize,
    pub halted: usize,
}

/// A table that is not `ok`.
#[derive(Debug, Serialize)]
pub struct NotOkTable {
    pub name: String,
    pub state: ReadyState,
}

/// A table's state for readiness: halted tables do not hold readiness back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadyState {
    Ok,
    NotPolledYet,
    LastPollFailed,
    Halted,
}

/// Count a table's pending instants by action, for `hudi_keeper_pending_instants`.
fn record_pending(state: &TableState, timeline: &Timeline) {
    let mut counts: BTreeMap<&'static str, i64> = BTreeMap::new();
    for i in timeline.pending() {
        let a = i.action.as_str();
        let label = metrics::ACTIONS
            .iter()
            .find(|x| **x == a)
            .copied()
            .unwrap_or("other");
        *counts.entry(label).or_default() += 1;
    }
    state.metrics.set_pending(counts.into_iter().collect());
}

/// The result of a manual rollback request.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ManualRollback {
    Plan(Vec<RollbackPreview>),
    Done(Vec<RollbackDone>),
}

fn refusal(e: hudi_keeper_core::Error) -> TableError {
    match e {
        hudi_keeper_core::Error::Refused { .. } => TableError::Conflict(e.to_string()),
        other => TableError::Failed(other.to_string()),
    }
}

/// `base` ± `spread` (a fraction of it), at random.
fn jitter(base: Duration, spread: f64) -> Duration {
    let f: f64 = rand::random::<f64>() * 2.0 - 1.0;
    let ms = base.as_millis() as f64 * (1.0 + f * spread.min(1.0));
    Duration::from_millis(ms.max(0.0) as u64)
}

/// Whether `entry` is registered already: its name, or (through the API, where `location` is
/// known) the same table under another name or spelling, a table inside it (a metadata table)
/// or around it.
fn registered_already(
    tables: &BTreeMap<String, Arc<TableState>>,
    entry: &TableEntry,
    source: Source,
    location: Option<&config::Location>,
) -> Option<TableError> {
    if tables.contains_key(&entry.name) {
        return Some(TableError::Conflict(format!(
            "a table named `{}` is registered already",
            entry.name
        )));
    }
    let at = location.filter(|_| source == Source::Api)?;
    let other = tables.values().find(|t| {
        t.location
            .as_deref()
            .is_some_and(|o| at.is_under(o) || o.is_under(at))
    })?;
    Some(TableError::Conflict(format!(
        "`{}` is registered already, or contains or lies inside a registered table: `{}` ({})",
        entry.uri, other.entry.name, other.entry.uri
    )))
}

/// Make the demo table if its folder is missing (a local path only).
fn ensure_demo_table(uri: &str) -> anyhow::Result<()> {
    let path = Path::new(uri.strip_prefix("file://").unwrap_or(uri));
    if uri.contains("://") && !uri.starts_with("file://") {
        anyhow::bail!("demo = true needs a local path, not `{uri}`");
    }
    if path.join(".hoodie/hoodie.properties").exists() {
        return Ok(());
    }
    let failed = crate::cli::demo::make_demo_table(path)?;
    info!(path = %path.display(), failed_instant = %failed, "made the demo table with a failed write");
    Ok(())
}

/// `hudi-keeper serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let (path, required) = match &args.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(config::DEFAULT_PATH), false),
    };
    let mut config = Config::load(&path, required)?;
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    if config.server.auth_token.is_none() {
        warn!("server.auth_token is not set: the mutating API endpoints are off");
    }
    let listener = tokio::net::TcpListener::bind(config.server.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.server.listen))?;
    let local = listener.local_addr()?;
    // Bound before anything else starts, so a port in use fails the start.
    let probes = match config.server.probe_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (server.probe_listen)"))?,
        ),
        None => None,
    };
    let probe_local = probes.as_ref().map(|l| l.local_addr()).transpose()?;
    let grace = config.server.shutdown_grace;
    // Held until the process ends (the descriptor is never closed: work abandoned at shutdown
    // may still write to state_dir while the runtime winds down, after this function returns):
    // the changes recorded in state_dir/own-changes are this process's or an earlier one's that
    // is gone, so they are resumed at once.
    std::mem::forget(own_changes::lock_state_dir(&config.server.state_dir)?);
    let daemon = Daemon::new(config)?;
    daemon.start().await?;
    // Parsing a config of thousands of tables leaves megabytes of freed memory the allocator
    // would otherwise keep; hand it back once the registry is built.
    release_free_memory();
    {
        // And once more after the first round of polls (opening every table's handle), then
        // now and then: long-lived handles among short-lived poll buffers fragment the heap.
        let d = daemon.clone();
        daemon.tracker.spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(60));
            every.tick().await;
            loop {
                tokio::select! {
                    _ = every.tick() => release_free_memory(),
                    _ = d.shutdown.cancelled() => return,
                }
            }
        });
    }
    info!(listen = %local, probe_listen = ?probe_local, tables = daemon.tables().await.len(), "hudi-keeper serving");
    eprintln!("hudi-keeper serving on http://{local}");
    if let Some(p) = probe_local {
        eprintln!("hudi-keeper probes on http://{p}");
    }

    let app = http::router(daemon.clone());
    let shutdown = daemon.shutdown.clone();
    let limits = http::ConnectionLimits::api(&daemon.config.server);
    let server = tokio::spawn(async move {
        http::serve(listener, app, limits, shutdown).await;
        Ok::<(), std::io::Error>(())
    });
    if let Some(listener) = probes {
        let app = http::probe_router(daemon.clone());
        let shutdown = daemon.shutdown.clone();
        tokio::spawn(http::serve(
            listener,
            app,
            http::ConnectionLimits::probes(),
            shutdown,
        ));
    }

    wait_for_signal().await;
    info!("shutting down: no new polls; running changes stop at their next safe point");
    // Running changes stop at their next safe point and release their locks; polls' reads
    // end. Whatever still runs after the grace (a store that hangs) is dropped, and the locks
    // it held are released in the background.
    daemon.shutdown.cancel();
    daemon.tracker.close();
    if tokio::time::timeout(grace, daemon.tracker.wait())
        .await
        .is_err()
    {
        warn!(grace_s = grace.as_secs(), "work still running after server.shutdown_grace is abandoned; its locks are released in the background, and a change cut short resumes like a crashed one");
        daemon.abandon.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), daemon.tracker.wait()).await;
    }
    if !hudi_keeper_core::protocol::lock::release_dropped_locks(Duration::from_secs(10)).await {
        error!("a table lock of abandoned work could not be released within 10 s; it is left behind (a lease lapses by itself, a file-system lock file stays until deleted)");
    }
    match tokio::time::timeout(Duration::from_secs(5), server).await {
        Ok(Ok(Ok(()))) | Err(_) => {}
        Ok(Ok(Err(e))) => warn!(error = %e, "HTTP server ended with an error"),
        Ok(Err(e)) => warn!(error = %e, "HTTP server task failed"),
    }
    info!("stopped");
    Ok(ExitCode::SUCCESS)
}

/// Return freed heap pages to the OS (glibc keeps them otherwise).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: malloc_trim only releases free memory of the allocator's own arenas; it takes
        // no pointer and is safe to call at any time from any thread.
        unsafe {
            malloc_trim(0);
        }
    }
}

async fn wait_for_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
