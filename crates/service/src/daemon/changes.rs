//! Changes through the API (a manual rollback, a restore, a savepoint, each with its dry run)
//! and the timeline read: each checks the table's owner, takes one options path
//! ([`Daemon::change_options`]), holds the table's mutex, and bounds its reads and its change.

use std::sync::Arc;

use hudi_keeper_core::exec::restore::{preview_restore, restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{
    preview, rollback_observed, RollbackDone, RollbackOptions, RollbackPreview, Selection,
};
use hudi_keeper_core::exec::savepoint::{create_savepoint, preview_savepoint, SavepointRequest};
use hudi_keeper_core::timeline::Timeline;
use hudi_keeper_core::Table;
use serde::Serialize;
use tracing::info;

use super::config::PolicySetting;
use super::error::{refusal, MutationError};
use super::own_changes;
use super::table_state::TIMELINE_READS_PER_TABLE;
use super::{Daemon, TableError, TableState};

impl Daemon {
    /// A manual rollback (or its preview) through the API.
    pub async fn manual_rollback(
        &self,
        name: &str,
        instant: Option<String>,
        dry_run: bool,
    ) -> Result<ManualRollback, TableError> {
        let (state, options) = self.change_of(name, dry_run).await?;
        let options = self.journaled(&state, options, false);
        let selection = match &instant {
            Some(t) => Selection::Instant(t.clone()),
            None => Selection::AllFailed,
        };
        let state = &state;
        self.with_table(state, |table| async move {
            let table = &table;
            if dry_run {
                let plans = self
                    .read_within(async {
                        preview(table, &selection, &options).await.map_err(refusal)
                    })
                    .await?;
                return Ok(ManualRollback::Plan(plans));
            }
            let started = std::time::Instant::now();
            match self
                .rollback_recorded(state, table, &selection, &options, "manual")
                .await
            {
                Ok(done) => Ok(ManualRollback::Done(done)),
                Err(e) => {
                    self.record_failure(
                        state,
                        "manual",
                        instant.as_deref().unwrap_or("(failed writes)"),
                        &e.to_string(),
                        started,
                    );
                    Err(e.into_table_error())
                }
            }
        })
        .await
    }

    /// Roll back what `selection` names within `server.mutation_timeout`. Every rollback that
    /// completed is recorded (metrics, status), also when a later one failed or the change was
    /// cut off after it: an error leaves the ones before it counted. The leftover guard runs
    /// only after a change that ended normally: a failed or cut-off one (a shutdown, a lost
    /// lock) stops there, and the periodic check finds what its rollbacks left.
    pub(super) async fn rollback_recorded(
        &self,
        state: &TableState,
        table: &Table,
        selection: &Selection,
        options: &RollbackOptions,
        trigger: &'static str,
    ) -> Result<Vec<RollbackDone>, MutationError> {
        let completed = std::sync::Mutex::new(Vec::new());
        let sink = |d: &RollbackDone| {
            self.record_rollback(state, d, trigger);
            completed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(d.clone());
        };
        let sink = &sink;
        let result = self
            .mutate(table, |t| async move {
                rollback_observed(&t, selection, options, None, sink).await
            })
            .await;
        let completed = completed.into_inner().unwrap_or_else(|e| e.into_inner());
        result?;
        self.guard_after(state, table, &completed, &options.lock)
            .await;
        Ok(completed)
    }

    /// The table handle, opened on first use.
    pub(super) async fn with_table<T, F, Fut>(
        &self,
        state: &Arc<TableState>,
        work: F,
    ) -> Result<T, TableError>
    where
        F: FnOnce(Table) -> Fut,
        Fut: std::future::Future<Output = Result<T, TableError>>,
    {
        let mut cached = self.lock_table(state).await?;
        let table = self.opened(state, &mut cached).await?;
        work(table).await
    }

    /// The table's mutex for a change through the API: a poll holds it only for its reads
    /// (`server.poll_timeout`), another change up to `server.mutation_timeout` (+ grace). The
    /// wait ends after `server.mutation_timeout` (also when the client has gone meanwhile).
    pub(super) async fn lock_table<'a>(
        &self,
        state: &'a TableState,
    ) -> Result<tokio::sync::MutexGuard<'a, Option<Arc<Table>>>, TableError> {
        let limit = self.config.server.mutation_timeout;
        tokio::time::timeout(limit, state.table.lock())
            .await
            .map_err(|_| {
                TableError::Busy(format!(
                    "`{}` is busy: another change held it for server.mutation_timeout ({} s); retry later",
                    state.entry.name,
                    limit.as_secs()
                ))
            })
    }

    /// The cached table, or the table opened now (within `server.poll_timeout`) and cached.
    pub(super) async fn opened(
        &self,
        state: &TableState,
        cached: &mut Option<Arc<Table>>,
    ) -> Result<Table, TableError> {
        if let Some(t) = cached.as_deref() {
            return Ok(t.clone());
        }
        let opened = self
            .read_within(async { self.open(state).await.map_err(TableError::from) })
            .await?;
        state.keep(cached, Some(opened.clone()));
        Ok(opened)
    }

    /// `work` (reads only: opening a table, a dry run) unless `server.poll_timeout` passes
    /// first; then it is dropped and the request fails.
    pub(super) async fn read_within<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, TableError>>,
    ) -> Result<T, TableError> {
        let limit = self.config.server.poll_timeout;
        tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
            Err(TableError::Failed(format!(
                "timed out: the store did not answer within server.poll_timeout ({} s)",
                limit.as_secs()
            )))
        })
    }

    /// `options` with this daemon's journal of the changes it starts on `state`'s table
    /// (`state_dir/own-changes/`), and its own pending rollbacks, which it resumes at once.
    pub(super) fn journaled(
        &self,
        state: &TableState,
        options: RollbackOptions,
        require_savepoint: bool,
    ) -> RollbackOptions {
        let (name, uri) = (&state.entry.name, &state.entry.uri);
        RollbackOptions {
            journal: Some(Arc::new(own_changes::TableJournal {
                store: self.own_changes.clone(),
                name: name.to_string(),
                uri: uri.clone(),
                require_savepoint,
            })),
            own_rollbacks: self.own_changes.rollbacks(name, uri),
            ..options
        }
    }

    /// The table `name` and the options of a change of it through the API (or of its dry run):
    /// the one path every change takes. A change (not a dry run) is refused unless this replica
    /// owns the table; then [`Daemon::change_options`].
    async fn change_of(
        &self,
        name: &str,
        dry_run: bool,
    ) -> Result<(Arc<TableState>, RollbackOptions), TableError> {
        let state = self.table(name).await?;
        if !dry_run {
            self.check_owner(name)?;
        }
        let options = self.change_options(name, &state, dry_run)?;
        Ok((state, options))
    }

    /// Options to change a table through the API: its lock is required, observe tables are
    /// never changed.
    pub(super) fn change_options(
        &self,
        name: &str,
        state: &TableState,
        dry_run: bool,
    ) -> Result<RollbackOptions, TableError> {
        if state.settings.failed_writes_policy == PolicySetting::Observe && !dry_run {
            return Err(TableError::Conflict(format!(
                "`{name}` is an observe table: hudi-keeper never changes it"
            )));
        }
        match state.rollback_options() {
            Some(o) => Ok(o),
            None if dry_run => Ok(state.detection_options()),
            None => Err(TableError::Conflict(format!(
                "`{name}` has no lock.provider: it cannot be changed"
            ))),
        }
    }

    /// Changes to a table go through the replica that owns it (dry runs are answered anywhere).
    pub(super) fn check_owner(&self, name: &str) -> Result<(), TableError> {
        match self.cluster().owner(name) {
            Some(owner) if owner.this_replica => Ok(()),
            Some(owner) => Err(TableError::NotOwner {
                table: name.to_string(),
                owner: owner.name,
            }),
            None => Err(TableError::Busy(format!(
                "no replica owns `{name}` as this one sees the cluster (it is not registered in ZooKeeper): retry later"
            ))),
        }
    }

    /// Restore a table to `target` (a savepoint when `require_savepoint`), or with `dry_run`
    /// return the plan. Holds the table's handle for the whole restore, so its polls wait.
    pub async fn manual_restore(
        &self,
        name: &str,
        target: String,
        require_savepoint: bool,
        dry_run: bool,
    ) -> Result<serde_json::Value, TableError> {
        let (state, options) = self.change_of(name, dry_run).await?;
        let options = RestoreOptions {
            rollback: self.journaled(&state, options, require_savepoint),
            require_savepoint,
        };
        self.with_table(&state, |table| async move {
            if dry_run {
                let plan = self
                    .read_within(async {
                        preview_restore(&table, &target, &options)
                            .await
                            .map_err(refusal)
                    })
                    .await?;
                return Ok(serde_json::json!({"table": name, "dry_run": true, "restore": plan}));
            }
            let (target, options) = (&target, &options);
            let done = self
                .mutate(&table, |t| async move { restore(&t, target, options, None).await })
                .await
                .map_err(MutationError::into_table_error)?;
            info!(table = name, target = %target, restore_instant = %done.restore_instant, undone = done.undone.len(), "restored through the API");
            Ok(serde_json::json!({"table": name, "dry_run": false, "restore": done}))
        })
        .await
    }

    /// Savepoint a commit of a table (the latest completed one when `instant` is `None`), or
    /// with `dry_run` return what would be written.
    pub async fn manual_savepoint(
        &self,
        name: &str,
        request: SavepointRequest,
        dry_run: bool,
    ) -> Result<serde_json::Value, TableError> {
        let (state, options) = self.change_of(name, dry_run).await?;
        self.with_table(&state, |table| async move {
            let created = if dry_run {
                self.read_within(async {
                    preview_savepoint(&table, &request).await.map_err(refusal)
                })
                .await?
            } else {
                let (request, lock) = (&request, &options.lock);
                self.mutate(&table, |t| async move {
                    create_savepoint(&t, request, lock).await
                })
                .await
                .map_err(MutationError::into_table_error)?
            };
            Ok(serde_json::json!({"table": name, "dry_run": dry_run, "savepoint": created}))
        })
        .await
    }

    /// The active timeline of a table. Never waits for the table's mutex (a poll or a change
    /// may hold it for long): it reads through the cached handle's clone (the table is opened
    /// only when no handle is cached); at most [`TIMELINE_READS_PER_TABLE`] such reads of a
    /// table run at once (more are `Busy`); the read ends by `server.poll_timeout`.
    pub async fn timeline(&self, name: &str) -> Result<Timeline, TableError> {
        Ok(self.timeline_and_table(name).await?.1)
    }

    /// The table's timeline as [`Daemon::timeline`] reads it, with the table it was read
    /// through (open already, or opened for the read).
    pub(super) async fn timeline_and_table(
        &self,
        name: &str,
    ) -> Result<(Arc<Table>, Timeline), TableError> {
        let state = self.table(name).await?;
        let Some(_read) = state.timeline_reads.try_take() else {
            return Err(TableError::Busy(format!(
                "`{name}`: {TIMELINE_READS_PER_TABLE} timeline reads of the table run already; retry later"
            )));
        };
        self.read_within(async {
            let table = match state.handle() {
                Some(t) => t,
                None => Arc::new(self.open(&state).await.map_err(TableError::from)?),
            };
            let timeline = table
                .timeline()
                .await
                .map_err(|e| TableError::Failed(e.to_string()))?;
            Ok((table, timeline))
        })
        .await
    }
}

/// The result of a manual rollback request.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ManualRollback {
    Plan(Vec<RollbackPreview>),
    Done(Vec<RollbackDone>),
}
