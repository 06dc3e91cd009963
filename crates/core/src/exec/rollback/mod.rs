//! Rolling back failed writes (hudi-format.md §5.5-5.7, §7.1).
//!
//! The state machine, each step resumable:
//! `R.rollback.requested` (the plan) → empty `R.rollback.inflight` → deletes (and v6 MOR rollback
//! command blocks) → the target's marker folder and heartbeat removed → under the lock: the
//! metadata table's rollback of the same instant with the same `R` → the target's inflight, then
//! requested file deleted → the completed rollback (`R.rollback`, or `R_C.rollback` in layout 2)
//! → the rollback's own marker folder removed.
//!
//! A pending rollback of the same target is always resumed with its own plan, never duplicated.
//!
//! Here: [`rollback`] and [`sweep`]; what is rolled back is chosen in `select.rs`, a fresh
//! rollback planned in `plan.rs`, each one run through its steps in `run.rs`, and the dry run
//! ([`preview`]) in `preview.rs`. The steps it shares with the restore and the metadata table
//! are in `exec/steps/`.

mod plan;
mod preview;
mod run;
mod select;

use tracing::{info_span, Instrument};

pub use self::preview::{count_selected, preview, PartitionPreview, RollbackPreview};
use self::run::run_one;
pub use self::run::RollbackDone;
use self::select::select;
pub use self::select::{assess_table, Selection, TableAssessment};
pub use super::metadata_table::MetadataTableOutcome;
use super::steps::changes::{refuse_links, Changes};
use super::steps::delete_folder;
pub use super::steps::{pending_rollbacks, PendingRollback, Progress, RollbackOptions};
use crate::protocol::markers::marker_dir;
use crate::storage::{RelPath, StorageError};
use crate::table::Table;
use crate::timeline::Action;
use crate::Error;

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
/// started rollback resumes on the next run). An error says nothing of the rollbacks completed
/// before it: [`rollback_observed`] does.
pub async fn rollback(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
) -> Result<Vec<RollbackDone>, Error> {
    rollback_observed(table, selection, options, progress, &|_| {}).await
}

/// [`rollback`], handing each rollback to `completed` as soon as it is complete: whoever counts
/// or reports rollbacks learns of every one, also when a later one fails or the run is cut off
/// (its future dropped) after it.
pub async fn rollback_observed(
    table: &Table,
    selection: &Selection,
    options: &RollbackOptions,
    progress: Option<&dyn Progress>,
    completed: &(dyn Fn(&RollbackDone) + Send + Sync),
) -> Result<Vec<RollbackDone>, Error> {
    let mut done = Vec::new();
    table.stop_point("before the rollback", None)?;
    if *selection == Selection::AllFailed {
        sweep(table).await?;
    }
    for work in select(table, selection, options).await? {
        let span = info_span!("rollback", table = %table.uri(), instant = %work.target);
        let d = run_one(table, work, options, progress, completed)
            .instrument(span)
            .await?;
        done.push(d);
    }
    Ok(done)
}
