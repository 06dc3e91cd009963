//! Rollback planning (hudi-format.md §5.1-5.4): which files of a failed instant to delete, and
//! which log files need a rollback command block (v5/v6 merge-on-read appends to older slices; on
//! v8/v9 log files with an APPEND marker). Pure.
//!
//! Version 5 (Hudi 0.12/0.13) plans as Hudi 0.13.1's `MarkerBasedRollbackStrategy`: its writers
//! name an APPEND marker after the file slice's *base file* (`<fileId>_<token>_<base>.parquet.
//! marker.APPEND`, before HUDI-1517), and the command block goes to the slice's latest log file,
//! recorded with its qualified path and the size -1; a CREATE marker's request carries no file
//! group or base instant.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::config::{TableType, TableVersion};
use crate::format::rollback::{InstantInfo, RollbackPlan, RollbackRequest};
use crate::protocol::markers::{IoType, Markers};
use crate::storage::{FileMeta, RelPath};
use crate::table::files::{BasePath, DataFile};
use crate::timeline::{Action, State};

pub use crate::error::PlanError;

/// The instant a plan is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanTarget {
    /// Its time.
    pub requested_time: String,
    /// Its pending action (what the plan records).
    pub action: Action,
    /// Its state when planned.
    pub state: State,
}

/// Everything a rollback plan is made from.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// Table version.
    pub version: TableVersion,
    /// Table type.
    pub table_type: TableType,
    /// How absolute paths of this table are written.
    pub base: &'a BasePath,
    /// The instant to roll back.
    pub target: &'a PlanTarget,
    /// Its markers (`None` when it has no marker folder).
    pub markers: Option<&'a Markers>,
    /// Data files that exist: a listing of every partition (`.hoodie/` excluded) when
    /// `cross_check` is set, else at least the log files that APPEND markers name.
    pub data_files: &'a [FileMeta],
    /// Whether `data_files` is a full listing, to cross-check the markers against: every file
    /// named with the instant is deleted, markers or not.
    pub cross_check: bool,
}

/// One file a plan will delete, with its size when known (for dry runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedDelete {
    /// Its partition.
    pub partition: String,
    /// Its path.
    pub path: RelPath,
    /// Its size, if it exists now.
    pub size: Option<u64>,
    /// Whether markers named it (otherwise only the listing found it).
    pub from_markers: bool,
}

/// A plan with what was learned making it.
#[derive(Debug, Clone)]
pub struct PlannedRollback {
    /// The plan as Hudi stores it.
    pub plan: RollbackPlan,
    /// Every file it deletes.
    pub deletes: Vec<PlannedDelete>,
    /// Log files that get a rollback command block: on v6 MOR those a failed write appended to
    /// in an older file slice; on v8/v9 those an APPEND marker names (the block goes into a new
    /// log file of the file group named with the instant).
    pub log_blocks: Vec<(String, RelPath)>,
    /// Markers naming files that do not exist (harmless; reported).
    pub markers_without_files: usize,
}

/// What told a rollback which partitions its instant wrote to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeSource {
    /// The partitions its markers name.
    Markers,
    /// The partition folders below its (direct) marker folder.
    MarkerFolder,
    /// The partitions of the workload in its inflight file.
    Workload,
}

/// Where a rollback's listing cross-check looks for files of the failed instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingScope {
    /// No listing: the instant was only requested (it wrote nothing), or the cross-check is off.
    None,
    /// One-level listings of the partitions the instant itself says it wrote to: what its
    /// markers name, the partition folders below its marker folder and the workload in its
    /// inflight file, together. The cost follows the failed write, not the table.
    Partitions {
        /// The partitions (the table root for a non-partitioned table).
        partitions: BTreeSet<RelPath>,
        /// What named them.
        sources: BTreeSet<ScopeSource>,
    },
    /// A listing of every partition: the instant names none, or names them in a way that
    /// cannot be trusted.
    WholeTable {
        /// Why.
        why: String,
    },
}

impl ListingScope {
    /// How many partitions are listed one by one (`None` for the whole table or no listing).
    pub fn partition_count(&self) -> Option<usize> {
        match self {
            ListingScope::Partitions { partitions, .. } => Some(partitions.len()),
            _ => None,
        }
    }
}

impl Serialize for ListingScope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            ListingScope::None => m.serialize_entry("scope", "none")?,
            ListingScope::Partitions {
                partitions,
                sources,
            } => {
                m.serialize_entry("scope", "partitions")?;
                m.serialize_entry("partitions", &partitions.len())?;
                m.serialize_entry("sources", sources)?;
            }
            ListingScope::WholeTable { why } => {
                m.serialize_entry("scope", "whole_table")?;
                m.serialize_entry("why", why)?;
            }
        }
        m.end()
    }
}

impl std::fmt::Display for ListingScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListingScope::None => f.write_str("no listing"),
            ListingScope::Partitions {
                partitions,
                sources,
            } => {
                let from: Vec<&str> = sources
                    .iter()
                    .map(|s| match s {
                        ScopeSource::Markers => "markers",
                        ScopeSource::MarkerFolder => "marker folder",
                        ScopeSource::Workload => "inflight workload",
                    })
                    .collect();
                write!(
                    f,
                    "{} partition(s) the instant names ({})",
                    partitions.len(),
                    from.join(", ")
                )
            }
            ListingScope::WholeTable { why } => write!(f, "the whole table: {why}"),
        }
    }
}

/// Which partitions a rollback's cross-check lists (pure). `markers`: what the instant's marker
/// folder holds (`None` or no kind: there is none); `workload`: the partitions its inflight file
/// names (`Ok(None)`: it names none, `Err`: it could not be read as commit metadata). Every
/// source that exists counts, so a file a marker missed is still found wherever the workload
/// or the marker folder places the write; only when no source names a partition is the whole
/// table listed. A partition that is not a path inside the table, or an unreadable workload,
/// also lists the whole table: narrowing is never done on doubtful input.
pub fn listing_scope(
    markers: Option<&Markers>,
    workload: Result<Option<&BTreeSet<String>>, &str>,
) -> ListingScope {
    let workload = match workload {
        Ok(w) => w,
        Err(why) => {
            return ListingScope::WholeTable {
                why: format!("its inflight file does not read as commit metadata ({why})"),
            }
        }
    };
    let mut partitions = BTreeSet::new();
    let mut sources = BTreeSet::new();
    let mut add = |source: ScopeSource, partition: &str| -> Result<(), String> {
        let rel = RelPath::parse(partition)
            .map_err(|e| format!("a partition it names is not a path inside the table ({e})"))?;
        if rel.segments().next() == Some(".hoodie") {
            return Err(format!(
                "a partition it names, `{partition}`, is inside .hoodie"
            ));
        }
        partitions.insert(rel);
        sources.insert(source);
        Ok(())
    };
    let named = (|| {
        for m in markers.map(|m| m.markers.as_slice()).unwrap_or_default() {
            add(ScopeSource::Markers, &m.partition)?;
        }
        for f in markers.map(|m| &m.folders).into_iter().flatten() {
            add(ScopeSource::MarkerFolder, f)?;
        }
        for p in workload.into_iter().flatten() {
            add(ScopeSource::Workload, p)?;
        }
        Ok::<_, String>(())
    })();
    match named {
        Err(why) => ListingScope::WholeTable { why },
        Ok(()) if partitions.is_empty() => ListingScope::WholeTable {
            why: "the instant names no partition (no markers, none below its marker folder, no workload in its inflight file)".into(),
        },
        Ok(()) => ListingScope::Partitions {
            partitions,
            sources,
        },
    }
}

fn partition_of(rel: &RelPath) -> String {
    rel.parent().to_string()
}

/// Check that `rel` is a data file written by `instant`: a base file of that instant, or a log
/// file named with it.
pub fn attributable(rel: &RelPath, instant: &str) -> Result<DataFile, String> {
    let name = rel.file_name();
    let file = DataFile::parse(name).ok_or_else(|| "not a Hudi data file name".to_string())?;
    if file.instant() != instant {
        return Err(format!("its name carries instant {}", file.instant()));
    }
    Ok(file)
}

/// Make the rollback plan of a pending instant.
pub fn plan_rollback(input: &PlanInput<'_>) -> Result<PlannedRollback, PlanError> {
    let t = &input.target.requested_time;
    let instant_info = InstantInfo {
        commit_time: t.clone(),
        action: input.target.action.as_str().to_string(),
    };
    if input.target.state == State::Requested {
        // Nothing was written yet: only the timeline files go.
        return Ok(PlannedRollback {
            plan: RollbackPlan {
                instant_to_rollback: Some(instant_info),
                requests: Some(vec![]),
                version: Some(1),
            },
            deletes: vec![],
            log_blocks: vec![],
            markers_without_files: 0,
        });
    }
    if input.target.state == State::Completed {
        return Err(PlanError::Unsupported {
            instant: t.clone(),
            reason: "the instant is completed; undoing completed commits is a restore".into(),
        });
    }
    let v6_mor = input.version.is_0x() && input.table_type == TableType::MergeOnRead;
    let existing: BTreeMap<&RelPath, u64> =
        input.data_files.iter().map(|f| (&f.path, f.size)).collect();

    let mut written = if let Some(markers) = input.markers {
        sort_markers(input, markers, &existing, v6_mor)?
    } else if !input.cross_check {
        return Err(PlanError::Unsupported {
            instant: t.clone(),
            reason: "the instant has no markers, so its files can only be found by listing the table; run without disabling the listing cross-check".into(),
        });
    } else if v6_mor && input.target.action == Action::DeltaCommit {
        return Err(PlanError::Unsupported {
            instant: t.clone(),
            reason: "this merge-on-read deltacommit (table version 5 or 6) has no markers, so the log files it appended to cannot be found; roll it back with Hudi (or restore its markers)".into(),
        });
    } else {
        Written::default()
    };
    v5_latest_logs(input, &mut written);
    add_listed_files(input, &mut written);

    let (mut requests, planned) = delete_requests(input, &written.deletes, &existing);
    let log_blocks = log_block_requests(input, written.appends, written.v8_appends, &mut requests)?;
    Ok(PlannedRollback {
        plan: RollbackPlan {
            instant_to_rollback: Some(instant_info),
            requests: Some(requests),
            version: Some(1),
        },
        deletes: planned,
        log_blocks,
        markers_without_files: written.markers_without_files,
    })
}

/// What the markers and the listing say a pending instant wrote, sorted by what its rollback
/// does with each file.
#[derive(Default)]
struct Written {
    /// Files to delete, each with whether a marker named it.
    deletes: BTreeMap<RelPath, bool>,
    /// v6 merge-on-read: (partition, fileId, baseInstant) -> {log file name -> size}.
    appends: BTreeMap<(String, String, String), BTreeMap<String, i64>>,
    /// v8/v9: log files an APPEND marker names, each with its file group; they are kept.
    v8_appends: BTreeMap<RelPath, String>,
    /// v5 merge-on-read: the file slices (partition, fileId, base instant) an APPEND marker names
    /// through their base file.
    v5_slices: BTreeSet<(String, String, String)>,
    /// Markers naming files the listing does not show.
    markers_without_files: usize,
}

/// Sort what the instant's markers name; a marker naming anything but a data file of the
/// instant (or, appended to, of an older slice on v6 merge-on-read) refuses the plan.
fn sort_markers(
    input: &PlanInput<'_>,
    markers: &Markers,
    existing: &BTreeMap<&RelPath, u64>,
    v6_mor: bool,
) -> Result<Written, PlanError> {
    let t = &input.target.requested_time;
    let mut written = Written::default();
    for m in &markers.markers {
        let rel = m.data_path().map_err(|_| PlanError::OutsideTable {
            instant: t.clone(),
            path: format!("{}/{}", m.partition, m.file_name),
        })?;
        let file = DataFile::parse(&m.file_name).ok_or_else(|| PlanError::NotAttributable {
            instant: t.clone(),
            path: rel.to_string(),
            reason: format!(
                "a {} marker names something that is not a Hudi data file",
                m.io_type
            ),
        })?;
        if rel.segments().next() == Some(".hoodie") {
            return Err(PlanError::NotAttributable {
                instant: t.clone(),
                path: rel.to_string(),
                reason: format!(
                    "a {} marker names a file inside .hoodie, which holds no data file",
                    m.io_type
                ),
            });
        }
        let v5 = input.version == TableVersion::V5;
        // On version 5 an APPEND marker names the slice's base file, which need not exist.
        let names_a_base_file = matches!(file, DataFile::Base { .. });
        let v5_append = v5 && m.io_type == IoType::Append && names_a_base_file;
        if input.cross_check && !v5_append && !existing.contains_key(&rel) {
            written.markers_without_files += 1;
        }
        match (m.io_type, &file) {
            (
                IoType::Append,
                DataFile::Base {
                    file_id, instant, ..
                },
            ) if v5 && v6_mor => {
                // Hudi 0.13: the marker names the slice's base file (which need not exist);
                // the block goes to the slice's latest log file (`v5_latest_logs`).
                written
                    .v5_slices
                    .insert((m.partition.clone(), file_id.clone(), instant.clone()));
            }
            (IoType::Append, DataFile::Log { .. }) if v5 => {
                // Hudi 0.13 writers name APPEND markers after the base file; 0.13's rollback
                // would misread a marker named after a log file.
                return Err(PlanError::NotAttributable {
                    instant: t.clone(),
                    path: rel.to_string(),
                    reason: "an APPEND marker names a log file on a table of version 5, whose writers (Hudi 0.12/0.13) name it after the base file".into(),
                });
            }
            (IoType::Append, DataFile::Log { instant, .. }) if v6_mor && instant != t => {
                // Appended to an older file slice: void the blocks with a command block.
                // Java (0.15) records the bare file name with the placeholder size 1, and
                // skips a log file that does not exist.
                if existing.contains_key(&rel) {
                    written
                        .appends
                        .entry((
                            m.partition.clone(),
                            file.file_id().to_string(),
                            instant.clone(),
                        ))
                        .or_default()
                        .insert(m.file_name.clone(), 1);
                }
            }
            (IoType::Append, DataFile::Log { instant, .. }) if !input.version.is_0x() => {
                // Hudi 1.0.1 and 1.1.1 on table version 8+ (MarkerBasedRollbackStrategy.
                // createRollbackRequestForAppend): the log file is not deleted; a rollback
                // command block for the instant goes into a new log file of the file group
                // named with the instant. Java takes any log file here; a log file of
                // another instant cannot come from a 1.x writer (its log files carry their
                // own instant), so it is refused rather than guessed at.
                if instant != t {
                    return Err(PlanError::NotAttributable {
                        instant: t.clone(),
                        path: rel.to_string(),
                        reason: format!(
                            "an APPEND marker names a log file of instant {instant} on a table of version 8 or later"
                        ),
                    });
                }
                written.v8_appends.insert(rel, file.file_id().to_string());
            }
            _ => {
                if file.instant() != t {
                    return Err(PlanError::NotAttributable {
                        instant: t.clone(),
                        path: rel.to_string(),
                        reason: format!(
                            "a {} marker names a file of instant {}",
                            m.io_type,
                            file.instant()
                        ),
                    });
                }
                written.deletes.insert(rel, true);
            }
        }
    }
    Ok(written)
}

/// Version 5 merge-on-read: the latest log file of each slice an APPEND marker names (by log
/// version, then write token, as Hudi 0.13's `FSUtils.getLatestLogFile`), among `data_files`. A
/// slice the failed write started itself (base instant = the instant) has that log file deleted;
/// any other gets a command block in it (`log_block_requests`).
fn v5_latest_logs(input: &PlanInput<'_>, written: &mut Written) {
    let t = &input.target.requested_time;
    for (partition, file_id, base) in &written.v5_slices {
        let latest = input
            .data_files
            .iter()
            .filter(|f| partition_of(&f.path) == *partition)
            .filter_map(|f| match DataFile::parse(f.path.file_name()) {
                Some(DataFile::Log {
                    file_id: fid,
                    instant,
                    version,
                    write_token,
                    cdc: false,
                }) if fid == *file_id && instant == *base => {
                    Some(((version, write_token), &f.path))
                }
                _ => None,
            })
            .max_by(|a, b| a.0.cmp(&b.0))
            .map(|(_, path)| path.clone());
        match latest {
            Some(log) if base == t => {
                written.deletes.insert(log, true);
            }
            Some(log) => {
                written
                    .appends
                    .entry((partition.clone(), file_id.clone(), base.clone()))
                    .or_default()
                    .insert(input.base.render_qualified(&log), -1);
            }
            None if base == t => {}
            None => {
                // Java's request without a log file: nothing to void there.
                written
                    .appends
                    .entry((partition.clone(), file_id.clone(), base.clone()))
                    .or_default();
            }
        }
    }
}

/// Cross-check: every data file named with the instant is the instant's, markers or not.
/// A log file with an APPEND marker (v8/v9) stays, as in Java.
fn add_listed_files(input: &PlanInput<'_>, written: &mut Written) {
    let t = &input.target.requested_time;
    for f in input.data_files.iter().filter(|_| input.cross_check) {
        if written.v8_appends.contains_key(&f.path) {
            continue;
        }
        if let Some(file) = DataFile::parse(f.path.file_name()) {
            if file.instant() == t {
                written.deletes.entry(f.path.clone()).or_insert(false);
            }
        }
    }
}

/// Requests shaped as Hudi's own: one per file. A file a marker names carries its file
/// group and base instant (the instant itself from 1.0 on), with a qualified path, as Java's
/// marker-based plans; a file only the listing found is a pure delete, as Java's
/// listing-based plans.
fn delete_requests(
    input: &PlanInput<'_>,
    deletes: &BTreeMap<RelPath, bool>,
    existing: &BTreeMap<&RelPath, u64>,
) -> (Vec<RollbackRequest>, Vec<PlannedDelete>) {
    let t = &input.target.requested_time;
    let mut requests = Vec::new();
    let mut planned = Vec::new();
    for (rel, from_markers) in deletes {
        let partition = partition_of(rel);
        let file = DataFile::parse(rel.file_name());
        let (file_id, latest_base_instant, path) = match (from_markers, &file) {
            // Hudi 0.13 (MarkerBasedRollbackStrategy): a marked file's request is a pure delete.
            (true, _) if input.version == TableVersion::V5 => (
                String::new(),
                String::new(),
                input.base.render_qualified(rel),
            ),
            (
                true,
                Some(DataFile::Base {
                    file_id, instant, ..
                }),
            ) => (
                file_id.clone(),
                instant.clone(),
                input.base.render_qualified(rel),
            ),
            (true, Some(DataFile::Log { file_id, .. })) if !input.version.is_0x() => {
                (file_id.clone(), t.clone(), input.base.render_qualified(rel))
            }
            (true, _) => (
                String::new(),
                String::new(),
                input.base.render_qualified(rel),
            ),
            (false, _) => (String::new(), String::new(), input.base.render(rel)),
        };
        requests.push(RollbackRequest {
            partition_path: partition.clone(),
            file_id: Some(file_id),
            latest_base_instant: Some(latest_base_instant),
            files_to_be_deleted: vec![path],
            log_blocks_to_be_deleted: Some(BTreeMap::new()),
        });
        planned.push(PlannedDelete {
            partition,
            path: rel.clone(),
            size: existing.get(rel).copied(),
            from_markers: *from_markers,
        });
    }
    (requests, planned)
}

/// The requests of the log files that get a rollback command block (appended to `requests`,
/// after the deletes), and those files by partition.
fn log_block_requests(
    input: &PlanInput<'_>,
    appends: BTreeMap<(String, String, String), BTreeMap<String, i64>>,
    v8_appends: BTreeMap<RelPath, String>,
    requests: &mut Vec<RollbackRequest>,
) -> Result<Vec<(String, RelPath)>, PlanError> {
    let t = &input.target.requested_time;
    let mut log_blocks = Vec::new();
    for ((partition, file_id, base_instant), logs) in appends {
        for name in logs.keys() {
            // v6: the bare file name; v5: the qualified path
            let short = name.rsplit('/').next().unwrap_or(name);
            let rel = RelPath::parse(&partition)
                .and_then(|p| p.join(short))
                .map_err(|_| PlanError::OutsideTable {
                    instant: t.clone(),
                    path: format!("{partition}/{name}"),
                })?;
            log_blocks.push((partition.clone(), rel));
        }
        requests.push(RollbackRequest {
            partition_path: partition,
            file_id: Some(file_id),
            latest_base_instant: Some(base_instant),
            files_to_be_deleted: vec![],
            log_blocks_to_be_deleted: Some(logs),
        });
    }
    for (rel, file_id) in v8_appends {
        // As Java records them: one request per marker, the instant as base instant, the
        // qualified path with the placeholder size 1.
        let partition = partition_of(&rel);
        requests.push(RollbackRequest {
            partition_path: partition.clone(),
            file_id: Some(file_id),
            latest_base_instant: Some(t.clone()),
            files_to_be_deleted: vec![],
            log_blocks_to_be_deleted: Some(BTreeMap::from([(
                input.base.render_qualified(&rel),
                1,
            )])),
        });
        log_blocks.push((partition, rel));
    }
    Ok(log_blocks)
}

/// A plan (ours or Java's) checked and resolved for execution.
#[derive(Debug, Clone, Default)]
pub struct ResolvedPlan {
    /// Files to delete, by partition.
    pub deletes: BTreeMap<String, Vec<(String, RelPath)>>,
    /// Command-block requests: (partition, fileId, base instant, {log file: size}). v6: the
    /// slice's base instant and bare file names; v8/v9: the instant itself and qualified paths.
    pub log_blocks: Vec<(String, String, String, BTreeMap<String, i64>)>,
}

/// Check every path of a plan (ours or one Java wrote) before anything is deleted: inside the
/// table, and a data file whose name carries the target instant.
pub fn resolve_plan(plan: &RollbackPlan, base: &BasePath) -> Result<ResolvedPlan, PlanError> {
    let t = plan
        .instant_to_rollback
        .as_ref()
        .map(|i| i.commit_time.clone())
        .ok_or_else(|| PlanError::Unsupported {
            instant: "?".into(),
            reason: "the rollback plan names no instant to roll back".into(),
        })?;
    // The instant names the marker folder and heartbeat the rollback removes: anything but an
    // instant time (an empty or path-like name from a corrupt plan) must not get that far.
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PlanError::Unsupported {
            instant: t,
            reason: "the rollback plan's instant is not an instant time; the plan is corrupt"
                .into(),
        });
    }
    let mut out = ResolvedPlan::default();
    let mut seen = BTreeSet::new();
    for r in plan.requests.iter().flatten() {
        for abs in &r.files_to_be_deleted {
            let rel = base.resolve(abs).map_err(|_| PlanError::OutsideTable {
                instant: t.clone(),
                path: abs.clone(),
            })?;
            attributable(&rel, &t).map_err(|reason| PlanError::NotAttributable {
                instant: t.clone(),
                path: abs.clone(),
                reason,
            })?;
            if seen.insert(rel.clone()) {
                out.deletes
                    .entry(r.partition_path.clone())
                    .or_default()
                    .push((abs.clone(), rel));
            }
        }
        if let Some(logs) = &r.log_blocks_to_be_deleted {
            if !logs.is_empty() && r.files_to_be_deleted.is_empty() {
                let file_id = r.file_id.clone().unwrap_or_default();
                let base_instant = r.latest_base_instant.clone().unwrap_or_default();
                for name in logs.keys() {
                    // Hudi 0.13's listing-based plan of a deltacommit whose write stat has no
                    // path (a metadata-table workload profile) names the base path itself: the
                    // block goes to the request's file slice, and nothing is deleted by it.
                    if base.is_root(name) && !file_id.is_empty() && !base_instant.is_empty() {
                        continue;
                    }
                    // v6 plans name the log file bare; Hudi 0.13's (v5) by its qualified path,
                    // which must lie in the request's partition
                    if name.contains('/') {
                        let inside = base
                            .resolve(name)
                            .is_ok_and(|rel| partition_of(&rel) == r.partition_path);
                        if !inside {
                            return Err(PlanError::OutsideTable {
                                instant: t.clone(),
                                path: name.clone(),
                            });
                        }
                    }
                    let short = name.rsplit('/').next().unwrap_or(name);
                    match DataFile::parse(short) {
                        Some(DataFile::Log { file_id: f, instant, .. })
                            if f == file_id && instant == base_instant => {}
                        _ => {
                            return Err(PlanError::NotAttributable {
                                instant: t.clone(),
                                path: name.clone(),
                                reason: format!(
                                    "not a log file of file group {file_id} at base instant {base_instant}"
                                ),
                            })
                        }
                    }
                }
                out.log_blocks.push((
                    r.partition_path.clone(),
                    file_id,
                    base_instant,
                    logs.clone(),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "rollback_tests.rs"]
mod tests;
