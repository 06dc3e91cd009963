//! What a scan changes: the tables it found ([`found::judge`]) registered as the source's, with
//! its defaults; registered again under another name when the name the scan derives changed;
//! and those two complete scans in a row missed dropped.
//!
//! One table is registered once (see [`places`](crate::daemon::places)): a table found at the
//! place (under any spelling) of a table of the config file, of the API or of an earlier
//! `[[discover]]` source, or inside or around one, is left to it (a warning says so unless it
//! is the same place). An earlier source takes precedence over a later one: a table of a later
//! source in the way of an earlier source's registration (at its place, inside or around it,
//! or under its name) is replaced by it in one step, only once the earlier source's
//! registration is accepted; so every replica ends up with the same tables, whichever source
//! scanned first.
//!
//! Names ([`naming::assign`]) depend on the table's location, the source, and what the same
//! scan found, never on what was registered before nor on the order of scans: a table's
//! `hoodie.table.name` (made valid), or, when another table of the scan has that name too, or a
//! table of the config file has it, the name and a hash of the location. A plain name an
//! earlier source's table has is hashed too (that source keeps it; a later source's table with
//! it is replaced, and registered hashed at its source's next scan). A name an API table has is
//! not taken over (API tables are one replica's own): the table found is not registered, with
//! a warning. When a complete scan derives another name for a table than the one it has (a
//! second table of its name came, or went), it is registered again under the new one.

use std::sync::Arc;

use hudi_keeper_core::discover::ScanReport;
use tracing::{info, warn};

use super::found::{self, Finding, Left};
use super::{naming, reconcile};
use crate::daemon::config::DiscoverSource;
use crate::daemon::places::Overlap;
use crate::daemon::{Daemon, Source, TableState};

/// The most registered tables one registration replaces: more (a table found around that many
/// tables of later sources) is left out with a warning, and which source watches them may then
/// differ between replicas until the tables inside are excluded from one source or the other.
const MAX_REPLACED: usize = 1024;

/// The tables found that were not registered this scan, by reason (logged once a scan).
#[derive(Default)]
struct Refused {
    /// Inside or around a table registered otherwise (not the same place).
    overlap: Left,
    /// Its name is an API table's.
    api_name: Left,
    /// Its name is taken otherwise (the source's own table, renamed or dropped by a later
    /// scan; a hash shared by chance).
    name: Left,
    /// The registration failed.
    failed: Left,
}

impl Refused {
    fn log(&self, source: &str) {
        self.overlap.log(source, "tables found inside or around a table registered otherwise are not watched (the registered one is)");
        self.api_name.log(source, "tables found whose name a table registered through the API has are not watched (unregister that one, or exclude the table in the source)");
        self.name.log(
            source,
            "tables found whose name is taken are not registered yet (tried again at the next scan)",
        );
        self.failed.log(
            source,
            "tables found could not be registered (tried again at the next scan)",
        );
    }
}

impl Daemon {
    /// Register what `report` found and drop what it missed; `(added, dropped)`.
    pub(super) async fn apply(
        self: &Arc<Self>,
        index: u16,
        source: &DiscoverSource,
        report: &ScanReport,
    ) -> (usize, usize) {
        let mine = Source::Discovered(index);
        let found = found::judge(&self.config, source, report);
        let uri = |f: &Finding| report.tables[f.at].location.as_str();
        let hudi_name = |f: &Finding| report.tables[f.at].name.as_str();
        let (names, changes) = {
            let tables = self.tables.read().await;
            let configured = |n: &str| tables.get(n).is_some_and(|t| t.source == Source::Config);
            let derived = naming::assign(found.iter().map(|f| (hudi_name(f), uri(f))), configured);
            let names: Vec<String> = derived
                .into_iter()
                .zip(&found)
                .map(|(name, f)| {
                    let earlier = tables
                        .get(name.as_str())
                        .is_some_and(|t| matches!(t.source, Source::Discovered(j) if j < index));
                    if earlier {
                        naming::disambiguated(&naming::base_name(hudi_name(f), uri(f)), uri(f))
                    } else {
                        name
                    }
                })
                .collect();
            let Some(mut state) = self.discovery.state(usize::from(index)) else {
                return (0, 0);
            };
            state.prune(|t| {
                tables
                    .get(&t.name)
                    .is_some_and(|s| s.source == mine && Arc::ptr_eq(&s.entry.name, &t.name))
            });
            let ids = found.iter().map(|f| reconcile::id(&f.place));
            let changes = state.plan(
                ids.zip(&names).map(|(id, n)| (id, n.as_str())),
                report.complete,
            );
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
            (names, changes)
        };
        let mut dropped = 0;
        for name in &changes.drop {
            if self.drop_discovered(name, mine).await {
                dropped += 1;
            }
        }
        let mut refused = Refused::default();
        let mut added = 0;
        for &i in changes.rename.iter().chain(&changes.add) {
            let f = &found[i];
            if self
                .register_found(index, source, &f.place, uri(f), &names[i], &mut refused)
                .await
            {
                added += 1;
            }
        }
        refused.log(&source.name);
        if let Some(state) = self.discovery.state(usize::from(index)) {
            self.discovery
                .metrics
                .tables
                .with_label_values(&[&source.name])
                .set(state.tracked.len() as i64);
        }
        (added, dropped)
    }

    /// Register the table found at `uri` (its place key `place`) as `name`, in place of the
    /// tables of later sources in its way and of the source's own registration of it under
    /// another name; whether it was.
    async fn register_found(
        self: &Arc<Self>,
        index: u16,
        source: &DiscoverSource,
        place: &str,
        uri: &str,
        name: &str,
        refused: &mut Refused,
    ) -> bool {
        let mine = Source::Discovered(index);
        let id = reconcile::id(place);
        let replace = {
            let tables = self.tables.read().await;
            // The source's registration of this place, if any (under the name it had).
            let ours = self
                .discovery
                .state(usize::from(index))
                .and_then(|s| s.tracked.get(&id).map(|t| t.name.clone()));
            let around = tables.places().overlapping(place, MAX_REPLACED);
            if around.len() > MAX_REPLACED {
                refused
                    .overlap
                    .note(|| format!("{uri} (around {} tables or more)", around.len()));
                return false;
            }
            let mut in_way: Vec<(Arc<TableState>, Option<Overlap>)> = around
                .into_iter()
                .filter_map(|(n, how)| tables.get(&n).map(|t| (t.clone(), Some(how))))
                .collect();
            if let Some(t) = tables.get(name) {
                if !in_way.iter().any(|(w, _)| Arc::ptr_eq(w, t)) {
                    in_way.push((t.clone(), None));
                }
            }
            let mut replace = Vec::new();
            for (t, how) in in_way {
                let this = ours.as_ref().is_some_and(|n| Arc::ptr_eq(n, &t.entry.name));
                match (t.source, how) {
                    _ if this => replace.push(t),
                    (Source::Discovered(j), _) if j > index => replace.push(t),
                    // The config's, the API's or an earlier source's: theirs.
                    (_, Some(Overlap::Same)) => return false,
                    (_, Some(_)) => {
                        refused.overlap.note(|| {
                            format!("{uri} (registered: {} at {})", t.entry.name, t.entry.uri)
                        });
                        return false;
                    }
                    (Source::Api, None) => {
                        refused.api_name.note(|| format!("{uri} as {name}"));
                        return false;
                    }
                    (_, None) => {
                        refused.name.note(|| format!("{uri} as {name}"));
                        return false;
                    }
                }
            }
            replace
        };
        // No poll or change of a table replaced runs from here on (one running ends first).
        let mut order: Vec<&Arc<TableState>> = replace.iter().collect();
        order.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        let mut held = Vec::with_capacity(order.len());
        for r in order {
            held.push(r.table.lock().await);
        }
        let entry = source.defaults.entry(
            name.to_string(),
            uri.to_string(),
            source.storage_options.clone(),
        );
        let state = match self.add_at(entry, mine, None, Some(place), &replace).await {
            Ok(s) => s,
            Err(e) => {
                refused.failed.note(|| format!("{uri} as {name}: {e}"));
                return false;
            }
        };
        drop(held);
        if let Some(mut s) = self.discovery.state(usize::from(index)) {
            s.registered(id, state.entry.name.clone());
        }
        for r in &replace {
            info!(table = %r.entry.name, uri = %r.entry.uri, by = %state.entry.name, source = %source.name, "discovery: a table registered by an earlier source, or again under the name its scan derives, replaces this one");
        }
        if !replace.is_empty() {
            self.refresh_halted().await;
        }
        true
    }

    /// Drop the table `name` (the name of the registration itself, not another of the same
    /// text) if `source` registered it: once a poll or change of it ended.
    pub(super) async fn drop_discovered(&self, name: &Arc<str>, source: Source) -> bool {
        let state: Option<Arc<TableState>> = self
            .tables
            .read()
            .await
            .get(name)
            .filter(|t| t.source == source && Arc::ptr_eq(&t.entry.name, name))
            .cloned();
        let Some(state) = state else {
            return false;
        };
        let held = state.table.lock().await;
        let removed = {
            let mut tables = self.tables.write().await;
            let removed = tables.remove(&state);
            if removed {
                self.metrics.tables.set(tables.len() as i64);
                self.metrics.remove_table(name);
            }
            removed
        };
        drop(held);
        if removed {
            self.refresh_halted().await;
            info!(table = %name, uri = %state.entry.uri, "discovery: dropped a table two complete scans in a row did not find");
        } else {
            warn!(table = %name, "discovery: a table to drop was unregistered or replaced meanwhile");
        }
        removed
    }
}
