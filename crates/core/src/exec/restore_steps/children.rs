//! A restore's children: one child rollback per instant it undoes, never completed. Their plans
//! are made before the restore changes anything (and again on every resume, from the table as
//! it is then); each child deletes the instant's completed file, applies its plan, then removes
//! the instant's markers and its other timeline files.

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use tracing::{info, warn};

use crate::exec::steps::apply::{apply_plan, rollback_metadata};
use crate::exec::steps::claim::RollbackClaim;
use crate::exec::steps::{
    action_of_plan, avro_err, delete_folder, list_data_files, pending_rollbacks, plan_err, refused,
    PendingRollback, Progress, RollbackOptions, Wanted,
};
use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::rollback::{RollbackMetadata, RollbackPlan};
use crate::plan::restore::Undo;
use crate::plan::rollback::{plan_rollback, resolve_plan, PlanInput, PlanTarget};
use crate::protocol::markers::{marker_dir, read_markers, IoType, Marker, MarkerKind, Markers};
use crate::storage::FileMeta;
use crate::table::files::{BasePath, DataFile};
use crate::table::{Table, TableType};
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// A restore's children, prepared before it changes anything (and again on every resume,
/// from the table as it is then).
pub(in crate::exec) struct Children {
    /// Child rollbacks an earlier attempt scheduled, by the instant they undo.
    pub(in crate::exec) pending: BTreeMap<String, PendingRollback>,
    pub(in crate::exec) inputs: ChildInputs,
    /// The child rollback plan of every instant still to plan, made from `inputs` before the
    /// restore's first change: one that cannot be made refuses the restore up front.
    pub(in crate::exec) plans: BTreeMap<String, RollbackPlan>,
}

/// Read what the children of a restore undoing `undo` are made from and make every child
/// plan not yet scheduled. Reads only.
pub(in crate::exec) async fn prepare_children(
    table: &Table,
    timeline: &Timeline,
    undo: &[Undo],
) -> Result<Children, Error> {
    let (pending, _) = pending_rollbacks(table, timeline).await?;
    let inputs = child_inputs(table, timeline, undo, &pending).await?;
    let mut plans = BTreeMap::new();
    for u in undo {
        if inputs.markers.contains_key(&u.instant) {
            plans.insert(u.instant.clone(), child_plan(table, u, &inputs)?);
        }
    }
    Ok(Children {
        pending,
        inputs,
        plans,
    })
}

/// What the child plans of a restore are made from.
pub(in crate::exec) struct ChildInputs {
    /// Per instant still to plan, what tells its files apart ([`child_markers`]).
    markers: BTreeMap<String, Option<Markers>>,
    /// The data files those plans can use: files named with an instant the restore undoes,
    /// and files the markers name. Nothing else of the table is held.
    pub(in crate::exec) files: Vec<FileMeta>,
    /// Whether `files` gained files an earlier child wrote (command-block log files) since
    /// the plans were made: a later instant's plan is then made again.
    grown: bool,
}

/// Read the markers of every instant of `undo` that still needs a plan (no pending child
/// rollback, still on the timeline), then list the table keeping only the files their plans
/// can use, so memory follows the instants undone, not the size of the table.
pub(in crate::exec) async fn child_inputs(
    table: &Table,
    timeline: &Timeline,
    undo: &[Undo],
    pending: &BTreeMap<String, PendingRollback>,
) -> Result<ChildInputs, Error> {
    let mut markers = BTreeMap::new();
    for u in undo {
        let on_timeline = timeline.find(&u.instant).any(|i| i.action.is_write());
        if pending.contains_key(&u.instant) || !on_timeline {
            continue;
        }
        markers.insert(u.instant.clone(), child_markers(table, u).await?);
    }
    let named = markers
        .values()
        .flatten()
        .flat_map(|m| m.markers.iter().filter_map(|m| m.data_path().ok()));
    let mut wanted = Wanted::of(undo.iter().map(|u| u.instant.clone()), named);
    if table.config().version == crate::config::TableVersion::V5 {
        // the log files of the slices version-5 APPEND markers name by their base file
        for m in markers.values().flatten() {
            wanted = wanted.with_v5_append_slices(m);
        }
    }
    let files = list_data_files(table.storage(), &wanted).await?;
    Ok(ChildInputs {
        markers,
        files,
        grown: false,
    })
}

/// What ties files to an instant a restore undoes, besides their names: on v6 merge-on-read
/// tables the log files a completed deltacommit appended to (from its commit metadata), a
/// pending instant's markers; `None` for other completed instants.
async fn child_markers(table: &Table, u: &Undo) -> Result<Option<Markers>, Error> {
    let config = table.config();
    let v6_mor = config.version.is_0x() && config.table_type == TableType::MergeOnRead;
    Ok(match u.state {
        State::Completed if v6_mor && u.action == Action::DeltaCommit => {
            Some(appended_by(table, &u.instant).await?)
        }
        State::Completed => None,
        _ => {
            let m = read_markers(table.storage(), &u.instant).await?;
            m.kind.is_some().then_some(m)
        }
    })
}

/// The rollback plan of one instant a restore undoes. A completed instant's is listing-based,
/// as Hudi's restore makes it: every data file named with the instant, and on v6 merge-on-read
/// tables the log files its commit metadata says it appended to (they get command blocks). A
/// pending instant's comes from its markers, cross-checked against the listing.
pub(in crate::exec) fn child_plan(
    table: &Table,
    u: &Undo,
    inputs: &ChildInputs,
) -> Result<crate::format::rollback::RollbackPlan, Error> {
    let config = table.config();
    let Some(markers) = inputs.markers.get(&u.instant) else {
        return Err(refused(
            table,
            &u.instant,
            "its markers were not read before the listing; run the restore again",
        ));
    };
    let base = BasePath::from_uri(table.uri());
    let target = PlanTarget {
        requested_time: u.instant.clone(),
        action: u.action,
        state: match u.state {
            State::Completed => State::Inflight,
            s => s,
        },
    };
    let planned = plan_rollback(&PlanInput {
        version: config.version,
        table_type: config.table_type,
        base: &base,
        target: &target,
        markers: markers.as_ref(),
        data_files: &inputs.files,
        cross_check: true,
    })
    .map_err(|e| plan_err(table, e))?;
    Ok(planned.plan)
}

/// The files a completed v6 merge-on-read deltacommit wrote, from its commit metadata (JSON in
/// layout 1), as markers: the log files it appended to older file slices are named by their
/// base instant, so only the commit metadata ties them to the instant.
async fn appended_by(table: &Table, instant: &str) -> Result<Markers, Error> {
    let timeline = table.timeline().await?;
    let file = timeline
        .find(instant)
        .find(|i| !i.is_pending())
        .and_then(|i| i.file(State::Completed).cloned())
        .ok_or_else(|| {
            refused(
                table,
                instant,
                "its completed file disappeared while planning",
            )
        })?;
    let bytes = table.storage().get(&file.path).await?;
    let config = table.config();
    let v5 = config.version == crate::config::TableVersion::V5;
    let bad = |why: String| {
        refused(
            table,
            instant,
            format!(
                "its commit metadata `{}` is unreadable ({why}), so the log files it appended to cannot be found; nothing was changed",
                file.path
            ),
        )
    };
    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let stats = v
        .get("partitionToWriteStats")
        .and_then(|s| s.as_object())
        .ok_or_else(|| bad("no partitionToWriteStats".into()))?;
    let mut markers = Vec::new();
    for (partition, list) in stats {
        for stat in list.as_array().into_iter().flatten() {
            let Some(path) = stat.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let name = path.rsplit('/').next().unwrap_or(path);
            let (io_type, file_name) = match DataFile::parse(name) {
                // Table version 5 plans an appended slice as Hudi 0.13's markers name it: by
                // the slice's base file (its latest log file gets the command block).
                Some(DataFile::Log {
                    file_id,
                    instant,
                    write_token,
                    ..
                }) if v5 => (
                    IoType::Append,
                    format!(
                        "{file_id}_{write_token}_{instant}.{}",
                        config.base_file_format.to_ascii_lowercase()
                    ),
                ),
                Some(DataFile::Log { .. }) => (IoType::Append, name.to_string()),
                Some(DataFile::Base { .. }) => (IoType::Create, name.to_string()),
                None => return Err(bad(format!("`{path}` is not a data file name"))),
            };
            markers.push(Marker {
                partition: partition.clone(),
                file_name,
                io_type,
            });
        }
    }
    markers.sort_by(|a, b| (&a.partition, &a.file_name).cmp(&(&b.partition, &b.file_name)));
    markers.dedup();
    Ok(Markers {
        kind: Some(MarkerKind::Direct),
        markers,
        folders: Default::default(),
    })
}

/// Undo one instant with a child rollback that is never completed. `None` when it was undone
/// by an earlier attempt. Returns the child rollback instant, its metadata and the number of
/// command blocks written; `files` gains the command-block log files written. `planned` is the
/// plan made before the restore changed anything; it is used unless earlier children wrote
/// files since (then the plan is made again, from the inputs with those files).
pub(super) async fn undo_one(
    table: &Table,
    u: &Undo,
    pending: Option<&PendingRollback>,
    planned: Option<RollbackPlan>,
    inputs: &mut ChildInputs,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<Option<(String, RollbackMetadata, usize)>, Error> {
    let started = Clock::now();
    let storage = table.storage();
    let config = table.config();
    let t = u.instant.as_str();
    let timeline = table.timeline().await?;
    let (r, plan, r_state) = match pending {
        Some(p) => (p.instant.clone(), p.plan.clone(), p.state),
        None => {
            if timeline.find(t).all(|i| !i.action.is_write()) {
                return Ok(None);
            }
            let plan = match planned {
                Some(plan) if !inputs.grown => plan,
                _ => child_plan(table, u, inputs)?,
            };
            let r = new_instant_time(&[&timeline], table.zone());
            let path = timeline_file(config, &r, None, Action::Rollback, State::Requested)?;
            let bytes = plan.to_avro().map_err(|e| avro_err(table, t, &path, e))?;
            if !create_if_absent(storage, &path, bytes).await? {
                return Err(refused(
                    table,
                    t,
                    format!("rollback instant {r} already exists; run the restore again"),
                ));
            }
            (r, plan, State::Requested)
        }
    };
    // The child's rollback heartbeat, as Hudi 1.2 takes it, under the restore's lock; every
    // change of the child is fenced by it.
    let claim = RollbackClaim::take(table, storage, t, &r, pending.is_none(), options).await?;
    let child = Child {
        t,
        r: &r,
        plan: &plan,
        r_state,
        started,
    };
    let result = undo_claimed(
        &claim.fence(table, options),
        &child,
        inputs,
        options,
        progress,
    )
    .await;
    match &result {
        Ok(_) => claim.release().await,
        Err(_) => claim.abandon().await,
    }
    result.map(Some)
}

/// One child rollback of a restore, scheduled and claimed.
struct Child<'a> {
    /// The instant undone.
    t: &'a str,
    /// The child rollback instant.
    r: &'a str,
    plan: &'a RollbackPlan,
    r_state: State,
    started: Clock,
}

/// Run scheduled child rollback `c` (see [`undo_one`]).
async fn undo_claimed(
    table: &Table,
    c: &Child<'_>,
    inputs: &mut ChildInputs,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<(String, RollbackMetadata, usize), Error> {
    let (t, r, plan) = (c.t, c.r, c.plan);
    let storage = table.storage();
    if c.r_state == State::Requested {
        let inflight = timeline_file(table.config(), r, None, Action::Rollback, State::Inflight)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
    }
    let base = BasePath::from_uri(table.uri());
    let resolved = resolve_plan(plan, &base).map_err(|e| plan_err(table, e))?;

    // The instant's timeline files: its completed file first (from here on readers ignore it),
    // and its inflight and requested files once its data is gone.
    let mut own: Vec<_> = table
        .timeline()
        .await?
        .find(t)
        .filter(|i| i.action.is_write())
        .flat_map(|i| i.files.clone())
        .collect();
    own.sort_by_key(|f| std::cmp::Reverse(f.name.state));
    if let Some(done) = own.iter().find(|f| f.name.state == State::Completed) {
        storage.delete(&done.path).await?;
    }
    let log_files = apply_plan(table, t, r, &resolved, options, progress).await?;
    for (partition, logs) in &log_files {
        for abs in logs.keys() {
            if let Ok(rel) = base.resolve(abs) {
                if let Some(meta) = storage.head(&rel).await? {
                    inputs.files.push(meta);
                    inputs.grown = true;
                }
            } else {
                warn!(partition, log = %abs, "command block outside the table?");
            }
        }
    }
    // Its markers go; its heartbeat stays, as Hudi's restore leaves it (a dead writer's
    // heartbeat names an instant that no longer exists, which nothing reads).
    delete_folder(storage, &marker_dir(t)?).await?;
    for f in own.iter().filter(|f| f.name.state != State::Completed) {
        storage.delete(&f.path).await?;
    }
    let metadata = rollback_metadata(
        r,
        t,
        action_of_plan(plan),
        plan,
        &resolved,
        &log_files,
        c.started,
    );
    info!(rollback_instant = %r, files = metadata.total_files_deleted, "undone");
    Ok((r.to_string(), metadata, resolved.log_blocks.len()))
}
