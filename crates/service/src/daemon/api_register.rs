//! Registering a table through the API (`POST /api/v1/tables`): every check first, then one
//! step that registers it in place of a discovered table at the same place (the API's
//! registration takes precedence over a `[[discover]]` source's), so that a registration
//! refused for any reason leaves the discovered table as it was.

use std::sync::Arc;

use tracing::{info, warn};

use super::config::{self, TableEntry};
use super::places::{self, Overlap};
use super::tables::registered_already;
use super::{enclosing, Daemon, Source, TableError, TableState};

/// The most discovered tables at one place a registration replaces (two spellings of it found
/// by two sources, at most; more is refused as another registration there).
const MAX_REPLACED: usize = 8;

impl Daemon {
    /// Register a table through the API and persist it: only what
    /// [`Config::check_api_entry`] allows, never a table registered already (by the config, the
    /// API or a source of another place, under any name or spelling, inside or around it) nor a
    /// folder inside a table's base path (registered or not), at most `server.max_api_tables`
    /// of them, and only while the registry can be written. A discovered table at the same
    /// place is replaced, once all of that passed and the registration is no weaker than its
    /// source's settings. A registration that could not be persisted is undone, the discovered
    /// table it replaced registered again.
    ///
    /// [`Config::check_api_entry`]: config::Config::check_api_entry
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
        let place = places::place_of(&entry.uri);
        // What can be told without reading storage first: nothing is read for a registration
        // refused anyway.
        let replace = {
            let tables = self.tables.read().await;
            let replace: Vec<Arc<TableState>> = place
                .as_deref()
                .map(|p| tables.places().overlapping(p, MAX_REPLACED))
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, how)| *how == Overlap::Same)
                .filter_map(|(name, _)| tables.get(&name).cloned())
                .filter(|t| matches!(t.source, Source::Discovered(_)))
                .collect();
            if let Some(refused) =
                registered_already(&tables, &entry, Source::Api, place.as_deref(), &replace)
            {
                return Err(refused);
            }
            self.check_api_limit(&tables, limit)?;
            replace
        };
        self.check_not_weaker_than_its_source(&entry, &replace)?;
        self.check_not_inside_a_table(&entry).await?;
        // No poll or change of a table replaced runs from here on (one running ends first).
        let mut order: Vec<&Arc<TableState>> = replace.iter().collect();
        order.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        let mut held = Vec::with_capacity(order.len());
        for r in order {
            held.push(r.table.lock().await);
        }
        let state = self
            .add_at(entry, Source::Api, Some(limit), place.as_deref(), &replace)
            .await?;
        if let Err(e) = self.save(&state).await {
            self.undo_registration(&state, &replace).await;
            return Err(e);
        }
        drop(held);
        for r in &replace {
            info!(table = %r.entry.name, uri = %r.entry.uri, by = %state.entry.name, "discovery: a table registered through the API replaces the discovered one");
        }
        if !replace.is_empty() {
            self.refresh_halted().await;
        }
        Ok(())
    }

    /// Refused when `entry` would replace a discovered table (`replace`) and watch it less
    /// carefully than its source does (`[discover.defaults]` over `[defaults]`), key by key as
    /// [`Defaults::weaker`](config::Defaults::weaker) judges against `[defaults]`; unless
    /// `server.api_may_weaken_safety`.
    fn check_not_weaker_than_its_source(
        &self,
        entry: &TableEntry,
        replace: &[Arc<TableState>],
    ) -> Result<(), TableError> {
        if self.config.server.api_may_weaken_safety {
            return Ok(());
        }
        let defaults = &self.config.defaults;
        // The registration with every key it leaves out taken from [defaults].
        let whole = defaults.overridden_by(entry).as_overrides().entry(
            entry.name.clone(),
            entry.uri.clone(),
            entry.storage_options.clone(),
        );
        for r in replace {
            let Source::Discovered(i) = r.source else {
                continue;
            };
            let Some(source) = self.config.discover.get(usize::from(i)) else {
                continue;
            };
            let found = source.defaults.entry(
                r.entry.name.to_string(),
                r.entry.uri.clone(),
                source.storage_options.clone(),
            );
            // Said of the source's settings rather than of [defaults].
            let weaker: Vec<String> = defaults
                .overridden_by(&found)
                .weaker(&whole)
                .into_iter()
                .map(|w| {
                    if w.starts_with("lock differs") {
                        "lock differs from the source's (through the API only lock.timeout may be set)".into()
                    } else {
                        w.replace("the default", "the source's")
                    }
                })
                .collect();
            if !weaker.is_empty() {
                return Err(TableError::Forbidden(format!(
                    "table `{}`: it would replace `{}`, which [[discover]] source `{}` watches with its [discover.defaults], and {}. A registration through the API may not weaken what the source sets (server.api_may_weaken_safety = true allows it)",
                    entry.name,
                    r.entry.name,
                    source.name,
                    weaker.join("; ")
                )));
            }
        }
        Ok(())
    }

    /// Undo the registration of `state` (it could not be persisted): once a poll or change of
    /// it ended, it is unregistered and the discovered tables it replaced (`replace`, whose
    /// mutexes the caller holds) are registered again, each unless its name or place was taken
    /// meanwhile (then its source registers it again at its next scan).
    async fn undo_registration(&self, state: &Arc<TableState>, replace: &[Arc<TableState>]) {
        let held = state.table.lock().await;
        let mut tables = self.tables.write().await;
        if tables.remove(state) {
            self.metrics.remove_table(&state.entry.name);
        }
        let mut back = Vec::new();
        for r in replace {
            let place = places::place_of(&r.entry.uri);
            let free = !tables.contains_key(&r.entry.name)
                && place
                    .as_deref()
                    .is_some_and(|p| tables.places().overlapping(p, 0).is_empty());
            if !free {
                warn!(table = %r.entry.name, "the discovered table an undone registration replaced is registered again at its source's next scan");
                continue;
            }
            self.metrics
                .put_table(r.entry.name.clone(), r.metrics.clone());
            tables.insert(r.clone(), place.as_deref());
            back.push(r.clone());
        }
        self.metrics.tables.set(tables.len() as i64);
        drop(tables);
        drop(held);
        for r in back {
            self.schedule(&r, std::time::Duration::ZERO);
        }
    }

    /// Refused when the folder `entry` names lies inside a table's base path, registered or
    /// not (see [`enclosing`]), or when that cannot be told.
    pub(super) async fn check_not_inside_a_table(
        &self,
        entry: &TableEntry,
    ) -> Result<(), TableError> {
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
}
