//! What a scan changes: the tables it found ([`found::judge`]) registered as the source's,
//! with its defaults, and those two complete scans in a row missed dropped.

use std::sync::Arc;

use hudi_keeper_core::discover::ScanReport;
use tracing::{info, warn};

use super::found;
use super::naming;
use super::reconcile::Found;
use crate::daemon::config::DiscoverSource;
use crate::daemon::places;
use crate::daemon::{Daemon, Source, TableState};

impl Daemon {
    /// Register what `report` found and drop what it missed; `(added, dropped)`.
    pub(super) async fn apply(
        self: &Arc<Self>,
        index: u16,
        source: &DiscoverSource,
        report: &ScanReport,
    ) -> (usize, usize) {
        let mine = Source::Discovered(index);
        let found: Vec<Found> = found::judge(&self.config, source, report)
            .into_iter()
            .map(|f| {
                let t = &report.tables[f.at];
                Found {
                    key: f.place.into(),
                    uri: t.location.clone(),
                    hudi_name: t.name.clone(),
                }
            })
            .collect();
        // The places the config, the API and the other sources hold, and the names taken.
        let (elsewhere, ours) = {
            let tables = self.tables.read().await;
            let elsewhere: std::collections::BTreeSet<String> = tables
                .values()
                .filter(|t| t.source != mine)
                .filter_map(|t| places::place_of(&t.entry.uri))
                .collect();
            let ours: std::collections::BTreeMap<String, String> = tables
                .values()
                .filter(|t| t.source == mine)
                .map(|t| (t.entry.name.to_string(), t.entry.uri.clone()))
                .collect();
            (elsewhere, ours)
        };
        let changes = {
            let Some(mut state) = self.discovery.state(usize::from(index)) else {
                return (0, 0);
            };
            state.prune(|t| ours.contains_key(&t.name));
            let changes = state.plan(found.clone(), report.complete, |k| elsewhere.contains(k));
            state.failed_in_a_row = if report.complete {
                0
            } else {
                state.failed_in_a_row + 1
            };
            self.discovery
                .metrics
                .failed_in_a_row
                .with_label_values(&[&source.name])
                .set(state.failed_in_a_row as i64);
            changes
        };
        let mut dropped = 0;
        for name in &changes.drop {
            if self.drop_discovered(name, mine).await {
                dropped += 1;
            }
        }
        // Names: a base shared by two tables of this scan gets the location's hash.
        let mut bases = std::collections::BTreeMap::<String, usize>::new();
        for f in &found {
            *bases
                .entry(naming::base_name(&f.hudi_name, &f.uri))
                .or_default() += 1;
        }
        let mut added = 0;
        for f in changes.add {
            let base = naming::base_name(&f.hudi_name, &f.uri);
            let shared = bases.get(&base).is_some_and(|n| *n > 1);
            let taken = self.tables.read().await.contains_key(base.as_str());
            let name = if shared || taken {
                naming::disambiguated(&base, &f.uri)
            } else {
                base
            };
            let entry =
                source
                    .defaults
                    .entry(name.clone(), f.uri.clone(), source.storage_options.clone());
            match self.add(entry, mine, None).await {
                Ok(_) => {
                    added += 1;
                    if let Some(mut state) = self.discovery.state(usize::from(index)) {
                        state.registered(&f, name);
                    }
                }
                Err(e) => {
                    warn!(source = %source.name, table = %name, uri = %f.uri, error = %e, "discovery: a table found could not be registered (tried again at the next scan)");
                }
            }
        }
        if let Some(state) = self.discovery.state(usize::from(index)) {
            self.discovery
                .metrics
                .tables
                .with_label_values(&[&source.name])
                .set(state.tracked.len() as i64);
        }
        (added, dropped)
    }

    /// Drop the table `name` if `source` registered it: once a poll or change of it ended.
    async fn drop_discovered(&self, name: &str, source: Source) -> bool {
        let state: Option<Arc<TableState>> = self
            .tables
            .read()
            .await
            .get(name)
            .filter(|t| t.source == source)
            .cloned();
        let Some(state) = state else {
            return false;
        };
        let held = state.table.lock().await;
        let removed = {
            let mut tables = self.tables.write().await;
            let ours = tables.remove(&state);
            if ours {
                self.metrics.tables.set(tables.len() as i64);
                self.metrics.remove_table(name);
            }
            ours
        };
        drop(held);
        if removed {
            self.refresh_halted().await;
            info!(table = %name, uri = %state.entry.uri, "discovery: dropped a table two complete scans in a row did not find");
        }
        removed
    }
}
