//! Registering tables: the configured ones and those registered through the API, which are
//! kept in the registry (`state_dir/api-tables/`, see [`registry`](super::registry)) and
//! restored at start; unregistering, resuming a halted table.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tracing::{error, info};

use super::config::{self, TableEntry};
use super::places::{self, Registered};
use super::registry;
use super::scheduler::jitter;
use super::table_state::{Identity, OptionalMs, ReadSlots};
use super::{Daemon, Source, TableError, TableState, TableStatus};

/// What became of the registry (`state_dir/api-tables/`, see [`registry`]) at start.
#[derive(Debug, Default)]
pub(super) struct RegistryState {
    /// Some of it could not be read (or `tables.json` moved): why, naming files relative to
    /// `state_dir`. Then the API neither registers nor unregisters tables.
    pub(super) unreadable: Option<String>,
    /// Entries not restored, and why; their files are kept until they are deleted.
    pub(super) not_restored: Vec<(TableEntry, String)>,
}

impl Daemon {
    /// Register the tables kept in the registry, each checked as a registration through the
    /// API is now. A file that cannot be read, or an entry that is refused, is reported (error
    /// log, `hudi_keeper_registry_errors_total`, `/readyz`) while every other table runs.
    pub(super) async fn restore_registry(self: &Arc<Self>) {
        let dir = self
            .config
            .server
            .state_dir
            .join(registry::DIR)
            .display()
            .to_string();
        // An entry is about the size of the registration's body.
        let max_bytes = (self.config.server.max_body_bytes as u64)
            .saturating_mul(4)
            .max(1 << 20);
        let restored = self.api_tables.load(max_bytes);
        if let Some(error) = restored.problem {
            error!(dir = %dir, error = %error, "the registry of tables registered through the API cannot be read whole: the tables it could not read are not watched (the configured ones are), and registrations through the API are refused until it is fixed and the daemon restarted");
            self.metrics
                .registry_errors
                .with_label_values(&["unreadable"])
                .inc();
            self.registry_state().unreadable = Some(error);
        }
        for entry in restored.entries {
            let refused = match self.config.check_api_entry(&entry) {
                Err(config::ApiRefusal::Forbidden(e) | config::ApiRefusal::Invalid(e)) => Some(e),
                Ok(()) => self
                    .add(entry.clone(), Source::Api, None)
                    .await
                    .err()
                    .map(|e| e.to_string()),
            };
            if let Some(error) = refused {
                // The name as read, escaped: it was not checked yet.
                error!(table = %entry.name.escape_debug(), dir = %dir, error = %error, "a table registered through the API is not restored (its file is kept: fix the config and restart, or DELETE /api/v1/tables/{{name}})");
                self.metrics
                    .registry_errors
                    .with_label_values(&["not_restored"])
                    .inc();
                self.registry_state().not_restored.push((entry, error));
            }
        }
    }

    pub(super) fn registry_state(&self) -> std::sync::MutexGuard<'_, RegistryState> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The registry's state for `/readyz`: whether it was read and every entry restored.
    pub fn registry_report(&self) -> (bool, serde_json::Value) {
        let r = self.registry_state();
        let ok = r.unreadable.is_none() && r.not_restored.is_empty();
        let report = serde_json::json!({
            "ok": ok,
            // Below state_dir: /readyz answers without the token, and says nothing of the host.
            "file": registry::Registry::shown_name(),
            "error": r.unreadable,
            "not_restored": r.not_restored.iter().map(|(e, why)| serde_json::json!({"name": e.name, "uri": e.uri, "error": why})).collect::<Vec<_>>(),
        });
        (ok, report)
    }

    /// Refused while the registry could not be read whole at start: a write would be made on a
    /// registry only partly known.
    pub(super) fn registry_writable(&self) -> Result<(), TableError> {
        match &self.registry_state().unreadable {
            Some(e) => Err(TableError::Conflict(format!(
                "the registry of tables registered through the API (state_dir/{}/) could not be read whole at start ({e}); fix it or move the file away and restart before registering or unregistering tables through the API",
                registry::DIR
            ))),
            None => Ok(()),
        }
    }

    /// Register `entry`. A registration through the API (`limit`: `server.max_api_tables`) is
    /// refused when that many tables are registered through the API already, counted under
    /// the same lock as the insert, so that requests at once cannot pass it together.
    pub(super) async fn add(
        self: &Arc<Self>,
        entry: TableEntry,
        source: Source,
        limit: Option<usize>,
    ) -> Result<Arc<TableState>, TableError> {
        let place = self
            .keeps_places()
            .then(|| places::place_of(&entry.uri))
            .flatten();
        self.add_at(entry, source, limit, place.as_deref(), &[])
            .await
    }

    /// Whether the places of the tables are kept ([`places`]): when anything but the config
    /// registers tables (the API, which needs `server.allowed_table_uris`, or `[[discover]]`).
    pub(super) fn keeps_places(&self) -> bool {
        !self.config.server.allowed_table_uris.is_empty() || !self.config.discover.is_empty()
    }

    /// Register `entry` at `place` (its [`places::place_of`]), in one step with unregistering
    /// the tables `replace` (each still registered, its table's mutex held by the caller, so
    /// that no poll or change of it runs): they are left out of the checks of its name and
    /// place. Refused, and nothing replaced, when one of them went meanwhile, or the checks of
    /// [`registered_already`] or of `limit` refuse it.
    pub(super) async fn add_at(
        self: &Arc<Self>,
        entry: TableEntry,
        source: Source,
        limit: Option<usize>,
        place: Option<&str>,
        replace: &[Arc<TableState>],
    ) -> Result<Arc<TableState>, TableError> {
        let settings = self
            .config
            .defaults
            .resolve(&entry)
            .map_err(TableError::Invalid)?;
        let settings = {
            let mut interned = self.interned.lock().unwrap_or_else(|e| e.into_inner());
            match interned.iter().find(|s| ***s == settings) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(settings);
                    interned.push(s.clone());
                    s
                }
            }
        };
        let mut tables = self.tables.write().await;
        if let Some(gone) = replace
            .iter()
            .find(|r| !tables.get(&r.entry.name).is_some_and(|t| Arc::ptr_eq(t, r)))
        {
            return Err(TableError::Conflict(format!(
                "`{}`, which this registration replaces, was unregistered or replaced meanwhile",
                gone.entry.name
            )));
        }
        if let Some(refused) = registered_already(&tables, &entry, source, place, replace) {
            return Err(refused);
        }
        if let Some(limit) = limit {
            self.check_api_limit(&tables, limit)?;
        }
        // Before the new table's metrics are made: it may take the name of one it replaces.
        for r in replace {
            tables.remove(r);
            self.metrics.remove_table(&r.entry.name);
        }
        // Its name and URI only (its settings are resolved above); the whole registration of an
        // API table, which the registry keeps.
        let entry = Identity::of(entry, source);
        let state = Arc::new(TableState {
            status: StdMutex::new(TableStatus {
                state_files_unreadable: [
                    self.evidence.unreadable(&entry.name),
                    self.own_changes.unreadable(&entry.name),
                ]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
                ..TableStatus::default()
            }),
            metrics: self.metrics.table_named(&entry.name),
            heartbeats_seen_ms: OptionalMs::new(
                self.evidence
                    .get(&entry.name, &entry.uri)
                    .map(|e| e.heartbeats_first_seen_ms),
            ),
            entry,
            source,
            settings,
            table: tokio::sync::Mutex::new(None),
            handle: StdMutex::new(None),
            timeline_reads: ReadSlots::default(),
            generation: std::sync::atomic::AtomicU64::new(0),
            audit: StdMutex::new(Default::default()),
            audit_generation: std::sync::atomic::AtomicU64::new(0),
            guard_due: Default::default(),
            activity: Default::default(),
        });
        let cluster = self.cluster();
        let name = &state.entry.name;
        state
            .metrics
            .not_owned
            .store(!cluster.owns(name), std::sync::atomic::Ordering::Relaxed);
        tables.insert(state.clone(), place);
        self.metrics.tables.set(tables.len() as i64);
        drop(tables);
        info!(table = %name, uri = %state.entry.uri, owner = %cluster.owner(name).map(|o| o.name).unwrap_or_else(|| "none yet".into()), policy = state.settings.failed_writes_policy.as_str(), lock = %state.settings.lock_provider, "registered table");
        // The first poll comes soon, spread over up to a second (or the interval).
        let interval = Duration::from_millis(state.settings.poll_interval_ms);
        self.schedule(&state, jitter(interval.min(Duration::from_secs(1)), 1.0));
        self.schedule_first_audit(&state);
        Ok(state)
    }

    /// Refused when `limit` tables are registered through the API (with the entries kept but not
    /// restored, which hold a file each too).
    pub(super) fn check_api_limit(
        &self,
        tables: &Registered,
        limit: usize,
    ) -> Result<(), TableError> {
        let kept = self.registry_state().not_restored.len();
        let api = tables.values().filter(|t| t.source == Source::Api).count();
        if api + kept >= limit {
            return Err(TableError::Conflict(format!(
                "{} tables are registered through the API (server.max_api_tables = {limit}): DELETE one first, or raise server.max_api_tables",
                api + kept
            )));
        }
        Ok(())
    }

    /// Unregister a table (its poll loop stops) and persist the change.
    pub async fn unregister(&self, name: &str) -> Result<(), TableError> {
        self.registry_writable()?;
        let dormant = {
            let mut r = self.registry_state();
            let before = r.not_restored.len();
            r.not_restored.retain(|(e, _)| e.name != name);
            before != r.not_restored.len()
        };
        if dormant {
            info!(table = %name.escape_debug(), "removed a table that was not restored from the registry");
            return self.forget(name).await;
        }
        let state = self.table(name).await?;
        if state.source == Source::Config {
            return Err(TableError::Conflict(format!(
                "`{name}` comes from the config file; remove it there"
            )));
        }
        if let Source::Discovered(_) = state.source {
            return Err(TableError::Conflict(format!(
                "`{name}` was found by a [[discover]] source; exclude it there (exclude_names, exclude_locations)"
            )));
        }
        // Wait for a poll or change of the table to end, and keep new ones out, before it goes:
        // until it is gone, its name and location cannot be registered again, so no second
        // state of the table (with a mutex of its own) can run a change next to this one's, or
        // resume a rollback of this one's as its own.
        let held = state.table.lock().await;
        {
            let mut tables = self.tables.write().await;
            if !tables.remove(&state) {
                // Unregistered by another call meanwhile.
                return Err(TableError::NotFound(name.to_string()));
            }
            self.metrics.tables.set(tables.len() as i64);
            self.metrics.remove_table(name);
        }
        drop(held);
        self.refresh_halted().await;
        info!(table = %name, "unregistered table");
        self.forget(name).await
    }

    /// Clear a table's halted state and poll it now.
    pub async fn resume(&self, name: &str) -> Result<(), TableError> {
        let state = self.table(name).await?;
        state.update(|s| {
            s.halted = false;
            s.halted_reason = None;
            s.consecutive_failures = 0;
        });
        state
            .metrics
            .halted
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.refresh_halted().await;
        self.schedule(&state, Duration::ZERO);
        info!(table = %name, "resumed table");
        Ok(())
    }

    pub(super) async fn refresh_halted(&self) {
        let n = self
            .tables
            .read()
            .await
            .values()
            .filter(|t| t.status().halted)
            .count();
        self.metrics.tables_halted.set(n as i64);
    }

    /// Keep the table `state` registered through the API in the registry: its own file, written
    /// while it is still the table registered under its name (else a later change of that name
    /// decides).
    pub(super) async fn save(&self, state: &Arc<TableState>) -> Result<(), TableError> {
        self.registry_writable()?;
        let _w = self.registry_write.lock().await;
        let current = self
            .tables
            .read()
            .await
            .get(&state.entry.name)
            .is_some_and(|t| Arc::ptr_eq(t, state));
        if !current {
            return Ok(());
        }
        // Only a table registered through the API has its registration kept (and is saved).
        let Some(entry) = state.entry.registration.as_deref().cloned() else {
            return Ok(());
        };
        let registry = self.api_tables.clone();
        self.registry_io(move || registry.put(&entry)).await
    }

    /// Remove the table `name` from the registry, unless it was registered again meanwhile (its
    /// own registration writes its file).
    pub(super) async fn forget(&self, name: &str) -> Result<(), TableError> {
        self.registry_writable()?;
        let _w = self.registry_write.lock().await;
        if self
            .tables
            .read()
            .await
            .get(name)
            .is_some_and(|t| t.source == Source::Api)
        {
            return Ok(());
        }
        let (registry, name) = (self.api_tables.clone(), name.to_string());
        self.registry_io(move || registry.remove(&name)).await
    }

    /// Run a write of the registry on the blocking pool; a failure is counted and logged.
    pub(super) async fn registry_io(
        &self,
        io: impl FnOnce() -> anyhow::Result<()> + Send + 'static,
    ) -> Result<(), TableError> {
        let written = tokio::task::spawn_blocking(io)
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the write ended abnormally: {e}")));
        written.map_err(|e| {
            self.metrics
                .registry_errors
                .with_label_values(&["write"])
                .inc();
            error!(error = %format!("{e:#}"), "could not write the registry of tables registered through the API");
            TableError::Failed(format!(
                "could not persist the registry: {}",
                e.root_cause()
            ))
        })
    }
}

/// Whether `entry` is registered already: its name; or, for any registration but the config's
/// (at `place`, its [`places::place_of`]), the same table under another name or spelling, a
/// table inside it (a metadata table) or around it. The tables `replace` (which the
/// registration replaces) are left out. A place that cannot be compared is refused.
pub(super) fn registered_already(
    tables: &Registered,
    entry: &TableEntry,
    source: Source,
    place: Option<&str>,
    replace: &[Arc<TableState>],
) -> Option<TableError> {
    let replaced = |name: &str| replace.iter().any(|r| &*r.entry.name == name);
    if tables.contains_key(entry.name.as_str()) && !replaced(&entry.name) {
        return Some(TableError::Conflict(format!(
            "a table named `{}` is registered already",
            entry.name
        )));
    }
    if source == Source::Config {
        return None;
    }
    let Some(place) = place else {
        return Some(TableError::Conflict(format!(
            "where `{}` is cannot be compared with the registered tables (a link that leads nowhere, a folder that cannot be read, a control character), so it is not registered",
            entry.uri
        )));
    };
    let (other, _) = tables
        .places()
        .overlapping(place, replace.len())
        .into_iter()
        .find(|(n, _)| !replaced(n))?;
    let uri = tables
        .get(&other)
        .map(|t| t.entry.uri.as_str())
        .unwrap_or("");
    Some(TableError::Conflict(format!(
        "`{}` is registered already, or contains or lies inside a registered table: `{other}` ({uri})",
        entry.uri
    )))
}
