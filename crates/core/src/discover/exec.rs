//! The executor of a scan: runs the planner's steps through the [`Storage`] seam, a bounded
//! number at once.

use futures::stream::FuturesUnordered;
use futures::StreamExt;

use super::plan::ScanProgress;
use super::{DiscoverError, FilterSettings, Filters, ScanLimits, ScanPlanner, ScanReport, Step};
use crate::storage::{Folders, RelPath, Storage, SMALL_FILE_MAX_READ};

/// Requests of one scan in flight at once, unless set.
pub const DEFAULT_CONCURRENCY: usize = 16;

/// How a scan goes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Depth and request budget.
    pub limits: ScanLimits,
    /// Which tables are kept, which folders skipped.
    pub filters: FilterSettings,
    /// Requests in flight at once (0: [`DEFAULT_CONCURRENCY`]).
    pub concurrency: usize,
}

/// What one step read.
enum Done {
    Listed {
        folder: RelPath,
        depth: u32,
        folders: Result<Folders, String>,
    },
    Read {
        folder: RelPath,
        backup: bool,
        read: Result<Option<bytes::Bytes>, String>,
    },
}

async fn run(storage: &Storage, step: Step) -> Done {
    match step {
        Step::List { folder, depth } => {
            // Only the folders are wanted, and no symbolic link is followed out of the prefix.
            let folders = storage
                .list_folders(&folder)
                .await
                .map_err(|e| e.to_string());
            Done::Listed {
                folder,
                depth,
                folders,
            }
        }
        Step::ReadProperties { folder, backup } => {
            let read = match folder.join(Step::properties_path(backup)) {
                Ok(path) => storage
                    .get_opt_capped(&path, SMALL_FILE_MAX_READ)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            Done::Read {
                folder,
                backup,
                read,
            }
        }
    }
}

/// Scan `storage` (rooted at the prefix `prefix`, as given: the tables' locations extend it) for
/// tables; `progress` is called after each request. Problems of the scan (a failed listing, an
/// unreadable `hoodie.properties`) are in the report, which is then incomplete.
pub async fn scan(
    storage: &Storage,
    prefix: &str,
    options: &ScanOptions,
    mut progress: impl FnMut(&ScanProgress),
) -> Result<ScanReport, DiscoverError> {
    let filters = Filters::compile(prefix, &options.filters)?;
    let mut planner = ScanPlanner::new(prefix, options.limits, filters)?;
    let width = match options.concurrency {
        0 => super::DEFAULT_CONCURRENCY,
        n => n,
    };
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < width {
            match planner.next_step() {
                Some(step) => running.push(run(storage, step)),
                None => break,
            }
        }
        let Some(done) = running.next().await else {
            break;
        };
        match done {
            Done::Listed {
                folder,
                depth,
                folders,
            } => planner.listed_folders(&folder, depth, folders),
            Done::Read {
                folder,
                backup,
                read,
            } => planner.read(&folder, backup, read),
        }
        progress(&planner.progress());
    }
    Ok(planner.finish())
}
