//! The pure planner of a scan: which folder to list or which `hoodie.properties` to read next,
//! and what a listing or a read means. It holds no I/O; [`scan`](super::scan) runs its steps.
//!
//! The budget is kept at step level: a step is queued only while the requests spent, plus those
//! queued, stay within [`ScanLimits::max_requests`]. A step that does not fit cuts the scan
//! short, so the queue (the only thing that grows with the prefix) never holds more steps than
//! the budget has requests left, however many folders a listing names.

use std::collections::VecDeque;

use bytes::Bytes;
use serde::Serialize;

use super::{DiscoverError, Filters};
use crate::config::{keys, properties};
use crate::storage::RelPath;

/// The most problems a report keeps (all are counted).
pub const MAX_PROBLEMS: usize = 20;

/// How far and how much a scan may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ScanLimits {
    /// The deepest folder listed, the prefix being depth 0: a table at `prefix/db/t` is at depth
    /// 2. Folders below it are not looked at (counted in [`ScanReport::beyond_depth`]).
    pub max_depth: u32,
    /// The most requests (listings and reads) one scan makes; a scan that needs more stops
    /// there, incomplete.
    pub max_requests: u64,
}

impl Default for ScanLimits {
    fn default() -> Self {
        Self {
            max_depth: 8,
            max_requests: 100_000,
        }
    }
}

/// What to read next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// List the folder one level (with a delimiter).
    List {
        /// The folder, relative to the prefix.
        folder: RelPath,
        /// Its depth below the prefix.
        depth: u32,
    },
    /// Read the folder's `.hoodie/hoodie.properties` (or, when `backup`, the copy Hudi keeps
    /// while it rewrites the file).
    ReadProperties {
        /// The folder, relative to the prefix.
        folder: RelPath,
        /// Read `.hoodie/hoodie.properties.backup`.
        backup: bool,
    },
}

impl Step {
    /// The table-relative path the step reads.
    pub fn properties_path(backup: bool) -> &'static str {
        if backup {
            ".hoodie/hoodie.properties.backup"
        } else {
            ".hoodie/hoodie.properties"
        }
    }
}

/// One table found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundTable {
    /// Its location: the prefix as given, then the folders below it.
    pub location: String,
    /// Its folder relative to the prefix (empty: the prefix itself).
    #[serde(skip)]
    pub path: RelPath,
    /// `hoodie.table.name` (empty when the file has none).
    pub name: String,
    /// `hoodie.table.type`, as written.
    pub table_type: Option<String>,
}

/// Something a scan could not read or judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanProblem {
    /// The folder.
    pub location: String,
    /// What went wrong.
    pub error: String,
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScanReport {
    /// The prefix scanned.
    pub prefix: String,
    /// The tables found and kept by the filters, by location.
    pub tables: Vec<FoundTable>,
    /// Whether every folder within the depth was looked at without an error: only then may a
    /// table missing from it be taken for gone.
    pub complete: bool,
    /// The budget ran out before the scan did.
    pub cut_short: bool,
    /// Requests made.
    pub requests: u64,
    /// Folders listed.
    pub folders_listed: u64,
    /// Tables found but left out by the filters.
    pub filtered_out: u64,
    /// Folders not listed because a location glob excludes them.
    pub folders_excluded: u64,
    /// Folders not listed because they are deeper than the limit.
    pub beyond_depth: u64,
    /// Folders with a `.hoodie` folder but no `hoodie.properties` (a table being made, or the
    /// rest of one): not tables, and not looked into.
    pub without_properties: u64,
    /// Symbolic links to folders not followed (local prefixes: a table is only found where it
    /// is, never through a link, which could lead out of the prefix); a folder whose `.hoodie`
    /// is a link is counted here too, neither a table nor looked into.
    pub links_skipped: u64,
    /// Problems (every one counted, the first [`MAX_PROBLEMS`] kept).
    pub problems: Vec<ScanProblem>,
    /// How many problems there were.
    pub problem_count: u64,
}

/// How far a scan has come (for a progress bar).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanProgress {
    /// Requests made.
    pub requests: u64,
    /// Folders listed.
    pub folders_listed: u64,
    /// Tables found (kept by the filters).
    pub tables: u64,
    /// Steps known but not made yet.
    pub queued: u64,
}

/// A scan's state: what is queued, what was found.
#[derive(Debug)]
pub struct ScanPlanner {
    prefix: String,
    limits: ScanLimits,
    filters: Filters,
    queue: VecDeque<Step>,
    spent: u64,
    outstanding: u64,
    report: ScanReport,
}

impl ScanPlanner {
    /// A scan of `prefix` (a location as given; found tables' locations extend it).
    pub fn new(prefix: &str, limits: ScanLimits, filters: Filters) -> Result<Self, DiscoverError> {
        if limits.max_requests == 0 {
            return Err(DiscoverError::Limits {
                prefix: prefix.to_string(),
                reason: "a scan needs a budget of at least one request",
            });
        }
        let base = prefix.trim_end_matches('/');
        // A bare `/` (or `s3://b/`) keeps its last slash: trimming it would change the place.
        let base = if base.is_empty() || base.ends_with(':') || base.ends_with("://") {
            prefix.to_string()
        } else {
            base.to_string()
        };
        let mut planner = Self {
            prefix: base.clone(),
            limits,
            filters,
            queue: VecDeque::new(),
            spent: 0,
            outstanding: 0,
            report: ScanReport {
                prefix: base,
                tables: Vec::new(),
                complete: false,
                cut_short: false,
                requests: 0,
                folders_listed: 0,
                filtered_out: 0,
                folders_excluded: 0,
                beyond_depth: 0,
                without_properties: 0,
                links_skipped: 0,
                problems: Vec::new(),
                problem_count: 0,
            },
        };
        if planner.filters.skips_folder(&planner.prefix) {
            planner.report.folders_excluded += 1;
        } else {
            planner.enqueue(
                Step::List {
                    folder: RelPath::root(),
                    depth: 0,
                },
                false,
            );
        }
        Ok(planner)
    }

    /// The location of `path` below the prefix.
    pub fn location(&self, path: &RelPath) -> String {
        if path.as_str().is_empty() {
            self.prefix.clone()
        } else if self.prefix.ends_with('/') {
            format!("{}{}", self.prefix, path)
        } else {
            format!("{}/{}", self.prefix, path)
        }
    }

    /// The next step to make, its request counted; `None` when nothing is queued (the scan is
    /// over once [`ScanPlanner::is_done`] too).
    pub fn next_step(&mut self) -> Option<Step> {
        let step = self.queue.pop_front()?;
        self.spent += 1;
        self.outstanding += 1;
        Some(step)
    }

    /// Whether nothing is queued and every step handed out was answered.
    pub fn is_done(&self) -> bool {
        self.queue.is_empty() && self.outstanding == 0
    }

    /// How far the scan has come.
    pub fn progress(&self) -> ScanProgress {
        ScanProgress {
            requests: self.spent,
            folders_listed: self.report.folders_listed,
            tables: self.report.tables.len() as u64,
            queued: self.queue.len() as u64,
        }
    }

    /// Queue `step` if the budget has room for it (else the scan is cut short).
    fn enqueue(&mut self, step: Step, first: bool) {
        let committed = self.spent.saturating_add(self.queue.len() as u64);
        if committed >= self.limits.max_requests {
            self.report.cut_short = true;
            return;
        }
        if first {
            self.queue.push_front(step);
        } else {
            self.queue.push_back(step);
        }
    }

    fn answered(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    fn problem(&mut self, path: &RelPath, error: String) {
        self.report.problem_count += 1;
        if self.report.problems.len() < MAX_PROBLEMS {
            let location = self.location(path);
            self.report.problems.push(ScanProblem { location, error });
        }
    }

    /// The listing of `folder` (at `depth`) named these sub-folders; `Err`: it failed.
    pub fn listed(&mut self, folder: &RelPath, depth: u32, dirs: Result<Vec<String>, String>) {
        self.answered();
        let dirs = match dirs {
            Ok(d) => d,
            Err(e) => return self.problem(folder, format!("listing failed: {e}")),
        };
        self.report.folders_listed += 1;
        if dirs.iter().any(|d| d == ".hoodie") {
            // A table (or one being made): its properties say which; nothing below is listed.
            let step = Step::ReadProperties {
                folder: folder.clone(),
                backup: false,
            };
            return self.enqueue(step, true);
        }
        if depth >= self.limits.max_depth {
            self.report.beyond_depth += dirs.len() as u64;
            return;
        }
        for d in dirs {
            let child = match folder.join(&d) {
                Ok(c) => c,
                Err(e) => {
                    self.problem(folder, format!("a folder name cannot be addressed: {e}"));
                    continue;
                }
            };
            if self.filters.skips_folder(&self.location(&child)) {
                self.report.folders_excluded += 1;
                continue;
            }
            let step = Step::List {
                folder: child,
                depth: depth + 1,
            };
            self.enqueue(step, false);
            if self.report.cut_short {
                return;
            }
        }
    }

    /// The listing of `folder` (at `depth`) named these sub-folders and links to folders
    /// (which are not followed); `Err`: it failed.
    pub fn listed_folders(
        &mut self,
        folder: &RelPath,
        depth: u32,
        folders: Result<crate::storage::Folders, String>,
    ) {
        let folders = folders.map(|f| {
            self.report.links_skipped += f.links.len() as u64;
            if f.links.iter().any(|l| l == ".hoodie") {
                Vec::new()
            } else {
                f.dirs
            }
        });
        self.listed(folder, depth, folders);
    }

    /// The read of `folder`'s properties (the backup's when `backup`): its bytes, `None` for
    /// no such file, `Err` for a failed read.
    pub fn read(&mut self, folder: &RelPath, backup: bool, read: Result<Option<Bytes>, String>) {
        self.answered();
        let bytes = match read {
            Err(e) => {
                let file = Step::properties_path(backup);
                return self.problem(folder, format!("reading {file} failed: {e}"));
            }
            Ok(None) if !backup => {
                let step = Step::ReadProperties {
                    folder: folder.clone(),
                    backup: true,
                };
                return self.enqueue(step, true);
            }
            Ok(None) => {
                self.report.without_properties += 1;
                return;
            }
            Ok(Some(b)) => b,
        };
        let props = match std::str::from_utf8(&bytes) {
            Ok(text) => properties::parse(text).map_err(|e| e.to_string()),
            Err(_) => Err("it is not text".to_string()),
        };
        let props = match props {
            Ok(p) => p,
            Err(e) => {
                let file = Step::properties_path(backup);
                return self.problem(folder, format!("{file} cannot be read: {e}"));
            }
        };
        let name = props
            .get(keys::NAME)
            .map(|n| n.trim().to_string())
            .unwrap_or_default();
        let location = self.location(folder);
        if !self.filters.keeps(&name, &location) {
            self.report.filtered_out += 1;
            return;
        }
        self.report.tables.push(FoundTable {
            location,
            path: folder.clone(),
            name,
            table_type: props.get(keys::TYPE).map(|t| t.trim().to_string()),
        });
    }

    /// The report: the tables by location; complete when nothing was cut short or failed.
    pub fn finish(mut self) -> ScanReport {
        self.report.requests = self.spent;
        if !self.is_done() {
            self.report.cut_short = true;
        }
        self.report.complete = !self.report.cut_short && self.report.problem_count == 0;
        self.report
            .tables
            .sort_by(|a, b| a.location.cmp(&b.location));
        self.report
    }
}
