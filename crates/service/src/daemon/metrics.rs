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
                "Problems with state_dir/tables.json (tables registered through the API), by kind: unreadable at start, an entry not restored, a failed write.",
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

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding plain families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        let mut out = String::from_utf8(buf).unwrap_or_default();
        let map = self.per_table.read().unwrap_or_else(|e| e.into_inner());
        let owned = map
            .values()
            .filter(|m| !m.not_owned.load(Ordering::Relaxed))
            .count();
        let _ = writeln!(
            out,
            "# HELP hudi_keeper_cluster_owned_tables Registered tables this replica owns and polls.\n# TYPE hudi_keeper_cluster_owned_tables gauge\nhudi_keeper_cluster_owned_tables {owned}"
        );
        render_tables(&mut out, &map);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// One per-table family: header, then one line per table (and label combination) that `lines`
/// writes.
fn family(
    out: &mut String,
    map: &BTreeMap<String, Arc<TableMetrics>>,
    name: &str,
    kind: &str,
    help: &str,
    mut lines: impl FnMut(&mut String, &str, &TableMetrics),
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (table, m) in map {
        if !m.not_owned.load(Ordering::Relaxed) {
            lines(out, table, m);
        }
    }
}

/// A per-table family with one value per table.
fn scalar(
    out: &mut String,
    map: &BTreeMap<String, Arc<TableMetrics>>,
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&TableMetrics) -> String,
) {
    family(out, map, name, kind, help, |o, t, m| {
        let _ = writeln!(o, "{name}{{table=\"{t}\"}} {}", value(m));
    });
}

fn render_tables(out: &mut String, map: &BTreeMap<String, Arc<TableMetrics>>) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    family(
        out,
        map,
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
        map,
        "hudi_keeper_last_poll_timestamp_seconds",
        "gauge",
        "Unix time at which the last poll of a table finished (0 before the first).",
        |m| m.last_poll_timestamp.get().to_string(),
    );
    scalar(
        out,
        map,
        "hudi_keeper_last_poll_duration_seconds",
        "gauge",
        "Wall time of the last poll of a table.",
        |m| m.last_poll_duration.get().to_string(),
    );
    family(
        out,
        map,
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
        map,
        "hudi_keeper_oldest_pending_instant_age_seconds",
        "gauge",
        "Age of the oldest pending write at the last poll (0 when none).",
        |m| m.oldest_pending_age.get().to_string(),
    );
    scalar(
        out,
        map,
        "hudi_keeper_stalest_heartbeat_age_seconds",
        "gauge",
        "Heartbeat age of the pending write whose heartbeat is oldest (0 when none).",
        |m| m.stalest_heartbeat_age.get().to_string(),
    );
    scalar(
        out,
        map,
        "hudi_keeper_failed_instants",
        "gauge",
        "Pending writes judged failed at the last poll (observe tables keep them).",
        |m| m.failed_instants.load(Ordering::Relaxed).to_string(),
    );
    family(
        out,
        map,
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
        map,
        "hudi_keeper_eager_writer_suspected",
        "gauge",
        "1 when the last poll found a young pending write without heartbeat file on a table judged LAZY: EAGER writers (no heartbeats) seem to write it.",
        |m| u8::from(m.eager_writer_suspected.load(Ordering::Relaxed)).to_string(),
    );
    family(
        out,
        map,
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
        map,
        "hudi_keeper_files_deleted_total",
        "counter",
        "Data files deleted by rollbacks.",
        |m| load(&m.files_deleted).to_string(),
    );
    family(
        out,
        map,
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
        map,
        "hudi_keeper_lock_waits_total",
        "counter",
        "Times taking the table lock had to wait for another holder.",
        |m| load(&m.lock_waits).to_string(),
    );
    scalar(
        out,
        map,
        "hudi_keeper_lock_wait_seconds_total",
        "counter",
        "Time spent waiting for the table lock.",
        |m| (load(&m.lock_wait_ms) as f64 / 1000.0).to_string(),
    );
    scalar(
        out,
        map,
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
}
