//! The steps that a rollback, a restore and the metadata table's part in both share: how they
//! are run ([`RollbackOptions`], [`Progress`]), the table lock around them, the pending
//! rollbacks of a timeline, the listings of a table's data files, the errors they raise, and
//! (in [`apply`]) a rollback plan's deletes and command blocks and the rollback metadata that
//! records them, (in [`changes`]) the check for symbolic links before the first change.
//!
//! Nothing here imports the rollback, the restore or the metadata table's modules: they import
//! it.

pub(in crate::exec) mod apply;
pub(in crate::exec) mod changes;
pub(in crate::exec) mod claim;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::format::rollback::RollbackPlan;
use crate::protocol::detect::{FailedWritesPolicy, LazyWritersEvidence};
use crate::protocol::heartbeat::HeartbeatPolicy;
use crate::protocol::lock::{acquire_until, LockOptions};
use crate::storage::{FileMeta, RelPath, Storage, StorageError};
use crate::table::files::DataFile;
use crate::table::Table;
use crate::timeline::{Action, State, Timeline, TimelineFile};
use crate::Error;

/// How rollbacks are chosen and run.
#[derive(Debug, Clone)]
pub struct RollbackOptions {
    /// LAZY or EAGER.
    pub policy: FailedWritesPolicy,
    /// Heartbeat thresholds.
    pub heartbeat: HeartbeatPolicy,
    /// What is known about the table's writers besides its heartbeat files now: the daemon saw
    /// heartbeat files on it before, or the operator states every writer is LAZY. Under LAZY a
    /// pending write without heartbeat file is only failed on the operator's statement
    /// ([`LazyWritersEvidence::Assumed`]); what was seen only names the verdict of a write left
    /// alone.
    pub lazy_writers: Option<LazyWritersEvidence>,
    /// The operator's opt-in: no write of the table runs longer than this, so an older pending
    /// write without heartbeat file is failed (under either policy).
    pub max_write_duration: Option<Duration>,
    /// Hudi 1.2's clustering expiration threshold, when the table's writers have clustering
    /// expirations on (LAZY only): an expired clustering at least this old is rolled back.
    /// `None` (Hudi's default): a pending clustering is never rolled back.
    pub clustering_expiration: Option<Duration>,
    /// Roll back a named instant even if its writer may be alive (a live heartbeat, too young,
    /// a suspected EAGER writer's, or of unknown age).
    pub force: bool,
    /// Deletes in flight at once.
    pub delete_concurrency: usize,
    /// List the table to find files of the instant its markers missed (default). Off, markers
    /// alone decide, which saves listing large tables; an instant without markers is refused.
    pub listing_cross_check: bool,
    /// The table lock, taken to schedule a rollback and to finish it, as Hudi's writers do.
    /// `Default` has none: callers decide (the CLI and the daemon make the operator choose).
    pub lock: LockOptions,
    /// Where each rollback (and restore) this run starts is recorded before its first timeline
    /// file is written (the daemon's `state_dir/own-changes/`); a failure to record refuses the
    /// change with nothing written. `None`: not recorded (the CLI).
    pub journal: Option<Arc<dyn crate::exec::ChangeJournal>>,
    /// Pending rollback instants the caller knows to be its own and not running: started by it
    /// (or by an earlier process of it that is gone) and recorded in its journal. They are
    /// resumed at once; any other pending rollback is resumed only once it is older than the
    /// minimum instant age, since whoever started it may be running it still.
    pub own_rollbacks: Arc<BTreeSet<String>>,
}

/// Run `work` holding the table lock; the lock is released whatever `work` returns. `work`
/// gets the table fenced by the lock: each of its mutations first checks that the lock is still
/// safely held, and `work` is stopped at its next await should the lock be lost.
pub(in crate::exec) async fn locked<T, F, Fut>(
    table: &Table,
    options: &RollbackOptions,
    work: F,
) -> Result<(T, Duration), Error>
where
    F: FnOnce(Table) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    holding_lock(table, &options.lock, work).await
}

/// [`locked`] with the lock `lock` (the one way every change takes the table lock: rollbacks,
/// restores, savepoints, the audit's repair).
pub(crate) async fn holding_lock<T, F, Fut>(
    table: &Table,
    lock: &LockOptions,
    work: F,
) -> Result<(T, Duration), Error>
where
    F: FnOnce(Table) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let lock = lock.for_table(&table.config().name);
    // The lock's own writes are never fenced (a rollback heartbeat's fence that tripped must
    // not keep the lock from being released).
    let lock_storage = table.storage().unfenced();
    let guard = acquire_until(&lock_storage, &lock, table.cancel_token()).await?;
    let waited = guard.waited;
    let fence = guard.fence();
    let fenced = table.fenced(Arc::new(fence.clone()));
    let result = tokio::select! {
        r = work(fenced) => r,
        lost = fence.lost() => Err(lost),
    };
    let released = guard.release().await;
    let value = crate::exec::after_release(result, released)?;
    Ok((value, waited))
}

impl Default for RollbackOptions {
    fn default() -> Self {
        Self {
            policy: FailedWritesPolicy::Lazy,
            heartbeat: HeartbeatPolicy::default(),
            lazy_writers: None,
            max_write_duration: None,
            clustering_expiration: None,
            force: false,
            delete_concurrency: 64,
            listing_cross_check: true,
            lock: LockOptions::none(),
            journal: None,
            own_rollbacks: Arc::default(),
        }
    }
}

/// Progress of the deletes of one rollback, for progress bars.
pub trait Progress: Send + Sync {
    /// `total` deletes are about to run for `instant`.
    fn start(&self, instant: &str, total: usize);
    /// One more delete finished.
    fn deleted(&self);
}

pub(in crate::exec) fn refused(table: &Table, instant: &str, reason: impl Into<String>) -> Error {
    Error::Refused {
        table: table.uri().to_string(),
        instant: instant.to_string(),
        reason: reason.into(),
    }
}

pub(in crate::exec) fn plan_err(table: &Table, e: crate::plan::rollback::PlanError) -> Error {
    Error::Plan {
        table: table.uri().to_string(),
        source: e,
    }
}

pub(in crate::exec) fn avro_err(
    table: &Table,
    instant: &str,
    path: &RelPath,
    e: crate::format::avro::AvroError,
) -> Error {
    Error::Avro {
        table: table.uri().to_string(),
        instant: instant.to_string(),
        path: path.to_string(),
        source: e,
    }
}

/// A rollback instant that has not completed, with its plan.
#[derive(Debug, Clone)]
pub struct PendingRollback {
    /// The rollback instant time.
    pub instant: String,
    /// Requested or inflight.
    pub state: State,
    /// Its plan.
    pub plan: RollbackPlan,
    /// When its latest timeline file was written.
    pub last_modified: chrono::DateTime<chrono::Utc>,
}

impl PendingRollback {
    /// Whether it was left long enough ago to be taken over: a rollback that another process
    /// is running right now must not be resumed under its feet (no lock is taken yet).
    /// A time the store does not give (the epoch or earlier) is unknown: never stale. The
    /// caller's own rollbacks (`RollbackOptions::own_rollbacks`) are taken over at once.
    pub(in crate::exec) fn is_stale(&self, options: &RollbackOptions, now_ms: i64) -> bool {
        if options.own_rollbacks.contains(&self.instant) {
            return true;
        }
        let written_ms = self.last_modified.timestamp_millis();
        if written_ms <= 0 {
            return false;
        }
        let age = now_ms - written_ms;
        let min = (options.heartbeat.min_instant_age + options.heartbeat.clock_skew_margin)
            .as_millis() as i64;
        age >= min
    }
}

/// The pending rollbacks of a timeline, by the instant they roll back (the first per target, as
/// Hudi keeps it). Rollbacks whose plan cannot be read are returned apart.
pub async fn pending_rollbacks(
    table: &Table,
    timeline: &Timeline,
) -> Result<(BTreeMap<String, PendingRollback>, Vec<(String, String)>), Error> {
    let mut by_target = BTreeMap::new();
    let mut unreadable = Vec::new();
    for i in timeline.pending().filter(|i| i.action == Action::Rollback) {
        let Some(req) = i.file(State::Requested) else {
            unreadable.push((
                i.requested_time.clone(),
                "no rollback.requested file".into(),
            ));
            continue;
        };
        let bytes = match table.storage().get_opt(&req.path).await? {
            Some(b) => b,
            None => continue,
        };
        match RollbackPlan::from_avro(&bytes) {
            Ok(plan) => {
                let Some(target) = plan
                    .instant_to_rollback
                    .as_ref()
                    .map(|t| t.commit_time.clone())
                else {
                    unreadable.push((i.requested_time.clone(), "the plan names no instant".into()));
                    continue;
                };
                by_target.entry(target).or_insert(PendingRollback {
                    instant: i.requested_time.clone(),
                    state: i.state,
                    plan,
                    last_modified: i.latest_file().map(|f| f.last_modified).unwrap_or_default(),
                });
            }
            Err(e) => unreadable.push((i.requested_time.clone(), e.to_string())),
        }
    }
    Ok((by_target, unreadable))
}

pub(in crate::exec) fn action_of_plan(plan: &RollbackPlan) -> Action {
    plan.instant_to_rollback
        .as_ref()
        .and_then(|i| i.action.parse().ok())
        .unwrap_or(Action::Commit)
}

/// The table's data files that `keep` accepts, `.hoodie/` left out: one listing of the base
/// path, then the top-level folders (partitions) listed recursively, several at a time. Each
/// entry is judged as the listings stream in and only kept entries are held, so memory follows
/// what the caller needs (the files of the instants it undoes), not the size of the table (nor
/// of its largest folder: a non-partitioned table's files are all in the first listing). Where
/// the store cannot list one level page by page (the local file system, memory), one recursive
/// listing of the base path does instead (a one-level listing would walk everything anyway).
pub(in crate::exec) async fn list_data_files(
    storage: &Storage,
    wanted: &Wanted,
) -> Result<Vec<FileMeta>, Error> {
    if !storage.lists_one_level() {
        let files = storage
            .list_filtered(&RelPath::root(), |f| {
                f.path.segments().next() != Some(".hoodie") && wanted.keeps(&f.path)
            })
            .await?;
        return Ok(files);
    }
    let top = storage
        .list_dir_filtered(&RelPath::root(), |f| wanted.keeps(f))
        .await?;
    let mut files = top.files;
    let dirs: Vec<RelPath> = top
        .dirs
        .iter()
        .filter(|d| d.as_str() != ".hoodie")
        .map(|d| RelPath::parse(d).map_err(StorageError::from))
        .collect::<Result<_, _>>()?;
    let listings: Vec<Result<Vec<FileMeta>, StorageError>> = futures::stream::iter(dirs)
        .map(|d| async move { storage.list_filtered(&d, |f| wanted.keeps(&f.path)).await })
        .buffer_unordered(16)
        .collect()
        .await;
    for l in listings {
        files.extend(l?);
    }
    Ok(files)
}

/// Which data files a listing keeps: those whose names carry one of `instants`, and the
/// `paths` markers name; or every one.
#[derive(Debug, Clone, Default)]
pub(in crate::exec) struct Wanted {
    every: bool,
    instants: BTreeSet<String>,
    paths: BTreeSet<RelPath>,
    /// Log files of these file slices (folder, fileId, base instant): those a table-version-5
    /// APPEND marker names through the slice's base file.
    slices: BTreeSet<(RelPath, String, String)>,
}

impl Wanted {
    /// Every data file (a savepoint's view needs them all).
    pub(in crate::exec) fn every() -> Self {
        Self {
            every: true,
            ..Self::default()
        }
    }

    /// The files named with one of `instants`, and `paths`.
    pub(in crate::exec) fn of(
        instants: impl IntoIterator<Item = String>,
        paths: impl IntoIterator<Item = RelPath>,
    ) -> Self {
        Self {
            every: false,
            instants: instants.into_iter().collect(),
            paths: paths.into_iter().collect(),
            slices: BTreeSet::new(),
        }
    }

    /// Also the log files of the file slices whose base files `markers` name with APPEND (table
    /// version 5: Hudi 0.13 names the marker after the base file, and its rollback voids the
    /// slice's latest log file).
    pub(in crate::exec) fn with_v5_append_slices(
        mut self,
        markers: &crate::protocol::markers::Markers,
    ) -> Self {
        for m in markers
            .markers
            .iter()
            .filter(|m| m.io_type == crate::protocol::markers::IoType::Append)
        {
            if let (
                Ok(path),
                Some(DataFile::Base {
                    file_id, instant, ..
                }),
            ) = (m.data_path(), DataFile::parse(&m.file_name))
            {
                self.slices.insert((path.parent(), file_id, instant));
            }
        }
        self
    }

    /// Whether a listing keeps the file at `path`.
    pub(in crate::exec) fn keeps(&self, path: &RelPath) -> bool {
        self.every
            || self.paths.contains(path)
            || DataFile::parse(path.file_name()).is_some_and(|d| {
                self.instants.contains(d.instant())
                    || match &d {
                        DataFile::Log {
                            file_id, instant, ..
                        } if !self.slices.is_empty() => {
                            self.slices
                                .contains(&(path.parent(), file_id.clone(), instant.clone()))
                        }
                        _ => false,
                    }
            })
    }
}

/// The data files directly in each of `partitions` that `wanted` keeps: one one-level listing
/// per partition, 16 at a time, judged as they stream in.
pub(in crate::exec) async fn list_partitions(
    storage: &Storage,
    partitions: &BTreeSet<RelPath>,
    wanted: &Wanted,
) -> Result<Vec<FileMeta>, Error> {
    let partitions: Vec<RelPath> = partitions.iter().cloned().collect();
    let listings: Vec<Result<Vec<FileMeta>, StorageError>> = futures::stream::iter(partitions)
        .map(|p| async move {
            storage
                .list_dir_filtered(&p, |f| wanted.keeps(f))
                .await
                .map(|l| l.files)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut files = Vec::new();
    for l in listings {
        files.extend(l?);
    }
    Ok(files)
}

/// A stop once `t`'s rollback is scheduled leaves that rollback pending: say so.
pub(in crate::exec) fn left_pending(e: Error, t: &str) -> Error {
    match e {
        Error::Cancelled {
            table,
            at,
            pending: None,
        } => Error::Cancelled {
            table,
            at,
            pending: Some(t.to_string()),
        },
        e => e,
    }
}

/// Delete every object below `dir`. Missing objects count as deleted.
pub(in crate::exec) async fn delete_folder(storage: &Storage, dir: &RelPath) -> Result<(), Error> {
    let paths: Vec<RelPath> = storage
        .list(dir)
        .await?
        .into_iter()
        .map(|m| m.path)
        .collect();
    for (_, result) in storage.delete_many_with(paths, 64, || {}).await {
        result?;
    }
    // On the local file system the folder itself, as Hudi's recursive delete: a writer that
    // died before its first marker leaves its marker folder empty.
    storage.remove_empty_dir(dir).await?;
    Ok(())
}

/// Delete an instant's timeline files newest state first (completed, inflight, requested):
/// a stop in between leaves the instant pending, never completed without its earlier files.
pub(in crate::exec) async fn delete_newest_first(
    storage: &Storage,
    mut files: Vec<TimelineFile>,
) -> Result<(), Error> {
    files.sort_by_key(|f| std::cmp::Reverse(f.name.state));
    for f in files {
        storage.delete(&f.path).await?;
    }
    Ok(())
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    fn pending_written_at(ms: i64) -> PendingRollback {
        PendingRollback {
            instant: "20250101000000000".into(),
            state: State::Inflight,
            plan: RollbackPlan {
                instant_to_rollback: None,
                requests: None,
                version: Some(1),
            },
            last_modified: chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default(),
        }
    }

    #[test]
    fn a_pending_rollback_whose_time_the_store_does_not_give_is_never_stale() {
        let options = RollbackOptions::default();
        let now = 1_737_864_503_628;
        // Written an hour ago: left, taken over.
        assert!(pending_written_at(now - 3_600_000).is_stale(&options, now));
        // Written a second ago: another process may be running it.
        assert!(!pending_written_at(now - 1_000).is_stale(&options, now));
        // The store reports no time (the epoch, or before it): it may be running now.
        assert!(!pending_written_at(0).is_stale(&options, now));
        assert!(!pending_written_at(-5).is_stale(&options, now));
    }
}
