//! The daemon's Prometheus metrics. Labels name tables (and kinds, outcomes, triggers, actions),
//! never instants.
//!
//! Process-wide metrics live in one `prometheus` registry. Per-table metrics are kept as plain
//! atomics in one small struct per table and written into the same exposition at scrape time:
//! the `prometheus` crate keeps about a kilobyte per labelled series (each child copies its
//! descriptor), which at 10,000 tables and a dozen series each would be well over 100 MiB.

mod counts;
mod tables;

pub use super::config::TableSeries;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use hudi_keeper_core::storage::Interceptor;
use prometheus::{Encoder, Gauge, Histogram, HistogramOpts, IntGauge, Opts, Registry, TextEncoder};

pub use tables::TableMetrics;
use tables::{render_aggregate, render_tables, Part, TABLES_PER_PART};

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

/// Every metric the daemon exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub poll_duration: Histogram,
    pub rollback_duration: Histogram,
    /// Wall time of complete audits (all tables).
    pub audit_duration: Histogram,
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
    per_table: RwLock<BTreeMap<Arc<str>, Arc<TableMetrics>>>,
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
        let audit_duration = must(Histogram::with_opts(
            HistogramOpts::new(
                "hudi_keeper_audit_duration_seconds",
                "Wall time of one complete audit of a table (all tables).",
            )
            .buckets(vec![1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 7200.0]),
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
            Box::new(audit_duration.clone()),
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
            audit_duration,
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
    /// Add `collectors` (another part's metrics, the discovery sources') to the exposition.
    pub fn register(&self, collectors: Vec<Box<dyn prometheus::core::Collector>>) {
        for c in collectors {
            must(self.registry.register(c));
        }
    }

    pub fn table(&self, table: &str) -> Arc<TableMetrics> {
        self.table_named(&Arc::from(table))
    }

    /// [`Metrics::table`], its series keyed by `table` itself (the name the table's state
    /// holds: no copy of it).
    pub fn table_named(&self, table: &Arc<str>) -> Arc<TableMetrics> {
        let mut map = self.per_table.write().unwrap_or_else(|e| e.into_inner());
        map.entry(table.clone()).or_default().clone()
    }

    /// Keep `metrics` as the series of `table` again (a table registered again as it was).
    pub fn put_table(&self, table: Arc<str>, metrics: Arc<TableMetrics>) {
        let mut map = self.per_table.write().unwrap_or_else(|e| e.into_inner());
        map.insert(table, metrics);
    }

    /// Drop a table's series (it was unregistered).
    pub fn remove_table(&self, table: &str) {
        let mut map = self.per_table.write().unwrap_or_else(|e| e.into_inner());
        map.remove(table);
    }

    /// A storage interceptor that counts a table's requests by kind.
    pub fn request_counter(&self, table: &str) -> Arc<dyn Interceptor> {
        self.table(table)
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
            let idle = owned
                .iter()
                .filter(|m| m.idle.load(Ordering::Relaxed))
                .count();
            owned_tables(&mut head, owned.len(), idle);
            render_aggregate(&mut head, &owned);
            return Box::new(std::iter::once(head));
        }
        // The tables this replica owns, as of now; their values are read as each part is made.
        let tables: Vec<(Arc<str>, Arc<TableMetrics>)> = self
            .per_table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, m)| !m.not_owned.load(Ordering::Relaxed))
            .map(|(t, m)| (t.clone(), m.clone()))
            .collect();
        let idle = tables
            .iter()
            .filter(|(_, m)| m.idle.load(Ordering::Relaxed))
            .count();
        owned_tables(&mut head, tables.len(), idle);
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

/// The `hudi_keeper_cluster_owned_tables` family: `n` tables owned; and
/// `hudi_keeper_tables_polled_idle`: `idle` of them polled at their `idle_poll_interval`.
fn owned_tables(out: &mut String, n: usize, idle: usize) {
    let _ = writeln!(
        out,
        "# HELP hudi_keeper_cluster_owned_tables Registered tables this replica owns and polls.\n# TYPE hudi_keeper_cluster_owned_tables gauge\nhudi_keeper_cluster_owned_tables {n}"
    );
    let _ = writeln!(
        out,
        "# HELP hudi_keeper_tables_polled_idle Tables this replica owns that are idle (nothing pending, timeline unchanged for idle_after) and polled at their idle_poll_interval; the others are polled at poll_interval.\n# TYPE hudi_keeper_tables_polled_idle gauge\nhudi_keeper_tables_polled_idle {idle}"
    );
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_table_has_no_change_or_audit_counts_until_its_first() {
        let m = Metrics::new();
        let idle = m.table("idle");
        idle.poll("ok");
        let text = m.render();
        assert!(text.contains(
            "hudi_keeper_rollbacks_total{outcome=\"success\",table=\"idle\",trigger=\"auto\"} 0"
        ));
        assert!(text.contains("hudi_keeper_files_deleted_total{table=\"idle\"} 0"));
        assert!(idle.changes.get().is_none() && idle.audits.get().is_none());
        // An idle poll's zeros make nothing either; the first pending instant does.
        idle.set_pending(Vec::new());
        idle.set_writers(
            [
                ("no_heartbeat_unconfirmed", 0),
                ("awaiting_newer_write", 0),
                ("age_unknown", 0),
            ],
            false,
        );
        assert!(idle.pending.get().is_none());
        assert!(m
            .render()
            .contains("hudi_keeper_failed_instants{table=\"idle\"} 0"));
        idle.set_pending(vec![("commit", 1)]);
        assert!(idle.pending.get().is_some());
        assert!(m
            .render()
            .contains("hudi_keeper_pending_instants{action=\"commit\",table=\"idle\"} 1"));
        idle.rollback(true, "auto");
        assert!(idle.changes.get().is_some());
        assert!(m.render().contains(
            "hudi_keeper_rollbacks_total{outcome=\"success\",table=\"idle\",trigger=\"auto\"} 1"
        ));
        // A table's storage counts its requests into its own metrics, no wrapper between.
        let counter = m.request_counter("idle");
        assert!(std::ptr::addr_eq(Arc::as_ptr(&counter), Arc::as_ptr(&idle)));
        // Its series are keyed by the name its state holds, not a copy.
        let name: Arc<str> = Arc::from("shared");
        m.table_named(&name);
        let map = m.per_table.read().unwrap();
        let (key, _) = map.get_key_value("shared").unwrap();
        assert!(Arc::ptr_eq(key, &name));
    }

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

    fn summary(leftovers: u64) -> crate::daemon::audit_view::AuditSummary {
        use hudi_keeper_core::audit::{Class, Counts};
        let counts = |files, bytes| Counts {
            files,
            bytes,
            oldest_modified: None,
        };
        crate::daemon::audit_view::AuditSummary {
            table_version: 8,
            oldest_active_instant: None,
            archive_complete: true,
            archive_unread: vec![],
            unreadable_metadata: 0,
            data_files: 10 + leftovers,
            other_files: 0,
            logs_opened: 0,
            classes: [
                (Class::Committed, counts(10, 1000)),
                (Class::RollbackLeftover, counts(leftovers, 7 * leftovers)),
                (Class::Orphan, counts(0, 0)),
                (Class::Unknown, counts(0, 0)),
            ]
            .into_iter()
            .collect(),
            partitions_total: 1,
            partitions_with_findings: 0,
            partitions: Default::default(),
            examples: Default::default(),
            metadata_table: Default::default(),
        }
    }

    #[test]
    fn only_a_complete_audit_sets_a_tables_audit_counts() {
        use crate::daemon::audit_view::AuditOutcome;
        let m = Metrics::new();
        let t = m.table("t");
        // Before any complete audit: outcomes and the time (0), no counts.
        t.audit_ended(AuditOutcome::CutShort, Some(&summary(5)));
        let text = m.render();
        assert!(text.contains(r#"hudi_keeper_audits_total{outcome="cut_short",table="t"} 1"#));
        assert!(text.contains(r#"hudi_keeper_audit_last_complete_timestamp_seconds{table="t"} 0"#));
        assert!(!text.contains("hudi_keeper_audit_files{"), "{text}");
        assert!(!text.contains("hudi_keeper_audit_bytes{"), "{text}");
        assert!(text.contains("# TYPE hudi_keeper_audit_files gauge"));
        t.audit_ended(AuditOutcome::Complete, Some(&summary(2)));
        // A later audit cut short or failed leaves the complete one's counts.
        t.audit_ended(AuditOutcome::CutShort, None);
        t.audit_ended(AuditOutcome::Failed, None);
        let text = m.render();
        for line in [
            r#"hudi_keeper_audit_files{class="committed",table="t"} 10"#,
            r#"hudi_keeper_audit_files{class="rollback_leftover",table="t"} 2"#,
            r#"hudi_keeper_audit_bytes{class="rollback_leftover",table="t"} 14"#,
            r#"hudi_keeper_audits_total{outcome="complete",table="t"} 1"#,
            r#"hudi_keeper_audits_total{outcome="cut_short",table="t"} 2"#,
            r#"hudi_keeper_audits_total{outcome="failed",table="t"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
        // Classes that are 0 beyond the first two are left out (as for other labels).
        assert!(!text.contains(r#"class="orphan""#), "{text}");
        assert!(!text.contains(r#"hudi_keeper_audit_last_complete_timestamp_seconds{table="t"} 0"#));
        // Aggregated: summed over the audited tables, without the table label.
        let u = m.table("u");
        u.audit_ended(AuditOutcome::Complete, Some(&summary(1)));
        let agg: String = m.exposition(TableSeries::Aggregate).collect();
        for line in [
            r#"hudi_keeper_audit_files{class="rollback_leftover"} 3"#,
            r#"hudi_keeper_audit_files{class="committed"} 20"#,
            r#"hudi_keeper_audits_total{outcome="cut_short"} 2"#,
        ] {
            assert!(agg.contains(line), "{line} missing:\n{agg}");
        }
    }

    #[test]
    fn the_aggregate_exposition_sums_the_owned_tables_without_a_table_label() {
        let m = Metrics::new();
        for (name, failed, age) in [("a", 1, 30.0), ("b", 2, 90.0), ("c", 4, 600.0)] {
            let t = m.table(name);
            t.poll("ok");
            t.count_pending()
                .failed_instants
                .store(failed, Ordering::Relaxed);
            t.count_pending().oldest_pending_age.set(age);
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
        // About 10 KB with the audit families (issue #33), whatever the number of tables.
        assert!(agg.len() < 12 * 1024, "{}", agg.len());
        assert!(
            all.len() > 100 * agg.len(),
            "{} vs {}",
            all.len(),
            agg.len()
        );
    }
}
