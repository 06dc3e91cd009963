//! Rolling back failed writes (hudi-format.md §5.5-5.7, §7.1).
//!
//! The state machine, each step resumable:
//! `R.rollback.requested` (the plan) → empty `R.rollback.inflight` → deletes (and v6 MOR rollback
//! command blocks) → the metadata table's rollback of the same instant with the same `R` → the
//! target's inflight, then requested file deleted → the completed rollback (`R.rollback`, or
//! `R_C.rollback` in layout 2) → marker folder and heartbeat removed.
//!
//! A pending rollback of the same target is always resumed with its own plan, never duplicated.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use futures::StreamExt;
use serde::Serialize;
use tracing::{info, info_span, warn, Instrument};

use super::log_append::{append_block, Slice};
use super::metadata_table::rollback::{metadata_table_refusal, rollback_metadata_table};
pub use super::metadata_table::MetadataTableOutcome;
use super::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::commit::workload_partitions;
use crate::format::log_block::{is_rollback_block_for, rollback_command_block};
use crate::format::rollback::{
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan,
};
use crate::inspect::observe;
use crate::plan::rollback::{
    listing_scope, plan_rollback, resolve_plan, ListingScope, PlanInput, PlanTarget, PlannedDelete,
    PlannedRollback,
};
use crate::protocol::detect::{
    assess, non_candidate_reason, Assessment, DetectionInput, FailedWritesPolicy,
    LazyWritersEvidence, NamedRollback, WritersReport,
};
use crate::protocol::heartbeat::{heartbeat_path, HeartbeatPolicy};
use crate::protocol::lock::{acquire_until, LockOptions};
use crate::protocol::markers::{marker_dir, read_markers};
use crate::storage::{FileMeta, OpKind, RelPath, Storage, StorageError};
use crate::table::files::{BasePath, DataFile};
use crate::table::{Table, METADATA_TABLE_PATH};
use crate::timeline::{Action, Instant, State, Timeline};
use crate::Error;

/// Deletes between two safe points of a rollback (ten S3 bulk requests).
const DELETE_BATCH: usize = 10_000;

/// The write token Java uses when it rolls a log file over without a task context.
const UNKNOWN_WRITE_TOKEN: &str = "1-0-1";
/// The write token of a v8/v9 rollback's command-block log file: what Hudi's Java engine gives
/// its one task (partition 0, stage 0, attempt 0), as its rollbacks name the file.
const V8_ROLLBACK_WRITE_TOKEN: &str = "0-0-0";

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
    pub journal: Option<Arc<dyn super::ChangeJournal>>,
    /// Pending rollback instants the caller knows to be its own and not running: started by it
    /// (or by an earlier process of it that is gone) and recorded in its journal. They are
    /// resumed at once; any other pending rollback is resumed only once it is older than the
    /// minimum instant age, since whoever started it may be running it still.
    pub own_rollbacks: Arc<BTreeSet<String>>,
}

/// Run `work` holding the table lock; the lock is released whatever `work` returns. `work`
/// gets the table fenced by the lock: each of its mutations first checks that the lock is still
/// safely held, and `work` is stopped at its next await should the lock be lost.
async fn locked<T, F, Fut>(
    table: &Table,
    options: &RollbackOptions,
    work: F,
) -> Result<(T, Duration), Error>
where
    F: FnOnce(Table) -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let lock = options.lock.for_table(&table.config().name);
    let guard = acquire_until(table.storage(), &lock, table.cancel_token()).await?;
    let waited = guard.waited;
    let fence = guard.fence();
    let fenced = table.fenced(Arc::new(fence.clone()));
    let result = tokio::select! {
        r = work(fenced) => r,
        lost = fence.lost() => Err(lost),
    };
    let released = guard.release().await;
    let value = super::after_release(result, released)?;
    Ok((value, waited))
}

impl Default for RollbackOptions {
    fn default() -> Self {
        Self {
            policy: FailedWritesPolicy::Lazy,
            heartbeat: HeartbeatPolicy::default(),
            lazy_writers: None,
            max_write_duration: None,
            force: false,
            delete_concurrency: 64,
            listing_cross_check: true,
            lock: LockOptions::none(),
            journal: None,
            own_rollbacks: Arc::default(),
        }
    }
}

/// What to roll back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Every instant the policy calls failed, plus every pending rollback (newest first).
    AllFailed,
    /// One pending instant.
    Instant(String),
}

/// Progress of the deletes of one rollback, for progress bars.
pub trait Progress: Send + Sync {
    /// `total` deletes are about to run for `instant`.
    fn start(&self, instant: &str, total: usize);
    /// One more delete finished.
    fn deleted(&self);
}

/// A rollback that would run, as `--dry-run` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackPreview {
    /// The instant to roll back.
    pub instant: String,
    /// Its pending action.
    pub action: Action,
    /// Requested or inflight.
    pub state: State,
    /// The pending rollback that would be resumed, if any.
    pub resumes: Option<String>,
    /// Why it is rolled back.
    pub reason: String,
    /// Files to delete per partition: (count, bytes).
    pub partitions: BTreeMap<String, PartitionPreview>,
    /// Total files to delete.
    pub files: usize,
    /// Total bytes to delete (of files that exist now).
    pub bytes: u64,
    /// Log files that get a rollback command block (v6 MOR).
    pub log_blocks: usize,
    /// Files found by the listing that the markers missed.
    pub files_not_in_markers: usize,
    /// Markers naming files that never appeared.
    pub markers_without_files: usize,
    /// Where the listing cross-check looked: the partitions the instant names, or the whole
    /// table (and why); none for a resumed plan (it is final) or without the cross-check.
    pub listing: ListingScope,
    /// The plan.
    pub plan: RollbackPlan,
}

/// One partition of a preview.
#[derive(Debug, Clone, Serialize, Default)]
pub struct PartitionPreview {
    /// Files to delete.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// A finished rollback.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackDone {
    /// The rolled-back instant.
    pub instant: String,
    /// Its action.
    pub action: String,
    /// The rollback instant.
    pub rollback_instant: String,
    /// Whether an earlier pending rollback was resumed.
    pub resumed: bool,
    /// Files the plan deletes (already-missing files count as deleted).
    pub files_deleted: usize,
    /// Rollback command blocks written (v6 MOR).
    pub log_blocks_written: usize,
    /// What happened in the metadata table.
    pub metadata_table: MetadataTableOutcome,
    /// Wall time.
    pub duration_ms: u64,
    /// How long taking the table lock waited for other holders (scheduling and finishing).
    pub lock_wait_ms: u64,
}

pub(super) fn refused(table: &Table, instant: &str, reason: impl Into<String>) -> Error {
    Error::Refused {
        table: table.uri().to_string(),
        instant: instant.to_string(),
        reason: reason.into(),
    }
}

pub(super) fn plan_err(table: &Table, e: crate::plan::rollback::PlanError) -> Error {
    Error::Plan {
        table: table.uri().to_string(),
        source: e,
    }
}

pub(super) fn avro_err(
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
    fn is_stale(&self, options: &RollbackOptions, now_ms: i64) -> bool {
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

/// The pending instants of a table judged, and what is known about its writers.
#[derive(Debug, Clone)]
pub struct TableAssessment {
    /// Every pending instant, newest first.
    pub assessments: Vec<Assessment>,
    /// What is known about the writers (heartbeat files seen now included), and the writes
    /// left alone.
    pub writers: WritersReport,
}

/// Assess the pending instants of a table (heartbeats read now: one listing of the heartbeat
/// folder when a pending write is there to judge).
pub async fn assess_table(
    table: &Table,
    timeline: &Timeline,
    options: &RollbackOptions,
) -> Result<TableAssessment, Error> {
    let observed = observe(table, timeline).await?;
    let lazy_writers = observed.lazy_writers(options.lazy_writers);
    let input = DetectionInput {
        now_ms: chrono::Utc::now().timestamp_millis(),
        policy: options.policy,
        heartbeat: options.heartbeat,
        heartbeats: &observed.heartbeats,
        replace_kinds: &observed.replace_kinds,
        lazy_writers,
        max_write_duration: options.max_write_duration,
    };
    let assessments = assess(timeline, &input);
    let writers = WritersReport::new(
        options.policy,
        lazy_writers,
        options.max_write_duration,
        observed.heartbeat_files,
        &assessments,
    );
    Ok(TableAssessment {
        assessments,
        writers,
    })
}

/// One unit of work: a target and, if it has one, its pending rollback.
#[derive(Debug, Clone)]
struct Work {
    target: String,
    action: Action,
    state: State,
    reason: String,
    pending: Option<PendingRollback>,
    /// The target's inflight file, if it has one (its workload narrows the cross-check).
    inflight: Option<RelPath>,
}

/// The inflight file of the pending instant `t`, if it has one.
fn inflight_file(timeline: &Timeline, t: &str) -> Option<RelPath> {
    timeline
        .find(t)
        .find(|i| i.is_pending())
        .and_then(|i| i.file(State::Inflight))
        .map(|f| f.path.clone())
}

/// Decide what to roll back: refuses (with the reason) a named instant that must not be.
async fn select(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<Vec<Work>, Error> {
    let timeline = table.timeline().await?;
    if let Some(r) = timeline.pending().find(|i| i.action == Action::Restore) {
        // Hudi's writers refuse to write then; its child rollbacks belong to the restore.
        return Err(refused(
            table,
            &r.requested_time,
            "a restore is pending: the table is in between states until it finishes. Run `hudi-keeper restore` to that instant again (or let Hudi finish it); nothing was rolled back",
        ));
    }
    let (pending, unreadable) = pending_rollbacks(table, &timeline).await?;
    for (r, why) in &unreadable {
        warn!(table = %table.uri(), rollback = %r, error = %why, "pending rollback with an unreadable plan is left alone");
    }
    let assessments = assess_table(table, &timeline, options).await?.assessments;
    let now_ms = chrono::Utc::now().timestamp_millis();
    match selection {
        Selection::Instant(t) => {
            if let Some(p) = pending.get(t) {
                if !options.force && !p.is_stale(options, now_ms) {
                    return Err(refused(
                        table,
                        t,
                        format!("rollback {} of this instant was written moments ago and may still be running in another process; pass --force to resume it now", p.instant),
                    ));
                }
                return Ok(vec![Work {
                    target: t.clone(),
                    action: action_of_plan(&p.plan),
                    state: State::Inflight,
                    reason: format!("resuming pending rollback {}", p.instant),
                    pending: Some(p.clone()),
                    inflight: None,
                }]);
            }
            let instants: Vec<&Instant> = timeline.find(t).collect();
            let Some(instant) = instants.iter().find(|i| i.is_pending()).copied() else {
                return match instants.first() {
                    Some(_) => Err(refused(
                        table,
                        t,
                        "the instant is completed; undoing completed commits is a restore (`hudi-keeper restore`)",
                    )),
                    None => Err(refused(table, t, "the instant is not on the active timeline")),
                };
            };
            if let Some(reason) = non_candidate_reason(instant.action) {
                return Err(refused(
                    table,
                    t,
                    format!("{reason}; hudi-keeper will not roll it back"),
                ));
            }
            let a = assessments
                .iter()
                .find(|a| a.requested_time == *t)
                .ok_or_else(|| refused(table, t, "the instant was not assessed"))?;
            // Naming an instant is the operator's decision for a write nothing proves dead
            // (left alone without heartbeat); one whose writer may be alive needs --force.
            let named = a.verdict.named_rollback();
            let allowed = match named {
                NamedRollback::Allowed => true,
                NamedRollback::NeedsForce => options.force,
                NamedRollback::Never => false,
            };
            if !allowed {
                let hint = match named {
                    NamedRollback::NeedsForce => " (pass --force if you know its writer is gone)",
                    _ => "",
                };
                return Err(refused(
                    table,
                    t,
                    format!("not rolled back: {} — {}{hint}", a.verdict, a.reason),
                ));
            }
            Ok(vec![Work {
                target: t.clone(),
                action: instant.action,
                state: instant.state,
                reason: a.reason.clone(),
                pending: None,
                inflight: instant.file(State::Inflight).map(|f| f.path.clone()),
            }])
        }
        Selection::AllFailed => {
            for (t, p) in pending.iter().filter(|(_, p)| !p.is_stale(options, now_ms)) {
                info!(table = %table.uri(), instant = %t, rollback = %p.instant, "pending rollback is recent and may still be running elsewhere; left for a later run");
            }
            let mut work: Vec<Work> = pending
                .iter()
                .filter(|(_, p)| p.is_stale(options, now_ms))
                .map(|(t, p)| Work {
                    target: t.clone(),
                    action: action_of_plan(&p.plan),
                    state: State::Inflight,
                    reason: format!("resuming pending rollback {}", p.instant),
                    pending: Some(p.clone()),
                    inflight: None,
                })
                .collect();
            for a in assessments.iter().filter(|a| a.verdict.is_failed()) {
                // A target with a pending rollback is that rollback's, resumed or not.
                if !pending.contains_key(&a.requested_time) {
                    work.push(Work {
                        target: a.requested_time.clone(),
                        action: a.action,
                        state: a.state,
                        reason: a.reason.clone(),
                        pending: None,
                        inflight: inflight_file(&timeline, &a.requested_time),
                    });
                }
            }
            work.sort_by(|a, b| b.target.cmp(&a.target));
            Ok(work)
        }
    }
}

pub(super) fn action_of_plan(plan: &RollbackPlan) -> Action {
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
pub(super) async fn list_data_files(
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
pub(super) struct Wanted {
    every: bool,
    instants: BTreeSet<String>,
    paths: BTreeSet<RelPath>,
}

impl Wanted {
    /// Every data file (a savepoint's view needs them all).
    pub(super) fn every() -> Self {
        Self {
            every: true,
            ..Self::default()
        }
    }

    /// The files named with one of `instants`, and `paths`.
    pub(super) fn of(
        instants: impl IntoIterator<Item = String>,
        paths: impl IntoIterator<Item = RelPath>,
    ) -> Self {
        Self {
            every: false,
            instants: instants.into_iter().collect(),
            paths: paths.into_iter().collect(),
        }
    }

    /// Whether a listing keeps the file at `path`.
    pub(super) fn keeps(&self, path: &RelPath) -> bool {
        self.every
            || self.paths.contains(path)
            || DataFile::parse(path.file_name())
                .is_some_and(|d| self.instants.contains(d.instant()))
    }
}

/// The partitions the workload in the target's inflight file names (see
/// [`workload_partitions`]): `Ok(None)` without inflight file or workload, `Err` with why it
/// does not read. A read error is an error; an inflight file gone since the timeline was read
/// (the instant moved on) has no workload, and the re-check under the lock stops the rollback.
async fn read_workload(
    table: &Table,
    work: &Work,
) -> Result<Result<Option<BTreeSet<String>>, String>, Error> {
    let Some(path) = &work.inflight else {
        return Ok(Ok(None));
    };
    let Some(bytes) = table.storage().get_opt(path).await? else {
        return Ok(Ok(None));
    };
    let workload = workload_partitions(&bytes);
    if let Err(why) = &workload {
        warn!(table = %table.uri(), instant = %work.target, path = %path, %why, "the inflight file does not read as commit metadata; the whole table is listed");
    }
    Ok(workload)
}

/// The data files directly in each of `partitions` that `wanted` keeps: one one-level listing
/// per partition, 16 at a time, judged as they stream in.
pub(super) async fn list_partitions(
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

async fn make_plan(
    table: &Table,
    work: &Work,
    options: &RollbackOptions,
) -> Result<(PlannedRollback, ListingScope), Error> {
    let cross_check = options.listing_cross_check;
    let mut scope = ListingScope::None;
    let (markers, data_files) = match work.state {
        State::Requested => (None, vec![]),
        _ if cross_check => {
            // The markers first: the listing then keeps only what the plan uses, the files
            // named with the instant and those its markers name (on v6 merge-on-read tables,
            // log files of older slices it appended to).
            let markers = read_markers(table.storage(), &work.target).await?;
            let named = markers.markers.iter().filter_map(|m| m.data_path().ok());
            let wanted = Wanted::of([work.target.clone()], named);
            let workload = read_workload(table, work).await?;
            scope = listing_scope(
                markers.kind.is_some().then_some(&markers),
                workload
                    .as_ref()
                    .map(Option::as_ref)
                    .map_err(String::as_str),
            );
            let files = match &scope {
                ListingScope::Partitions { partitions, .. } => {
                    list_partitions(table.storage(), partitions, &wanted).await?
                }
                _ => list_data_files(table.storage(), &wanted).await?,
            };
            info!(table = %table.uri(), instant = %work.target, listing = %scope, "cross-check listing");
            (markers.kind.is_some().then_some(markers), files)
        }
        _ => {
            let markers = read_markers(table.storage(), &work.target).await?;
            // Without a listing, only the sizes of appended log files are needed.
            let mut files = Vec::new();
            for m in markers
                .markers
                .iter()
                .filter(|m| m.io_type == crate::protocol::markers::IoType::Append)
            {
                let path = m.data_path()?;
                if let Some(meta) = table.storage().head(&path).await? {
                    files.push(meta);
                }
            }
            (markers.kind.is_some().then_some(markers), files)
        }
    };
    let base = BasePath::from_uri(table.uri());
    let target = PlanTarget {
        requested_time: work.target.clone(),
        action: work.action,
        state: work.state,
    };
    let planned = plan_rollback(&PlanInput {
        version: table.config().version,
        table_type: table.config().table_type,
        base: &base,
        target: &target,
        markers: markers.as_ref(),
        data_files: &data_files,
        cross_check,
    })
    .map_err(|e| plan_err(table, e))?;
    // The dry run names a link on the way as the run would: before anything changes.
    refuse_links(
        table,
        &work.target,
        &planned_changes(table, &work.target, &planned)?,
    )
    .await?;
    Ok((planned, scope))
}

/// What a rollback (or a restore) changes on a local table, looked at for symbolic links
/// before its first change.
#[derive(Debug, Default)]
pub(super) struct Changes {
    /// Files it deletes.
    pub(super) deletes: Vec<RelPath>,
    /// Files it writes (a placeholder name stands for a new file in a folder).
    pub(super) writes: Vec<RelPath>,
    /// Folders it deletes whole, by listing them (marker folders), and the metadata table's.
    pub(super) trees: Vec<RelPath>,
}

impl Changes {
    /// What every rollback of `t` changes besides its plan's files: its timeline files, its
    /// heartbeat and marker folder (and `r`'s, the rollback's own), and the metadata table.
    pub(super) fn around(table: &Table, t: &str, r: Option<&str>) -> Result<Self, Error> {
        let timeline = timeline_file(
            table.config(),
            r.unwrap_or(t),
            None,
            Action::Rollback,
            State::Requested,
        )?;
        let mut trees = vec![marker_dir(t)?, metadata_table_dir()?];
        if let Some(r) = r {
            trees.push(marker_dir(r)?);
        }
        Ok(Self {
            deletes: vec![heartbeat_path(t)?],
            writes: vec![timeline],
            trees,
        })
    }

    /// The deletes of a resolved plan, and the folders its command blocks are written to.
    pub(super) fn add_plan(
        &mut self,
        resolved: &crate::plan::rollback::ResolvedPlan,
    ) -> Result<(), Error> {
        self.deletes.extend(
            resolved
                .deletes
                .values()
                .flat_map(|v| v.iter().map(|(_, rel)| rel.clone())),
        );
        for (partition, file_id, _, _) in &resolved.log_blocks {
            let folder = RelPath::parse(partition).map_err(StorageError::from)?;
            self.writes
                .push(folder.join(file_id).map_err(StorageError::from)?);
        }
        Ok(())
    }
}

fn metadata_table_dir() -> Result<RelPath, Error> {
    Ok(RelPath::parse(METADATA_TABLE_PATH).map_err(StorageError::from)?)
}

/// What a fresh rollback of `t` planned as `planned` changes.
fn planned_changes(table: &Table, t: &str, planned: &PlannedRollback) -> Result<Changes, Error> {
    let mut changes = Changes::around(table, t, None)?;
    changes
        .deletes
        .extend(planned.deletes.iter().map(|d| d.path.clone()));
    changes
        .writes
        .extend(planned.log_blocks.iter().map(|(_, log)| log.clone()));
    Ok(changes)
}

/// Refuse, before the first change, a rollback or restore of `instant` that would delete or
/// write through a symbolic link below the table's base path, or in a table folder that is
/// no longer the folder opened (swapped for a link after it was opened): the local store
/// follows links, so such a change would land outside the table. The refusal names the link
/// (and the dry run shows it). Every mutating request checks its own way again as a last line
/// of defence; this check makes the refusal come before anything changed. Nothing to check on
/// object stores.
pub(super) async fn refuse_links(
    table: &Table,
    instant: &str,
    changes: &Changes,
) -> Result<(), Error> {
    let storage = table.storage();
    if !storage.is_local() {
        return Ok(());
    }
    let checked = async {
        storage.check_way(OpKind::Delete, &changes.deletes).await?;
        storage.check_way(OpKind::Put, &changes.writes).await?;
        for tree in changes.trees.iter().collect::<BTreeSet<_>>() {
            storage.check_tree(OpKind::Delete, tree).await?;
        }
        Ok::<_, StorageError>(())
    };
    match checked.await {
        Ok(()) => Ok(()),
        Err(e) if e.is_link_refusal() => {
            Err(refused(table, instant, format!("{e}; nothing was changed")))
        }
        Err(e) => Err(e.into()),
    }
}

/// How many instants [`rollback`] would roll back (or resume) now: the selection alone, with
/// its refusals of a named instant, without planning (no listing of the table). Changes nothing.
pub async fn count_selected(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<usize, Error> {
    Ok(select(table, selection, options).await?.len())
}

/// Preview what [`rollback`] would do, changing nothing.
pub async fn preview(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
) -> Result<Vec<RollbackPreview>, Error> {
    let mut out = Vec::new();
    for work in select(table, selection, options).await? {
        let timeline = table.timeline().await?;
        let pending = work.pending.as_ref().map(|p| (p.instant.as_str(), p.state));
        if let Some(reason) =
            refusal_before_changes(table, &timeline, &work.target, pending).await?
        {
            return Err(refused(table, &work.target, reason));
        }
        let (plan, deletes, log_blocks, missed, phantom, listing) = match &work.pending {
            Some(p) => {
                let base = BasePath::from_uri(table.uri());
                let resolved = resolve_plan(&p.plan, &base).map_err(|e| plan_err(table, e))?;
                let mut changes = Changes::around(table, &work.target, Some(&p.instant))?;
                changes.add_plan(&resolved)?;
                refuse_links(table, &work.target, &changes).await?;
                let deletes: Vec<PlannedDelete> = resolved
                    .deletes
                    .iter()
                    .flat_map(|(part, files)| {
                        files.iter().map(move |(_, rel)| PlannedDelete {
                            partition: part.clone(),
                            path: rel.clone(),
                            size: None,
                            from_markers: true,
                        })
                    })
                    .collect();
                let blocks = resolved.log_blocks.iter().map(|b| b.3.len()).sum();
                (p.plan.clone(), deletes, blocks, 0, 0, ListingScope::None)
            }
            None => {
                let (planned, listing) = make_plan(table, &work, options).await?;
                let missed = planned.deletes.iter().filter(|d| !d.from_markers).count();
                (
                    planned.plan,
                    planned.deletes,
                    planned.log_blocks.len(),
                    missed,
                    planned.markers_without_files,
                    listing,
                )
            }
        };
        let mut partitions: BTreeMap<String, PartitionPreview> = BTreeMap::new();
        for d in &deletes {
            let p = partitions.entry(d.partition.clone()).or_default();
            p.files += 1;
            p.bytes += d.size.unwrap_or(0);
        }
        out.push(RollbackPreview {
            instant: work.target.clone(),
            action: work.action,
            state: work.state,
            resumes: work.pending.as_ref().map(|p| p.instant.clone()),
            reason: work.reason.clone(),
            files: deletes.len(),
            bytes: deletes.iter().filter_map(|d| d.size).sum(),
            partitions,
            log_blocks,
            files_not_in_markers: missed,
            markers_without_files: phantom,
            listing,
            plan,
        });
    }
    Ok(out)
}

/// Delete the marker folders of completed rollbacks (left when a rollback stopped between its
/// completion and its last clean-up): one listing of `.hoodie/.temp`.
pub async fn sweep(table: &Table) -> Result<usize, Error> {
    let timeline = table.timeline().await?;
    let root = RelPath::parse(crate::protocol::markers::MARKER_ROOT).map_err(StorageError::from)?;
    let mut swept = 0;
    for dir in table.storage().list_dir(&root).await?.dirs {
        let completed_rollback = timeline
            .find(&dir)
            .any(|i| i.action == Action::Rollback && !i.is_pending());
        if completed_rollback {
            let changes = Changes {
                trees: vec![marker_dir(&dir)?],
                ..Changes::default()
            };
            refuse_links(table, &dir, &changes).await?;
            delete_folder(table.storage(), &marker_dir(&dir)?).await?;
            swept += 1;
        }
    }
    Ok(swept)
}

/// Roll back what `selection` names. Stops at the first failure (what is done stays done; a
/// started rollback resumes on the next run).
pub async fn rollback(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<Vec<RollbackDone>, Error> {
    let mut done = Vec::new();
    table.stop_point("before the rollback", None)?;
    if *selection == Selection::AllFailed {
        sweep(table).await?;
    }
    for work in select(table, selection, options).await? {
        let span = info_span!("rollback", table = %table.uri(), instant = %work.target);
        let d = run_one(table, work, options, progress)
            .instrument(span)
            .await?;
        done.push(d);
    }
    Ok(done)
}

/// Under the lock: re-check that the instant is still pending, in the same state, with no
/// rollback scheduled meanwhile; then write `R.rollback.requested`. Returns `R`.
async fn schedule(
    table: &Table,
    work: &Work,
    planned: &PlannedRollback,
    options: &RollbackOptions,
) -> Result<String, Error> {
    let config = table.config();
    let storage = table.storage();
    let t = work.target.as_str();
    // Re-check right before the first mutation: still pending, in the same state, and
    // nobody scheduled a rollback of it meanwhile.
    let timeline = table.timeline().await?;
    let still = timeline
        .find(t)
        .find(|i| i.is_pending() && i.state == work.state);
    if still.is_none() {
        return Err(refused(
            table,
            t,
            "the instant changed state while the rollback was planned; nothing was changed, try again",
        ));
    }
    let (pending, _) = pending_rollbacks(table, &timeline).await?;
    if pending.contains_key(t) {
        return Err(refused(
            table,
            t,
            "another rollback of this instant was scheduled meanwhile; nothing was changed, run again to resume it",
        ));
    }
    if let Some(reason) = metadata_table_refusal(table, t, None).await? {
        return Err(refused(table, t, format!("{reason}; nothing was changed")));
    }
    // The table folder and the way to every path again, under the lock: the folder may have
    // been swapped for a link since the table was opened, or since the plan was made.
    refuse_links(table, t, &planned_changes(table, t, planned)?).await?;
    let mdt_timeline = match table.metadata_table().await? {
        Some(m) if config.metadata_table_enabled() => Some(m.timeline().await?),
        _ => None,
    };
    let mut timelines = vec![&timeline];
    if let Some(m) = &mdt_timeline {
        timelines.push(m);
    }
    let r = new_instant_time(&timelines, table.zone());
    let path = timeline_file(config, &r, None, Action::Rollback, State::Requested)?;
    let bytes = planned
        .plan
        .to_avro()
        .map_err(|e| avro_err(table, t, &path, e))?;
    table.stop_point("before scheduling the rollback", None)?;
    super::journal_start(
        options.journal.as_ref(),
        table,
        super::StartedChange {
            action: Action::Rollback,
            instant: r.clone(),
            target: t.to_string(),
        },
    )
    .await?;
    if !create_if_absent(storage, &path, bytes).await? {
        return Err(refused(
            table,
            t,
            format!("rollback instant {r} already exists; nothing was changed, try again"),
        ));
    }
    Ok(r)
}

/// A stop once `t`'s rollback is scheduled leaves that rollback pending: say so.
pub(super) fn left_pending(e: Error, t: &str) -> Error {
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

async fn run_one(
    table: &Table,
    work: Work,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<RollbackDone, Error> {
    let started = Clock::now();
    let t = work.target.clone();
    let resumed = work.pending.is_some();
    table.stop_point(
        &format!("before rolling back {t}"),
        resumed.then_some(t.as_str()),
    )?;

    let mut schedule_wait = Duration::ZERO;
    let (r, plan, r_state) = match work.pending.clone() {
        Some(p) => (p.instant, p.plan, p.state),
        None => {
            let (planned, _) = make_plan(table, &work, options).await?;
            let (w, p) = (&work, &planned);
            let (r, waited) = locked(table, options, |t| async move {
                schedule(&t, w, p, options).await
            })
            .await?;
            schedule_wait = waited;
            info!(rollback_instant = %r, files = planned.deletes.len(), "scheduled rollback");
            (r, planned.plan, State::Requested)
        }
    };

    // From here on the rollback is pending: a stop leaves it for a rerun to resume.
    table.stop_point(&format!("rollback {r} is scheduled"), Some(&t))?;
    let span = info_span!("execute", rollback_instant = %r);
    let mut done = execute(
        table, &t, &r, &plan, r_state, resumed, options, progress, started,
    )
    .instrument(span)
    .await
    .map_err(|e| left_pending(e, &t))?;
    done.lock_wait_ms += schedule_wait.as_millis() as u64;
    Ok(done)
}

#[allow(clippy::too_many_arguments)]
async fn execute(
    table: &Table,
    t: &str,
    r: &str,
    plan: &RollbackPlan,
    r_state: State,
    resumed: bool,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
    started: Clock,
) -> Result<RollbackDone, Error> {
    let storage = table.storage();
    let config = table.config();
    let base = BasePath::from_uri(table.uri());
    let resolved = resolve_plan(plan, &base).map_err(|e| plan_err(table, e))?;
    let action = action_of_plan(plan);

    // Before this run changes anything, refuse what must not go on (a rollback this run
    // scheduled is withdrawn then: nothing was deleted yet).
    if resumed {
        let timeline = table.timeline().await?;
        if let Some(reason) =
            refusal_before_changes(table, &timeline, t, Some((r, r_state))).await?
        {
            return Err(refused(table, t, reason));
        }
        let mut changes = Changes::around(table, t, Some(r))?;
        changes.add_plan(&resolved)?;
        refuse_links(table, t, &changes).await?;
    } else if let Some(reason) = metadata_table_refusal(table, t, Some(r)).await? {
        withdraw(table, r).await?;
        return Err(refused(
            table,
            t,
            format!("{reason}; rollback {r} was withdrawn and nothing was deleted"),
        ));
    }

    if r_state == State::Requested {
        let inflight = timeline_file(config, r, None, Action::Rollback, State::Inflight)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
    }

    // Last look before the first delete of a fresh rollback: if the writer completed the
    // instant after all, withdraw the rollback; nothing was deleted yet.
    if !resumed {
        let timeline = table.timeline().await?;
        if timeline.find(t).any(|i| !i.is_pending()) {
            withdraw(table, r).await?;
            return Err(refused(
                table,
                t,
                format!("the instant completed while rollback {r} was being scheduled; the rollback was withdrawn and nothing was deleted"),
            ));
        }
    }

    let rollback_log_files = apply_plan(table, t, r, &resolved, options, progress).await?;

    // The target's markers and heartbeat: the plan is all a rerun needs, so they go now,
    // before completing (a crash leaves nothing a rerun would not clean) and outside the lock.
    delete_folder(storage, &marker_dir(t)?).await?;
    storage.delete(&heartbeat_path(t)?).await?;

    // Finishing, under the table lock as Hudi does: the metadata table, then the target's
    // timeline files, then the completed rollback.
    table.stop_point("after the deletes, before finishing", None)?;
    let (resolved_ref, log_files) = (&resolved, &rollback_log_files);
    let ((mdt, metadata), lock_waited) = locked(table, options, |fenced| async move {
        finish(
            &fenced,
            t,
            r,
            action,
            plan,
            resolved_ref,
            log_files,
            options,
            started,
        )
        .await
    })
    .await?;

    // The rollback's own markers (v6 MOR command blocks); a crash here leaves them for
    // `sweep` to find.
    delete_folder(storage, &marker_dir(r)?).await?;

    Ok(RollbackDone {
        instant: t.to_string(),
        action: action.as_str().to_string(),
        rollback_instant: r.to_string(),
        resumed,
        files_deleted: metadata.total_files_deleted as usize,
        log_blocks_written: resolved.log_blocks.len(),
        metadata_table: mdt,
        duration_ms: started.elapsed().as_millis() as u64,
        lock_wait_ms: lock_waited.as_millis() as u64,
    })
}

/// The deletes of a resolved plan (a missing file counts as deleted; on the local file system
/// Hadoop's checksum side file `.<name>.crc` goes too, as Hadoop's own delete does), then the v6
/// MOR rollback command blocks. Returns the command-block log files by partition.
pub(super) async fn apply_plan(
    table: &Table,
    t: &str,
    r: &str,
    resolved: &crate::plan::rollback::ResolvedPlan,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<BTreeMap<String, BTreeMap<String, i64>>, Error> {
    let storage = table.storage();
    let base = BasePath::from_uri(table.uri());
    let mut all: Vec<RelPath> = resolved
        .deletes
        .values()
        .flat_map(|v| v.iter().map(|(_, rel)| rel.clone()))
        .collect();
    if table.uri().starts_with("file:") {
        let sidecars: Vec<RelPath> = all
            .iter()
            .filter_map(|rel| rel.parent().join(&format!(".{}.crc", rel.file_name())).ok())
            .collect();
        all.extend(sidecars);
    }
    if let Some(p) = progress {
        p.start(t, all.len());
    }
    // In batches, with a safe point before each: any subset of the plan's deletes may be done
    // when a rerun resumes it.
    let mut deleted = Vec::with_capacity(all.len());
    let mut paths = all.into_iter();
    loop {
        let batch: Vec<RelPath> = paths.by_ref().take(DELETE_BATCH).collect();
        if batch.is_empty() {
            break;
        }
        table.stop_point("between batches of deletes", None)?;
        let results = storage
            .delete_many_with(batch, options.delete_concurrency, || {
                if let Some(p) = progress {
                    p.deleted();
                }
            })
            .await;
        for (path, result) in results {
            if let Err(source) = result {
                return Err(Error::Delete {
                    table: table.uri().to_string(),
                    instant: t.to_string(),
                    path: path.to_string(),
                    source: Box::new(source),
                });
            }
            deleted.push(path);
        }
    }
    confirm_gone(table, t, &deleted).await?;

    let mut rollback_log_files: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (partition, file_id, base_instant, _) in &resolved.log_blocks {
        // v8/v9 (Hudi 1.0.1 / 1.1.1 RollbackHelper): the new log file is named with the instant
        // itself, with the write token of Hudi's Java engine; v6: the slice's base instant.
        let (base_instant, token) = if table.config().version == crate::table::TableVersion::V6 {
            (base_instant.as_str(), UNKNOWN_WRITE_TOKEN)
        } else {
            (t, V8_ROLLBACK_WRITE_TOKEN)
        };
        let (rel, len) =
            write_command_block(storage, r, t, partition, file_id, base_instant, token).await?;
        rollback_log_files
            .entry(partition.clone())
            .or_default()
            .insert(base.render_qualified(&rel), len);
    }
    Ok(rollback_log_files)
}

/// Prove the deleted files gone: one listing of each folder they were in, a few at a time.
/// A delete counts only once the store confirmed it *and* no listing shows the key: the local
/// store and S3 confirm a delete of a key they do not have, so a wrongly addressed key would
/// look deleted while the file stays. A file still listed fails the rollback before it
/// completes.
pub(super) async fn confirm_gone(table: &Table, t: &str, deleted: &[RelPath]) -> Result<(), Error> {
    let mut by_folder: BTreeMap<RelPath, std::collections::BTreeSet<String>> = BTreeMap::new();
    for p in deleted {
        by_folder
            .entry(p.parent())
            .or_default()
            .insert(p.file_name().to_string());
    }
    let storage = table.storage().clone();
    // Each listing keeps only the names it checks, however many files the folder has.
    let mut listings = futures::stream::iter(by_folder)
        .map(move |(dir, names)| {
            let storage = storage.clone();
            async move {
                storage
                    .list_dir_filtered(&dir, |p| names.contains(p.file_name()))
                    .await
            }
        })
        .buffer_unordered(8);
    while let Some(listing) = listings.next().await {
        if let Some(f) = listing?.files.first() {
            return Err(Error::StillListed {
                table: table.uri().to_string(),
                instant: t.to_string(),
                path: f.path.to_string(),
            });
        }
    }
    Ok(())
}

/// The end of a rollback, under the lock: the metadata table's rollback, the target's
/// inflight then requested file, the completed rollback.
#[allow(clippy::too_many_arguments)]
async fn finish(
    table: &Table,
    t: &str,
    r: &str,
    action: Action,
    plan: &RollbackPlan,
    resolved: &crate::plan::rollback::ResolvedPlan,
    rollback_log_files: &BTreeMap<String, BTreeMap<String, i64>>,
    options: &RollbackOptions,
    started: Clock,
) -> Result<(MetadataTableOutcome, RollbackMetadata), Error> {
    let storage = table.storage();
    let config = table.config();
    table.stop_point("under the lock, before finishing", None)?;
    // Under the lock, before finishing changes anything: another process may have finished
    // this rollback, the writer may have completed the instant after all, the metadata table
    // may have compacted meanwhile.
    let timeline = table.timeline().await?;
    if rollback_completed(&timeline, r) {
        return Err(refused(table, t, completed_elsewhere(r)));
    }
    if timeline.find(t).any(|i| !i.is_pending()) {
        return Err(refused(
            table,
            t,
            format!("the instant completed while rollback {r} was running; its rollback stays pending for an operator to look at"),
        ));
    }
    if let Some(reason) = metadata_table_refusal(table, t, Some(r)).await? {
        return Err(refused(
            table,
            t,
            format!("{reason}; rollback {r} stays pending"),
        ));
    }
    // The metadata table, before the data table's timeline changes.
    // Table version 6 records the rollback's log files in the metadata table's `files`
    // partition, from the rollback metadata (the same that is completed below).
    let records = crate::plan::metadata_table::rollback_file_records(&rollback_metadata(
        r,
        t,
        action,
        plan,
        resolved,
        rollback_log_files,
        started,
    ));
    let mdt = rollback_metadata_table(table, t, r, &records, options).await?;
    table.stop_point("after the metadata table's rollback", None)?;

    // The target's own timeline files: inflight first, then requested.
    let timeline = table.timeline().await?;
    let mut own: Vec<_> = timeline
        .find(t)
        .filter(|i| i.is_pending() && i.action.completed_action() == action.completed_action())
        .flat_map(|i| i.files.clone())
        .collect();
    own.sort_by_key(|f| std::cmp::Reverse(f.name.state));
    for f in own {
        storage.delete(&f.path).await?;
    }

    // The completed rollback.
    let metadata = rollback_metadata(r, t, action, plan, resolved, rollback_log_files, started);
    let completion = match config.timeline_layout {
        crate::table::TimelineLayout::V1 => None,
        crate::table::TimelineLayout::V2 => {
            let timeline = table.timeline().await?;
            Some(new_instant_time(&[&timeline], table.zone()))
        }
    };
    let path = timeline_file(
        config,
        r,
        completion.as_deref(),
        Action::Rollback,
        State::Completed,
    )?;
    let bytes = metadata
        .to_avro()
        .map_err(|e| avro_err(table, t, &path, e))?;
    create_if_absent(storage, &path, bytes).await?;
    info!(files = metadata.total_files_deleted, "rollback completed");

    Ok((mdt, metadata))
}

/// Whether rollback `r` has a completed file on `timeline`.
fn rollback_completed(timeline: &Timeline, r: &str) -> bool {
    timeline
        .find(r)
        .any(|i| i.action == Action::Rollback && !i.is_pending())
}

fn completed_elsewhere(r: &str) -> String {
    format!("rollback {r} was completed by another process meanwhile; there is nothing left to do and nothing more was written")
}

/// Why a rollback of `t` must not change anything now, checked right before its first change
/// (and by the dry run). `pending` is the pending rollback being resumed, with its state.
///
/// A pending rollback whose instant has completed since (its writer was alive after all) is
/// refused. Hudi's writers resume every pending rollback (`getPendingRollbackInfos`) and
/// roll the completed commit back with it (`revertToInflight`, then the plan's deletes):
/// hudi-keeper never undoes a completed commit that way, and says how to get out.
async fn refusal_before_changes(
    table: &Table,
    timeline: &Timeline,
    t: &str,
    pending: Option<(&str, State)>,
) -> Result<Option<String>, Error> {
    if let Some((r, r_state)) = pending {
        if rollback_completed(timeline, r) {
            return Ok(Some(completed_elsewhere(r)));
        }
        if timeline.find(t).any(|i| !i.is_pending()) {
            let requested =
                timeline_file(table.config(), r, None, Action::Rollback, State::Requested)?;
            let inflight =
                timeline_file(table.config(), r, None, Action::Rollback, State::Inflight)?;
            let way_out = match r_state {
                State::Requested => format!(
                    "It never started, so no file was deleted: remove `{requested}` (before the next Hudi write or clean, which would resume it)"
                ),
                _ => format!(
                    "It had started, so files of the commit may be gone: check the commit, and restore the table to a commit before it if it is damaged (`hudi-keeper restore --to-instant`, which also removes the rollback), or remove `{inflight}` and `{requested}` if it is intact (before the next Hudi write or clean, which would resume it)"
                ),
            };
            return Ok(Some(format!(
                "rollback {r} of this instant is pending, but the instant has completed since (its writer was alive after all). Resuming the rollback would delete files of a completed commit, as Hudi would when it resumes it; nothing was changed. {way_out}"
            )));
        }
    }
    Ok(metadata_table_refusal(table, t, pending.map(|(r, _)| r))
        .await?
        .map(|reason| format!("{reason}; nothing was changed")))
}

/// Delete a rollback this run scheduled (inflight, then requested), before anything of its
/// plan was deleted.
async fn withdraw(table: &Table, r: &str) -> Result<(), Error> {
    for state in [State::Inflight, State::Requested] {
        let path = timeline_file(table.config(), r, None, Action::Rollback, state)?;
        table.storage().delete(&path).await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rollback_metadata(
    r: &str,
    t: &str,
    action: Action,
    plan: &RollbackPlan,
    resolved: &crate::plan::rollback::ResolvedPlan,
    rollback_log_files: &BTreeMap<String, BTreeMap<String, i64>>,
    started: Clock,
) -> RollbackMetadata {
    let mut partitions: BTreeMap<String, RollbackPartitionMetadata> = BTreeMap::new();
    for req in plan.requests.iter().flatten() {
        let p = partitions
            .entry(req.partition_path.clone())
            .or_insert_with(|| RollbackPartitionMetadata {
                partition_path: req.partition_path.clone(),
                rollback_log_files: Some(BTreeMap::new()),
                log_files_from_failed_commit: Some(BTreeMap::new()),
                ..Default::default()
            });
        if let Some(logs) = &req.log_blocks_to_be_deleted {
            // As Java records them: the plan's keys and sizes on table version 6 (whose requests
            // name the older slice's base instant); none from 1.x's requests for v8/v9 APPEND
            // markers (base instant = the instant itself; Hudi 1.0.1 / 1.1.1's RollbackHelper
            // fills only rollbackLogFiles).
            let v8_form = req.latest_base_instant.as_deref() == Some(t);
            if req.files_to_be_deleted.is_empty() && !v8_form {
                p.log_files_from_failed_commit
                    .get_or_insert_with(BTreeMap::new)
                    .extend(logs.iter().map(|(k, v)| (k.clone(), *v)));
            }
        }
    }
    for (partition, files) in &resolved.deletes {
        if let Some(p) = partitions.get_mut(partition) {
            p.success_delete_files
                .extend(files.iter().map(|(abs, _)| abs.clone()));
        }
    }
    for (partition, logs) in rollback_log_files {
        if let Some(p) = partitions.get_mut(partition) {
            p.rollback_log_files
                .get_or_insert_with(BTreeMap::new)
                .extend(logs.clone());
        }
    }
    let total: usize = resolved.deletes.values().map(Vec::len).sum();
    RollbackMetadata {
        start_rollback_time: r.to_string(),
        time_taken_in_millis: started.elapsed().as_millis() as i64,
        total_files_deleted: total as i32,
        commits_rollback: vec![t.to_string()],
        partition_metadata: partitions,
        version: Some(1),
        instants_rollback: vec![InstantInfo {
            commit_time: t.to_string(),
            action: action.as_str().to_string(),
        }],
    }
}

/// Write one rollback command block into a new log version of the file slice, reusing one an
/// earlier attempt of the same rollback wrote (found through its APPEND marker).
async fn write_command_block(
    storage: &Storage,
    r: &str,
    t: &str,
    partition: &str,
    file_id: &str,
    base_instant: &str,
    write_token: &str,
) -> Result<(RelPath, i64), Error> {
    let slice = Slice {
        partition,
        file_id,
        base_instant,
        write_token,
    };
    let block = rollback_command_block(r, t);
    append_block(storage, t, &marker_dir(r)?, &slice, &block, |bytes| {
        is_rollback_block_for(bytes, r, t)
    })
    .await
}

/// Delete every object below `dir`. Missing objects count as deleted.
pub(super) async fn delete_folder(storage: &Storage, dir: &RelPath) -> Result<(), Error> {
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
