//! The daemon's Prometheus metrics, in one registry. Labels name tables (and kinds, outcomes,
//! triggers), never instants.

use std::sync::Arc;

use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

/// Every metric the daemon exports.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    pub polls: IntCounterVec,
    pub poll_duration: HistogramVec,
    pub last_poll: GaugeVec,
    pub pending_instants: IntGaugeVec,
    pub oldest_pending_age: GaugeVec,
    pub stalest_heartbeat_age: GaugeVec,
    pub failed_instants: IntGaugeVec,
    pub rollbacks: IntCounterVec,
    pub rollback_duration: HistogramVec,
    pub files_deleted: IntCounterVec,
    pub requests: IntCounterVec,
    pub lock_waits: IntCounterVec,
    pub lock_wait_seconds: prometheus::CounterVec,
    pub table_halted: IntGaugeVec,
    pub tables: IntGauge,
    pub tables_halted: IntGauge,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // The metric definitions below are constant and valid; a failure is a programming error
    // caught by the tests.
    r.unwrap_or_else(|e| panic!("invalid metric definition: {e}"))
}

impl Metrics {
    /// Create and register every metric.
    pub fn new() -> Self {
        let registry = Registry::new();
        let secs = vec![
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
        ];
        let polls = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_polls_total",
                "Polls of a table, by outcome (ok, error, skipped_halted).",
            ),
            &["table", "outcome"],
        ));
        let poll_duration = must(HistogramVec::new(
            HistogramOpts::new(
                "hudi_keeper_poll_duration_seconds",
                "Wall time of one poll of a table, rollbacks included.",
            )
            .buckets(secs.clone()),
            &["table"],
        ));
        let last_poll = must(GaugeVec::new(
            Opts::new(
                "hudi_keeper_last_poll_timestamp_seconds",
                "Unix time at which the last poll of a table finished.",
            ),
            &["table"],
        ));
        let pending_instants = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_pending_instants",
                "Pending instants on the active timeline at the last poll, by action.",
            ),
            &["table", "action"],
        ));
        let oldest_pending_age = must(GaugeVec::new(
            Opts::new(
                "hudi_keeper_oldest_pending_instant_age_seconds",
                "Age of the oldest pending write instant at the last poll (0 when none).",
            ),
            &["table"],
        ));
        let stalest_heartbeat_age = must(GaugeVec::new(
            Opts::new(
                "hudi_keeper_stalest_heartbeat_age_seconds",
                "Heartbeat age of the pending write whose heartbeat is oldest (0 when none).",
            ),
            &["table"],
        ));
        let failed_instants = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_failed_instants",
                "Pending writes judged failed at the last poll (observe tables keep them).",
            ),
            &["table"],
        ));
        let rollbacks = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_rollbacks_total",
                "Rollbacks of failed writes, by outcome (success, failure) and trigger (auto, manual).",
            ),
            &["table", "outcome", "trigger"],
        ));
        let rollback_duration = must(HistogramVec::new(
            HistogramOpts::new(
                "hudi_keeper_rollback_duration_seconds",
                "Wall time of one successful rollback.",
            )
            .buckets(secs),
            &["table"],
        ));
        let files_deleted = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_files_deleted_total",
                "Data files deleted by rollbacks.",
            ),
            &["table"],
        ));
        let requests = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_object_store_requests_total",
                "Object-store requests, by kind (list, list_dir, get, head, put, put_if_absent, put_if_match, delete).",
            ),
            &["table", "kind"],
        ));
        let lock_waits = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_lock_waits_total",
                "Times taking the table lock had to wait for another holder.",
            ),
            &["table"],
        ));
        let lock_wait_seconds = must(prometheus::CounterVec::new(
            Opts::new(
                "hudi_keeper_lock_wait_seconds_total",
                "Time spent waiting for the table lock.",
            ),
            &["table"],
        ));
        let table_halted = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_table_halted",
                "1 when a table is halted after repeated failures (resume it through the API).",
            ),
            &["table"],
        ));
        let tables = must(IntGauge::new("hudi_keeper_tables", "Registered tables."));
        let tables_halted = must(IntGauge::new(
            "hudi_keeper_tables_halted",
            "Registered tables that are halted.",
        ));
        let build_info = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_build_info",
                "Always 1; the labels say which build runs.",
            ),
            &["version"],
        ));
        let up_since = must(Gauge::new(
            "hudi_keeper_start_time_seconds",
            "Unix time at which the daemon started.",
        ));
        for c in [
            Box::new(polls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(poll_duration.clone()),
            Box::new(last_poll.clone()),
            Box::new(pending_instants.clone()),
            Box::new(oldest_pending_age.clone()),
            Box::new(stalest_heartbeat_age.clone()),
            Box::new(failed_instants.clone()),
            Box::new(rollbacks.clone()),
            Box::new(rollback_duration.clone()),
            Box::new(files_deleted.clone()),
            Box::new(requests.clone()),
            Box::new(lock_waits.clone()),
            Box::new(lock_wait_seconds.clone()),
            Box::new(table_halted.clone()),
            Box::new(tables.clone()),
            Box::new(tables_halted.clone()),
            Box::new(build_info.clone()),
            Box::new(up_since.clone()),
        ] {
            must(registry.register(c));
        }
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        up_since.set(chrono::Utc::now().timestamp() as f64);
        Self {
            registry,
            polls,
            poll_duration,
            last_poll,
            pending_instants,
            oldest_pending_age,
            stalest_heartbeat_age,
            failed_instants,
            rollbacks,
            rollback_duration,
            files_deleted,
            requests,
            lock_waits,
            lock_wait_seconds,
            table_halted,
            tables,
            tables_halted,
        }
    }

    /// Start a table's series at zero, so dashboards and alerts see it before anything happens.
    pub fn init_table(&self, table: &str) {
        for outcome in ["ok", "error", "skipped_halted"] {
            self.polls.with_label_values(&[table, outcome]);
        }
        for outcome in ["success", "failure"] {
            for trigger in ["auto", "manual"] {
                self.rollbacks.with_label_values(&[table, outcome, trigger]);
            }
        }
        self.files_deleted.with_label_values(&[table]);
        self.lock_waits.with_label_values(&[table]);
        self.lock_wait_seconds.with_label_values(&[table]);
        self.table_halted.with_label_values(&[table]).set(0);
        self.oldest_pending_age.with_label_values(&[table]).set(0.0);
        self.stalest_heartbeat_age
            .with_label_values(&[table])
            .set(0.0);
        self.failed_instants.with_label_values(&[table]).set(0);
        for kind in OpKind::ALL {
            self.requests.with_label_values(&[table, kind.as_str()]);
        }
    }

    /// Drop a table's series (it was unregistered).
    pub fn remove_table(&self, table: &str) {
        for outcome in ["ok", "error", "skipped_halted"] {
            let _ = self.polls.remove_label_values(&[table, outcome]);
        }
        for outcome in ["success", "failure"] {
            for trigger in ["auto", "manual"] {
                let _ = self
                    .rollbacks
                    .remove_label_values(&[table, outcome, trigger]);
            }
        }
        for kind in OpKind::ALL {
            let _ = self.requests.remove_label_values(&[table, kind.as_str()]);
        }
        let _ = self.poll_duration.remove_label_values(&[table]);
        let _ = self.rollback_duration.remove_label_values(&[table]);
        let _ = self.last_poll.remove_label_values(&[table]);
        let _ = self.files_deleted.remove_label_values(&[table]);
        let _ = self.lock_waits.remove_label_values(&[table]);
        let _ = self.lock_wait_seconds.remove_label_values(&[table]);
        let _ = self.table_halted.remove_label_values(&[table]);
        let _ = self.oldest_pending_age.remove_label_values(&[table]);
        let _ = self.stalest_heartbeat_age.remove_label_values(&[table]);
        let _ = self.failed_instants.remove_label_values(&[table]);
        self.clear_pending(table);
    }

    /// Reset a table's pending-instant gauges before setting the current ones.
    pub fn clear_pending(&self, table: &str) {
        for action in ACTIONS {
            let _ = self.pending_instants.remove_label_values(&[table, action]);
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let encoder = TextEncoder::new();
        if encoder.encode(&self.registry.gather(), &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }

    /// A storage interceptor that counts a table's requests by kind.
    pub fn request_counter(&self, table: &str) -> Arc<dyn Interceptor> {
        Arc::new(RequestCounter {
            table: table.to_string(),
            requests: self.requests.clone(),
        })
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

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

#[derive(Debug)]
struct RequestCounter {
    table: String,
    requests: IntCounterVec,
}

impl Interceptor for RequestCounter {
    fn before(&self, op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        self.requests
            .with_label_values(&[self.table.as_str(), op.as_str()])
            .inc();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_renders_with_units_and_help() {
        let m = Metrics::new();
        m.init_table("t");
        m.poll_duration.with_label_values(&["t"]).observe(0.2);
        m.rollback_duration.with_label_values(&["t"]).observe(1.0);
        m.last_poll.with_label_values(&["t"]).set(1.0);
        m.pending_instants
            .with_label_values(&["t", "deltacommit"])
            .set(1);
        let text = m.render();
        for name in [
            "hudi_keeper_polls_total",
            "hudi_keeper_poll_duration_seconds_bucket",
            "hudi_keeper_rollbacks_total",
            "hudi_keeper_object_store_requests_total",
            "hudi_keeper_build_info",
            "hudi_keeper_pending_instants",
        ] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
        m.remove_table("t");
        assert!(!m.render().contains("table=\"t\""));
    }
}
