//! The running daemon: what it holds, how it is built and started, and the views of its tables
//! and of the replicas sharing them.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{RwLock, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

use super::config::{Config, TableEntry, TableSettings};
use super::error::StartError;
use super::metrics::Metrics;
use super::scheduler::{jitter, Due};
use super::tables::RegistryState;
use super::{cluster, discovery, evidence, membership, own_changes, registry};
use super::{Source, TableError, TableState};

/// The running daemon.
#[derive(Debug)]
pub struct Daemon {
    pub config: Config,
    /// The replicas sharing the tables, and which one this is (a view `membership` replaces).
    pub(super) cluster: cluster::ClusterView,
    /// `[cluster] mode = "zookeeper"`: how this replica registers and sees the others.
    pub(super) membership: Option<membership::ZkMembership>,
    pub metrics: Metrics,
    pub(super) tables: RwLock<super::places::Registered>,
    pub(super) polls: Arc<Semaphore>,
    /// `/metrics` scrapes served at once (`server.max_concurrent_scrapes`, both listeners).
    pub scrapes: Arc<Semaphore>,
    pub(super) shutdown: CancellationToken,
    /// Cancelled once the shutdown grace is over: work still running is dropped.
    pub(super) abandon: CancellationToken,
    pub(super) tracker: TaskTracker,
    /// The configured tables, until `start` registers them.
    pub(super) initial: StdMutex<Vec<TableEntry>>,
    /// Tables to put on the scheduler's timer heap.
    pub(super) timer: tokio::sync::mpsc::UnboundedSender<Due>,
    /// Tables to put on the audits' timer heap (`audits`).
    pub(super) audit_timer: tokio::sync::mpsc::UnboundedSender<Due>,
    /// Audits running at once (`server.max_concurrent_audits`).
    pub(super) audits: Arc<Semaphore>,
    /// The tables registered through the API, on disk (`state_dir/api-tables/`).
    pub(super) api_tables: Arc<registry::Registry>,
    /// Object-store clients shared between tables of one bucket.
    pub(super) stores: hudi_keeper_core::storage::StoreCache,
    /// Distinct table settings (most tables share the defaults).
    pub(super) interned: StdMutex<Vec<Arc<TableSettings>>>,
    /// Serializes writes of the registry's files.
    pub(super) registry_write: tokio::sync::Mutex<()>,
    /// What became of the registry at start.
    pub(super) registry: StdMutex<RegistryState>,
    /// Which tables were seen with heartbeat files (`state_dir/writer-evidence/`).
    pub(super) evidence: evidence::EvidenceStore,
    /// The rollbacks and restores this daemon started (`state_dir/own-changes/`).
    pub(super) own_changes: Arc<own_changes::OwnChangesStore>,
    /// The `[[discover]]` sources' tables and metrics.
    pub(super) discovery: discovery::Discovery,
}

impl Daemon {
    /// Build the daemon from a loaded config; tables registered through the API earlier are
    /// read back from the state folder.
    pub fn new(mut config: Config) -> Result<Arc<Self>, StartError> {
        // The configured tables move into the registry at start; the config keeps the rest.
        let initial = std::mem::take(&mut config.tables);
        let api_tables = Arc::new(registry::Registry::new(&config.server.state_dir));
        let evidence =
            evidence::EvidenceStore::load(&config.server.state_dir.join("writer-evidence"))
                .map_err(StartError::StateDir)?;
        let own_changes = Arc::new(
            own_changes::OwnChangesStore::load(&config.server.state_dir.join("own-changes"))
                .map_err(StartError::StateDir)?,
        );
        // A StatefulSet pod's name ends in its index: `POD_NAME` (set from the downward API),
        // else the host name Kubernetes gives the pod.
        let pod_name = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok());
        let cluster = cluster::Cluster::from_config(&config.cluster, pod_name.as_deref())
            .map_err(StartError::Cluster)?;
        let membership = match cluster.mode() {
            cluster::ClusterMode::Zookeeper => Some(
                membership::ZkMembership::from_config(&config).map_err(StartError::Membership)?,
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
        let discovery = discovery::Discovery::new(&config.discover);
        metrics.register(discovery.metrics.collectors());
        let cluster = cluster::ClusterView::new(cluster);
        let (timer, incoming) = tokio::sync::mpsc::unbounded_channel();
        let (audit_timer, audits_due) = tokio::sync::mpsc::unbounded_channel();
        let daemon = Arc::new(Self {
            cluster,
            membership,
            timer,
            audit_timer,
            audits: Arc::new(Semaphore::new(config.server.max_concurrent_audits)),
            polls: Arc::new(Semaphore::new(config.server.max_concurrent_polls)),
            scrapes: Arc::new(Semaphore::new(config.server.max_concurrent_scrapes)),
            metrics,
            tables: RwLock::default(),
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
            discovery,
            config,
        });
        daemon.tracker.spawn(daemon.clone().run_scheduler(incoming));
        daemon.tracker.spawn(daemon.clone().run_audits(audits_due));
        Ok(daemon)
    }

    /// Register the configured tables and the persisted API tables, and start polling.
    pub async fn start(self: &Arc<Self>) -> Result<(), StartError> {
        let initial = std::mem::take(&mut *self.initial.lock().unwrap_or_else(|e| e.into_inner()));
        // A demo table is made by the `serve` command before the daemon starts.
        for entry in initial {
            self.add(entry, Source::Config, None).await?;
        }
        self.restore_registry().await;
        // After the config's and the API's tables: theirs take precedence.
        self.start_discovery();
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
        let moved = before.moved(&next, tables.keys().map(|k| &**k));
        let mut taken = 0usize;
        for (name, state) in tables.iter() {
            let owns = next.owns(name);
            state
                .metrics
                .not_owned
                .store(!owns, std::sync::atomic::Ordering::Relaxed);
            if owns && !before.owns(name) {
                taken += 1;
                // Active until its polls find it idle: what this replica saw before is old.
                state.activity.reset();
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
}
