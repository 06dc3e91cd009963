//! The metrics of the discovery sources, labelled by source.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts};

/// Outcomes of a scan (`hudi_keeper_discovery_scans_total{outcome}`).
pub const OUTCOMES: [&str; 3] = ["complete", "incomplete", "failed"];

/// Every discovery metric.
#[derive(Debug, Clone)]
pub struct DiscoveryMetrics {
    pub tables: IntGaugeVec,
    pub scan_duration: HistogramVec,
    pub scan_errors: IntCounterVec,
    pub scans: IntCounterVec,
    pub failed_in_a_row: IntGaugeVec,
}

fn must<T>(r: prometheus::Result<T>) -> T {
    // Constant, valid definitions: a failure is a programming error the tests catch.
    r.unwrap_or_else(|e| panic!("invalid metric definition: {e}"))
}

impl DiscoveryMetrics {
    /// The metrics, with a series for each of `sources` from the start.
    pub fn new(sources: &[&str]) -> Self {
        let tables = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_discovered_tables",
                "Tables a [[discover]] source registered (found by it and not registered by the config, the API or another source).",
            ),
            &["source"],
        ));
        let scan_duration = must(HistogramVec::new(
            HistogramOpts::new(
                "hudi_keeper_discovery_scan_duration_seconds",
                "Wall time of one scan of a [[discover]] source.",
            )
            .buckets(vec![0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0]),
            &["source"],
        ));
        let scan_errors = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_discovery_scan_errors_total",
                "Scans of a [[discover]] source that failed or met a failed request (a scan only cut short by its budget is not counted).",
            ),
            &["source"],
        ));
        let scans = must(IntCounterVec::new(
            Opts::new(
                "hudi_keeper_discovery_scans_total",
                "Scans of a [[discover]] source by outcome: complete, incomplete (cut short by max_requests or a failed request: drops nothing), failed (could not run, or timed out).",
            ),
            &["source", "outcome"],
        ));
        let failed_in_a_row = must(IntGaugeVec::new(
            Opts::new(
                "hudi_keeper_discovery_failed_scans_in_a_row",
                "Scans in a row of a [[discover]] source that failed or were incomplete (0 after a complete one): while it is above 0 the source drops no table.",
            ),
            &["source"],
        ));
        for s in sources {
            tables.with_label_values(&[s]).set(0);
            let _ = scan_duration.with_label_values(&[s]);
            scan_errors.with_label_values(&[s]).reset();
            failed_in_a_row.with_label_values(&[s]).set(0);
            for o in OUTCOMES {
                scans.with_label_values(&[s, o]).reset();
            }
        }
        Self {
            tables,
            scan_duration,
            scan_errors,
            scans,
            failed_in_a_row,
        }
    }

    /// Every collector, to register.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.tables.clone()),
            Box::new(self.scan_duration.clone()),
            Box::new(self.scan_errors.clone()),
            Box::new(self.scans.clone()),
            Box::new(self.failed_in_a_row.clone()),
        ]
    }
}
