//! The daemon's Prometheus metrics. Labels name tables (and kinds, outcomes, triggers, actions),
//! never instants.
//!
//! Process-wide metrics live in one `prometheus` registry. Per-table metrics are kept as plain
//! atomics in one small struct per table and written into the same exposition at scrape time:
//! the `prometheus` crate keeps about a kilobyte per labelled series (each child copies its
//! descriptor), which at 10,000 tables and a dozen series each would be well over 100 MiB.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use prometheus::{Encoder, Gauge, Histogram, HistogramOpts, IntGauge, Opts, Registry, TextEncoder};

/// The timeline actions a pending instant can have (label values of `pending_instants`).
pub const ACTIONS: [&str; 10] = [
    "commit",
    "deltacommit",
    "replacecommit",
    "clustering",
    "compaction",
    "logcompaction",
    "clean",
    "rollback",
    "restore",
    "other",
];

/// Why a pending write without heartbeat file is left alone (label values of
/// `pending_writes_left_alone`), as `LeftAlone::by_reason` orders them.
pub const LEFT_ALONE_REASONS: [&str; 3] = [
    "no_heartbeat_unconfirmed",
    "awaiting_newer_write",
    "age_unknown",
];

/// Poll outcomes.
pub const POLL_OUTCOMES: [&str; 4] = ["ok", "error", "skipped_halted", "skipped_busy"];

/// An `f64` in an atomic.
#[derive(Debug, Default)]
pub struct AtomicF64(AtomicU64);

impl AtomicF64 {
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed)
    }
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// One table's metrics.
#[derive(Debug, Default)]
pub struct TableMetrics {
    /// By [`POLL_OUTCOMES`].
    pub polls: [AtomicU64; 4],
    /// Another replica owns the table (`[cluster]`): its per-table series are left out, so
    /// that each table has one set of series across the replicas.
    pub not_owned: AtomicBool,
    pub last_poll_timestamp: AtomicF64,
    pub last_poll_duration: AtomicF64,
    /// Pending instants by action, as last polled.
    pub pending: Mutex<Vec<(&'static str, i64)>>,
    pub oldest_pending_age: AtomicF64,
    pub stalest_heartbeat_age: AtomicF64,
    pub failed_instants: AtomicI64,
    /// Pending writes left alone at the last poll, by [`LEFT_ALONE_REASONS`].
    pub left_alone: [AtomicI64; 3],
    /// A young pending write without heartbeat file on a table judged LAZY, at the last poll.
    pub eager_writer_suspected: AtomicBool,
    /// success/auto, failure/auto, success/manual, failure/manual.
    pub rollbacks: [AtomicU64; 4],
    pub files_deleted: AtomicU64,
    /// By `OpKind::ALL`.
    pub requests: [AtomicU64; 8],
    pub lock_waits: AtomicU64,
    pub lock_wait_ms: AtomicU64,
    pub halted: AtomicBool,
}

impl TableMetrics {
    pub fn poll(&self, outcome: &str) {
        if let Some(i) = POLL_OUTCOMES.iter().position(|o| *o == outcome) {
            self.polls[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn rollback(&self, success: bool, trigger: &str) {
        let i = match (success, trigger) {
            (true, "auto") => 0,
            (false, "auto") => 1,
            (true, _) => 2,
            (false, _) => 3,
        };
        self.rollbacks[i].fetch_add(1, Ordering::Relaxed);
    }

    /// What the last poll found about the writers: writes left alone by reason, and whether
    /// EAGER writers are suspected.
    pub fn set_writers(&self, left_alone: [(&str, usize); 3], eager_writer_suspected: bool) {
        for (i, reason) in LEFT_ALONE_REASONS.iter().enumerate() {
            let n = left_alone
                .iter()
                .find(|(r, _)| r == reason)
                .map(|(_, n)| *n as i64)
                .unwrap_or(0);
            self.left_alone[i].store(n, Ordering::Relaxed);
        }
        self.eager_writer_suspected
            .store(eager_writer_suspected, Ordering::Relaxed);
    }

    pub fn set_pending(&self, counts: Vec<(&'static str, i64)>) {
        if let Ok(mut p) = self.pending.lock() {
            *p = counts;
        }
    }
}

/// Every metric the daemon exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub poll_duration: Histogram,
    pub rollback_duration: Histogram,
    pub tables: IntGauge,
    pub tables_halted: IntGauge,
    /// Replicas sharing the tables (`[cluster]`; 1 without).
    pub cluster_replicas: IntGauge,
    /// Per-table files in `state_dir` that could not be read at start.
    pub state_files_unreadable: IntGauge,
    /// Views of the replicas this replica moved to (`[cluster] mode = "zookeeper"`: a replica
    /// joined or left, or this one lost or regained its registration).
    pub cluster_membership_changes: prometheus::IntCounter,
    /// Registered tables whose owner changed with those views, summed.
    pub cluster_ownership_changes: prometheus::IntCounter,
    /// Problems with the registry of tables registered through the API, by kind
    /// ([`REGISTRY_ERRORS`]).
    pub registry_errors: prometheus::IntCounterVec,
    per_table: RwLock<BTreeMap<String, Arc<TableMetrics>>>,
}

/// Kinds of `hudi_keeper_registry_errors_total`: the file unreadable at start, an entry not
/// restored (refused by the current policy, or not resolvable), a failed write.
pub const REGISTRY_ERRORS: [&str; 3] = ["unreadable", "not_restored", "write"];

fn must<T>(r: prometheus::Result<T>) -> T {
    // The definitions below are constant and valid; a failure is a programming error that the
    // tests catch.
    r.unwrap_or_else(|e| panic!("invalid metric definition: {e}"))
}

impl Metrics {
    /// Create and register the process-wide metrics.
    pub fn new() -> Self {
        let registry = Registry::new();
        let secs = vec![
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
        ];
        let poll_duration = must(Histogram::with_opts(
            HistogramOpts::new(
                "hudi_keeper_poll_duration_seconds",
                "Wall time of one poll of a table, rollbacks included (all tables).",
            )
            .buckets(secs.clone()),
        ));
        let rollback_duration = must(Histogram::with_opts(
            HistogramOpts::new(
                "hudi_keeper_rollback_duration_seconds",
                "Wall time of one successful rollback (all tables).",
            )
            .buckets(secs),
        ));
        let tables = must(IntGauge::new("hudi_keeper_tables", "Registered tables."));
        let tables_halted = must(IntGauge::new(
            "hudi_keeper_tables_halted",
            "Registered tables that are halted.",
        ));
        let cluster_replicas = must(IntGauge::new(
            "hudi_keeper_cluster_replicas",
            "Replicas sharing the tables as this replica sees them (cluster.replicas, or the members registered in ZooKeeper; 1 for a daemon of its own).",
        ));
        let state_files_unreadable = must(IntGauge::new(
            "hudi_keeper_state_files_unreadable",
            "Per-table files in state_dir (writer-evidence/, own-changes/) that could not be read at start and were skipped; the tables' status names them.",
        ));
        let cluster_membership_changes = must(prometheus::IntCounter::new(
            "hudi_keeper_cluster_membership_changes_total",
            "Changes of the replicas sharing the tables seen by this replica (a replica joined or left, this one lost or regained its registration).",
        ));
        let cluster_ownership_changes = must(prometheus::IntCounter::new(
            "hudi_keeper_cluster_ownership_changes_total",
            "Registered tables whose owner changed with a change of the replicas, summed over the changes.",
        ));
        let registry_errors = must(prometheus::IntCounterVec::new(
            Opts::new(
                "hudi_keeper_registry_errors_total",
                "Problems with state_dir/api-tables/ (tables registered through the API), by kind: unreadable at start, an entry not restored, a failed write.",
            ),
            &["kind"],
        ));
        for kind in REGISTRY_ERRORS {
            registry_errors.with_label_values(&[kind]).reset();
        }
        let build_info = must(prometheus::IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_build_info",
                "Always 1; the labels say which build runs.",
            ),
            &["version"],
        ));
        let start_time = must(Gauge::new(
            "hudi_keeper_start_time_seconds",
            "Unix time at which the daemon started.",
        ));
        for c in [
            Box::new(poll_duration.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(rollback_duration.clone()),
            Box::new(tables.clone()),
            Box::new(tables_halted.clone()),
            Box::new(cluster_replicas.clone()),
            Box::new(state_files_unreadable.clone()),
            Box::new(cluster_membership_changes.clone()),
            Box::new(cluster_ownership_changes.clone()),
            Box::new(registry_errors.clone()),
            Box::new(build_info.clone()),
            Box::new(start_time.clone()),
        ] {
            must(registry.register(c));
        }
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        start_time.set(chrono::Utc::now().timestamp() as f64);
        Self {
            registry,
            poll_duration,
            rollback_duration,
            tables,
            tables_halted,
            cluster_replicas,
            state_files_unreadable,
            cluster_membership_changes,
            cluster_ownership_changes,
            registry_errors,
            per_table: RwLock::new(BTreeMap::new()),
        }
    }

    /// A table's metrics, created at zero (so the first failure is an increase alerts see).
    pub fn table(&self, table: &str) -> Arc<TableMetrics> {
        let mut map = self.per_table.write().unwrap_or_else(|e| e.into_inner());
        map.entry(table.to_string()).or_default().clone()
    }

    /// Drop a table's series (it was unregistered).
    pub fn remove_table(&self, table: &str) {
        let mut map = self.per_table.write().unwrap_or_else(|e| e.into_inner());
        map.remove(table);
    }

    /// A storage interceptor that counts a table's requests by kind.
    pub fn request_counter(&self, table: &str) -> Arc<dyn Interceptor> {
        Arc::new(RequestCounter(self.table(table)))
    }

    /// The Prometheus text exposition of every metric, whole (the tests read it so).
    #[cfg(test)]
    pub fn render(&self) -> String {
        self.exposition(TableSeries::PerTable).collect()
    }

    /// The exposition in parts, made one at a time as they are taken: the process-wide
    /// families first, then each per-table family [`TABLES_PER_PART`] tables at a time. With
    /// 100,000 tables the text is over 100 MB; sent part by part, it never sits in memory whole.
    /// With [`TableSeries::Aggregate`] the per-table families are replaced by one series each
    /// over the owned tables (sums; the largest age), a few kilobytes whatever the fleet.
    pub fn exposition(&self, series: TableSeries) -> Box<dyn Iterator<Item = String> + Send> {
        let mut head = Vec::new();
        // Encoding plain families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut head);
        let mut head = String::from_utf8(head).unwrap_or_default();
        if series == TableSeries::Aggregate {
            let map = self.per_table.read().unwrap_or_else(|e| e.into_inner());
            let owned: Vec<&TableMetrics> = map
                .values()
                .filter(|m| !m.not_owned.load(Ordering::Relaxed))
                .map(|m| &**m)
                .collect();
            let _ = writeln!(
                head,
                "# HELP hudi_keeper_cluster_owned_tables Registered tables this replica owns and polls.\n# TYPE hudi_keeper_cluster_owned_tables gauge\nhudi_keeper_cluster_owned_tables {}",
                owned.len()
            );
            render_aggregate(&mut head, &owned);
            return Box::new(std::iter::once(head));
        }
        // The tables this replica owns, as of now; their values are read as each part is made.
        let tables: Vec<(String, Arc<TableMetrics>)> = self
            .per_table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, m)| !m.not_owned.load(Ordering::Relaxed))
            .map(|(t, m)| (t.clone(), m.clone()))
            .collect();
        let _ = writeln!(
            head,
            "# HELP hudi_keeper_cluster_owned_tables Registered tables this replica owns and polls.\n# TYPE hudi_keeper_cluster_owned_tables gauge\nhudi_keeper_cluster_owned_tables {}",
            tables.len()
        );
        let tables = Arc::new(tables);
        let parts = tables.len().div_ceil(TABLES_PER_PART).max(1);
        let families = {
            let mut count = Part::counting();
            render_tables(&mut count);
            count.seen
        };
        Box::new(
            std::iter::once(head).chain((0..families).flat_map(move |family| {
                let tables = tables.clone();
                (0..parts).map(move |part| {
                    let from = (part * TABLES_PER_PART).min(tables.len());
                    let to = (from + TABLES_PER_PART).min(tables.len());
                    let mut p = Part {
                        out: String::new(),
                        tables: &tables[from..to],
                        family,
                        header: part == 0,
                        seen: 0,
                    };
                    render_tables(&mut p);
                    p.out
                })
            })),
        )
    }
}

/// Which series the exposition has for the tables (`server.table_metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableSeries {
    /// One series per table (and label combination): about 1.3 KB of text a table.
    #[default]
    PerTable,
    /// One series per family over the owned tables, no `table` label: what a fleet of many
    /// thousand tables scrapes. Which table needs attention is then read from the API.
    Aggregate,
}

/// The per-table families as one series each over `tables` (no `table` label): counters and
/// counts summed, ages the largest, flags counted.
fn render_aggregate(out: &mut String, tables: &[&TableMetrics]) {
    let u = |f: &dyn Fn(&TableMetrics) -> u64| tables.iter().map(|m| f(m)).sum::<u64>();
    let i = |f: &dyn Fn(&TableMetrics) -> i64| tables.iter().map(|m| f(m)).sum::<i64>();
    let max = |f: &dyn Fn(&TableMetrics) -> f64| tables.iter().map(|m| f(m)).fold(0.0, f64::max);
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help} Summed over the owned tables (server.table_metrics = \"aggregate\").");
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };
    head(
        out,
        "hudi_keeper_polls_total",
        "counter",
        "Polls, by outcome.",
    );
    for (k, outcome) in POLL_OUTCOMES.iter().enumerate() {
        let v = u(&|m| load(&m.polls[k]));
        let _ = writeln!(out, "hudi_keeper_polls_total{{outcome=\"{outcome}\"}} {v}");
    }
    let mut pending: BTreeMap<&'static str, i64> = BTreeMap::new();
    for m in tables {
        if let Ok(p) = m.pending.lock() {
            for (action, n) in p.iter() {
                *pending.entry(action).or_default() += n;
            }
        }
    }
    head(
        out,
        "hudi_keeper_pending_instants",
        "gauge",
        "Pending instants at the last polls, by action.",
    );
    for (action, n) in pending {
        let _ = writeln!(
            out,
            "hudi_keeper_pending_instants{{action=\"{action}\"}} {n}"
        );
    }
    head(
        out,
        "hudi_keeper_oldest_pending_instant_age_seconds",
        "gauge",
        "Age of the oldest pending write (the largest over the tables).",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_oldest_pending_instant_age_seconds {}",
        max(&|m| m.oldest_pending_age.get())
    );
    head(out, "hudi_keeper_stalest_heartbeat_age_seconds", "gauge", "Heartbeat age of the pending write whose heartbeat is oldest (the largest over the tables).");
    let _ = writeln!(
        out,
        "hudi_keeper_stalest_heartbeat_age_seconds {}",
        max(&|m| m.stalest_heartbeat_age.get())
    );
    head(
        out,
        "hudi_keeper_failed_instants",
        "gauge",
        "Pending writes judged failed at the last polls.",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_failed_instants {}",
        i(&|m| m.failed_instants.load(Ordering::Relaxed))
    );
    head(
        out,
        "hudi_keeper_pending_writes_left_alone",
        "gauge",
        "Pending writes without heartbeat file left alone at the last polls, by reason.",
    );
    for (k, reason) in LEFT_ALONE_REASONS.iter().enumerate() {
        let v = i(&|m| m.left_alone[k].load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "hudi_keeper_pending_writes_left_alone{{reason=\"{reason}\"}} {v}"
        );
    }
    head(
        out,
        "hudi_keeper_eager_writer_suspected",
        "gauge",
        "Tables whose last poll found a pending write that looks like an EAGER writer's.",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_eager_writer_suspected {}",
        u(&|m| u64::from(m.eager_writer_suspected.load(Ordering::Relaxed)))
    );
    head(
        out,
        "hudi_keeper_rollbacks_total",
        "counter",
        "Rollbacks of failed writes, by outcome and trigger.",
    );
    for (k, (outcome, trigger)) in [
        ("success", "auto"),
        ("failure", "auto"),
        ("success", "manual"),
        ("failure", "manual"),
    ]
    .iter()
    .enumerate()
    {
        let v = u(&|m| load(&m.rollbacks[k]));
        let _ = writeln!(
            out,
            "hudi_keeper_rollbacks_total{{outcome=\"{outcome}\",trigger=\"{trigger}\"}} {v}"
        );
    }
    head(
        out,
        "hudi_keeper_files_deleted_total",
        "counter",
        "Data files deleted by rollbacks.",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_files_deleted_total {}",
        u(&|m| load(&m.files_deleted))
    );
    head(
        out,
        "hudi_keeper_object_store_requests_total",
        "counter",
        "Object-store requests, by kind.",
    );
    for (k, kind) in OpKind::ALL.iter().enumerate() {
        let v = u(&|m| load(&m.requests[k]));
        let _ = writeln!(
            out,
            "hudi_keeper_object_store_requests_total{{kind=\"{}\"}} {v}",
            kind.as_str()
        );
    }
    head(
        out,
        "hudi_keeper_lock_waits_total",
        "counter",
        "Times taking a table lock had to wait.",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_lock_waits_total {}",
        u(&|m| load(&m.lock_waits))
    );
    head(
        out,
        "hudi_keeper_lock_wait_seconds_total",
        "counter",
        "Time spent waiting for table locks.",
    );
    let _ = writeln!(
        out,
        "hudi_keeper_lock_wait_seconds_total {}",
        u(&|m| load(&m.lock_wait_ms)) as f64 / 1000.0
    );
}

/// Tables per part of the exposition (about 100 KB of text for a family of one line each).
pub const TABLES_PER_PART: usize = 2_000;

/// One part of the per-table exposition: family number `family`, for `tables`.
struct Part<'a> {
    out: String,
    tables: &'a [(String, Arc<TableMetrics>)],
    family: usize,
    /// With the family's `# HELP` and `# TYPE` lines (its first part).
    header: bool,
    /// Families passed so far.
    seen: usize,
}

impl Part<'static> {
    /// A part that writes nothing and counts the families.
    fn counting() -> Self {
        Part {
            out: String::new(),
            tables: &[],
            family: usize::MAX,
            header: false,
            seen: 0,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// One per-table family: header, then one line per table (and label combination) that `lines`
/// writes; only where it is the family `part` is for.
fn family(
    part: &mut Part<'_>,
    name: &str,
    kind: &str,
    help: &str,
    mut lines: impl FnMut(&mut String, &str, &TableMetrics),
) {
    let this = part.seen;
    part.seen += 1;
    if this != part.family {
        return;
    }
    if part.header {
        let _ = writeln!(part.out, "# HELP {name} {help}");
        let _ = writeln!(part.out, "# TYPE {name} {kind}");
    }
    for (table, m) in part.tables {
        lines(&mut part.out, table, m);
    }
}

/// A per-table family with one value per table.
fn scalar(
    part: &mut Part<'_>,
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&TableMetrics) -> String,
) {
    family(part, name, kind, help, |o, t, m| {
        let _ = writeln!(o, "{name}{{table=\"{t}\"}} {}", value(m));
    });
}

fn render_tables(out: &mut Part<'_>) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    family(
        out,
        "hudi_keeper_polls_total",
        "counter",
        "Polls of a table, by outcome (ok, error, skipped_halted, skipped_busy).",
        |o, t, m| {
            for (i, outcome) in POLL_OUTCOMES.iter().enumerate() {
                let v = load(&m.polls[i]);
                if i < 2 || v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_polls_total{{outcome=\"{outcome}\",table=\"{t}\"}} {v}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_last_poll_timestamp_seconds",
        "gauge",
        "Unix time at which the last poll of a table finished (0 before the first).",
        |m| m.last_poll_timestamp.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_last_poll_duration_seconds",
        "gauge",
        "Wall time of the last poll of a table.",
        |m| m.last_poll_duration.get().to_string(),
    );
    family(
        out,
        "hudi_keeper_pending_instants",
        "gauge",
        "Pending instants on the active timeline at the last poll, by action.",
        |o, t, m| {
            if let Ok(p) = m.pending.lock() {
                for (action, n) in p.iter() {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_pending_instants{{action=\"{action}\",table=\"{t}\"}} {n}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_oldest_pending_instant_age_seconds",
        "gauge",
        "Age of the oldest pending write at the last poll (0 when none).",
        |m| m.oldest_pending_age.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_stalest_heartbeat_age_seconds",
        "gauge",
        "Heartbeat age of the pending write whose heartbeat is oldest (0 when none).",
        |m| m.stalest_heartbeat_age.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_failed_instants",
        "gauge",
        "Pending writes judged failed at the last poll (observe tables keep them).",
        |m| m.failed_instants.load(Ordering::Relaxed).to_string(),
    );
    family(
        out,
        "hudi_keeper_pending_writes_left_alone",
        "gauge",
        "Pending writes without heartbeat file that nothing proves dead, left alone at the last poll, by reason (no_heartbeat_unconfirmed: no heartbeat ever seen on the table; awaiting_newer_write: the newest write under EAGER; age_unknown).",
        |o, t, m| {
            for (i, reason) in LEFT_ALONE_REASONS.iter().enumerate() {
                let v = m.left_alone[i].load(Ordering::Relaxed);
                if i < 2 || v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_pending_writes_left_alone{{reason=\"{reason}\",table=\"{t}\"}} {v}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_eager_writer_suspected",
        "gauge",
        "1 when the last poll found a pending write without heartbeat file on a table judged LAZY that looks like an EAGER writer's (younger than min_instant_age, or on a table with heartbeat files).",
        |m| u8::from(m.eager_writer_suspected.load(Ordering::Relaxed)).to_string(),
    );
    family(
        out,
        "hudi_keeper_rollbacks_total",
        "counter",
        "Rollbacks of failed writes, by outcome (success, failure) and trigger (auto, manual).",
        |o, t, m| {
            for (i, (outcome, trigger)) in [
                ("success", "auto"),
                ("failure", "auto"),
                ("success", "manual"),
                ("failure", "manual"),
            ]
            .iter()
            .enumerate()
            {
                let v = load(&m.rollbacks[i]);
                if i < 2 || v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_rollbacks_total{{outcome=\"{outcome}\",table=\"{t}\",trigger=\"{trigger}\"}} {v}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_files_deleted_total",
        "counter",
        "Data files deleted by rollbacks.",
        |m| load(&m.files_deleted).to_string(),
    );
    family(
        out,
        "hudi_keeper_object_store_requests_total",
        "counter",
        "Object-store requests, by kind (list, list_dir, get, head, put, put_if_absent, delete, put_if_match).",
        |o, t, m| {
            for (i, kind) in OpKind::ALL.iter().enumerate() {
                let v = load(&m.requests[i]);
                if v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_object_store_requests_total{{kind=\"{}\",table=\"{t}\"}} {v}",
                        kind.as_str()
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_lock_waits_total",
        "counter",
        "Times taking the table lock had to wait for another holder.",
        |m| load(&m.lock_waits).to_string(),
    );
    scalar(
        out,
        "hudi_keeper_lock_wait_seconds_total",
        "counter",
        "Time spent waiting for the table lock.",
        |m| (load(&m.lock_wait_ms) as f64 / 1000.0).to_string(),
    );
    scalar(
        out,
        "hudi_keeper_table_halted",
        "gauge",
        "1 when a table is halted after repeated failures (resume it through the API).",
        |m| u8::from(m.halted.load(Ordering::Relaxed)).to_string(),
    );
}

#[derive(Debug)]
struct RequestCounter(Arc<TableMetrics>);

impl Interceptor for RequestCounter {
    fn before(&self, op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        if let Some(i) = OpKind::ALL.iter().position(|k| *k == op) {
            self.0.requests[i].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_renders_once_with_help_and_type() {
        let m = Metrics::new();
        let t = m.table("t");
        t.poll("ok");
        t.rollback(true, "manual");
        t.set_pending(vec![("deltacommit", 2)]);
        t.set_writers(
            [
                ("no_heartbeat_unconfirmed", 0),
                ("awaiting_newer_write", 1),
                ("age_unknown", 0),
            ],
            true,
        );
        t.requests[1].fetch_add(3, Ordering::Relaxed);
        m.poll_duration.observe(0.2);
        let text = m.render();
        for line in [
            r#"hudi_keeper_polls_total{outcome="ok",table="t"} 1"#,
            r#"hudi_keeper_rollbacks_total{outcome="success",table="t",trigger="manual"} 1"#,
            r#"hudi_keeper_rollbacks_total{outcome="failure",table="t",trigger="auto"} 0"#,
            r#"hudi_keeper_pending_instants{action="deltacommit",table="t"} 2"#,
            r#"hudi_keeper_pending_writes_left_alone{reason="no_heartbeat_unconfirmed",table="t"} 0"#,
            r#"hudi_keeper_pending_writes_left_alone{reason="awaiting_newer_write",table="t"} 1"#,
            r#"hudi_keeper_eager_writer_suspected{table="t"} 1"#,
            r#"hudi_keeper_object_store_requests_total{kind="list_dir",table="t"} 3"#,
            r#"hudi_keeper_build_info{version="#,
            "hudi_keeper_poll_duration_seconds_bucket",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        assert!(
            !text.contains(r#"reason="age_unknown""#),
            "a rare reason is written only when it occurs:\n{text}"
        );
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(helps, types);
        let mut names: Vec<_> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .collect();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "a family is written twice");
        m.remove_table("t");
        assert!(!m.render().contains("table=\"t\""));
    }

    #[test]
    fn the_aggregate_exposition_sums_the_owned_tables_without_a_table_label() {
        let m = Metrics::new();
        for (name, failed, age) in [("a", 1, 30.0), ("b", 2, 90.0), ("c", 4, 600.0)] {
            let t = m.table(name);
            t.poll("ok");
            t.failed_instants.store(failed, Ordering::Relaxed);
            t.oldest_pending_age.set(age);
            t.set_pending(vec![("deltacommit", 1)]);
            t.rollback(true, "auto");
        }
        // Another replica owns `c`: it counts nowhere here.
        m.table("c").not_owned.store(true, Ordering::Relaxed);
        let text: String = m.exposition(TableSeries::Aggregate).collect();
        for line in [
            r#"hudi_keeper_polls_total{outcome="ok"} 2"#,
            "hudi_keeper_failed_instants 3\n",
            "hudi_keeper_oldest_pending_instant_age_seconds 90\n",
            r#"hudi_keeper_pending_instants{action="deltacommit"} 2"#,
            r#"hudi_keeper_rollbacks_total{outcome="success",trigger="auto"} 2"#,
            "hudi_keeper_cluster_owned_tables 2\n",
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        assert!(!text.contains("table=\""), "{text}");
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(helps, types);
        // A few kilobytes, whatever the fleet.
        for i in 0..2_000 {
            m.table(&format!("t{i:05}"));
        }
        let all: String = m.exposition(TableSeries::PerTable).collect();
        let agg: String = m.exposition(TableSeries::Aggregate).collect();
        assert!(agg.len() < 8 * 1024, "{}", agg.len());
        assert!(
            all.len() > 100 * agg.len(),
            "{} vs {}",
            all.len(),
            agg.len()
        );
    }
}
