//! The sources at work: each scanned at start and then every `interval`; what a scan found is
//! registered (as the source's, with its defaults), and what two complete scans in a row missed
//! is dropped.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use hudi_keeper_core::discover::{ScanOptions, ScanReport};
use hudi_keeper_core::storage::StorageOptions;
use tracing::{error, info, warn};

use super::metrics::DiscoveryMetrics;
use super::reconcile::SourceState;
use super::{glue, hms, scan};
use crate::daemon::config::{DiscoverSource, SourceKind};
use crate::daemon::Daemon;

/// What the daemon holds of its sources.
#[derive(Debug)]
pub struct Discovery {
    /// Per source (by index in `config.discover`): the tables it registered.
    states: Vec<StdMutex<SourceState>>,
    pub metrics: DiscoveryMetrics,
}

impl Discovery {
    /// The state of `sources`, their metrics registered through `register`.
    pub fn new(sources: &[DiscoverSource]) -> Self {
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        Self {
            states: sources.iter().map(|_| StdMutex::default()).collect(),
            metrics: DiscoveryMetrics::new(&names),
        }
    }

    pub(super) fn state(&self, index: usize) -> Option<std::sync::MutexGuard<'_, SourceState>> {
        self.states
            .get(index)
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// How a scan ended.
enum Outcome {
    Scanned(ScanReport),
    Failed(String),
}

/// `run`'s outcome, failed when it does not end within the source's `scan_timeout`.
async fn within_scan_timeout<E: std::fmt::Display>(
    source: &DiscoverSource,
    run: impl std::future::Future<Output = Result<ScanReport, E>>,
) -> Outcome {
    match tokio::time::timeout(source.scan_timeout, run).await {
        Ok(Ok(report)) => Outcome::Scanned(report),
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Err(_) => Outcome::Failed(format!(
            "the scan did not end within scan_timeout ({} s)",
            source.scan_timeout.as_secs()
        )),
    }
}

impl Daemon {
    /// Start a task per `[[discover]]` source.
    pub(in crate::daemon) fn start_discovery(self: &Arc<Self>) {
        for index in 0..self.config.discover.len() {
            let Ok(i) = u16::try_from(index) else {
                error!("more than 65535 discovery sources: the rest are not scanned");
                return;
            };
            self.tracker.spawn(self.clone().run_source(i));
        }
    }

    async fn run_source(self: Arc<Self>, index: u16) {
        let Some(source) = self.config.discover.get(usize::from(index)) else {
            return;
        };
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.scan_source(index, source) => {}
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(source.interval) => {}
            }
        }
    }

    /// One scan of `source` and what it changes.
    async fn scan_source(self: &Arc<Self>, index: u16, source: &DiscoverSource) {
        let label = source.name.as_str();
        let started = Instant::now();
        let outcome = self.scan(source).await;
        let seconds = started.elapsed().as_secs_f64();
        let m = &self.discovery.metrics;
        m.scan_duration.with_label_values(&[label]).observe(seconds);
        let report = match outcome {
            Outcome::Failed(e) => {
                error!(source = %label, target = %source.target(), error = %e, "discovery: the scan failed; no table is dropped");
                m.scans.with_label_values(&[label, "failed"]).inc();
                m.scan_errors.with_label_values(&[label]).inc();
                self.failed_scan(index);
                return;
            }
            Outcome::Scanned(r) => r,
        };
        let outcome = if report.complete {
            "complete"
        } else {
            "incomplete"
        };
        m.scans.with_label_values(&[label, outcome]).inc();
        if report.problem_count > 0 {
            m.scan_errors.with_label_values(&[label]).inc();
            let first = report.problems.first();
            warn!(source = %label, problems = report.problem_count, first_location = ?first.map(|p| &p.location), first_error = ?first.map(|p| &p.error), "discovery: the scan met failed requests; no table is dropped");
        }
        if report.cut_short {
            warn!(source = %label, max_requests = source.max_requests, "discovery: the scan reached max_requests; no table is dropped (raise max_requests or narrow the prefix)");
        }
        let (added, dropped) = self.apply(index, source, &report).await;
        let (found, complete, requests) = (report.tables.len(), report.complete, report.requests);
        // A scan's report (a location and a name per table found) is gone now: its pages go
        // back, not kept as the daemon's resident memory until the next minute's trim.
        drop(report);
        crate::daemon::serve::release_free_memory();
        info!(source = %label, kind = source.kind.as_str(), found, added, dropped, complete, requests, seconds, "discovery: scanned");
    }

    fn failed_scan(&self, index: u16) {
        let Some(mut state) = self.discovery.state(usize::from(index)) else {
            return;
        };
        state.failed_in_a_row += 1;
        if let Some(s) = self.config.discover.get(usize::from(index)) {
            self.discovery
                .metrics
                .failed_in_a_row
                .with_label_values(&[&s.name])
                .set(state.failed_in_a_row as i64);
        }
    }

    async fn scan(&self, source: &DiscoverSource) -> Outcome {
        match source.kind {
            SourceKind::Glue => return self.scan_glue(source).await,
            SourceKind::HiveMetastore => {
                let uri = source.uri.as_deref().unwrap_or_default();
                let filters = source.filters();
                let run = hms::scan(uri, &source.databases, source.limits(), &filters, |_, _| {});
                return within_scan_timeout(source, run).await;
            }
            SourceKind::Prefix => {}
        }
        let Some(prefix) = source.prefix.as_deref() else {
            return Outcome::Failed("no prefix".into());
        };
        let options = ScanOptions {
            limits: source.limits(),
            filters: source.filters(),
            concurrency: 0,
        };
        let mut storage = self.config.defaults.storage_options.clone();
        storage.extend(source.storage_options.clone());
        let storage = StorageOptions(storage);
        // A client shared with the tables for the defaults' options only (one per bucket).
        let stores = source.storage_options.is_empty().then_some(&self.stores);
        let run = scan::prefix(prefix, &options, &storage, stores, |_| {});
        within_scan_timeout(source, run).await
    }

    async fn scan_glue(&self, source: &DiscoverSource) -> Outcome {
        let mut options = self.config.defaults.storage_options.clone();
        options.extend(source.storage_options.clone());
        let client = match glue::GlueClient::new(
            source.region.as_deref().unwrap_or_default(),
            source.endpoint.as_deref(),
            source.catalog_id.clone(),
            &options,
        ) {
            Ok(c) => c,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let filters = source.filters();
        let run = glue::scan(
            &client,
            &source.databases,
            source.limits(),
            &filters,
            |_, _| {},
        );
        within_scan_timeout(source, run).await
    }
}
