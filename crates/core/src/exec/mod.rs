//! The executor: runs plans through storage in Hudi's order, resumable after a crash at any
//! step.
//!
//! [`rollback`], [`restore`] and [`savepoint`] are the public entry points; the metadata
//! table's part in a rollback and a restore is in `metadata_table/`. Below them, `steps/` holds
//! what a rollback, a restore and the metadata table share (options, listings, a plan's deletes
//! and command blocks, the rollback metadata, the lock), and `restore_steps/` the restore
//! procedure's phases, which the data table's restore and the metadata table's own restore
//! share.

mod log_append;
pub(crate) mod metadata_table;
pub mod restore;
mod restore_steps;
pub mod rollback;
pub mod savepoint;
mod steps;
mod timeline_ops;

pub(crate) use steps::holding_lock;
pub use timeline_ops::new_instant_time;

use std::future::Future;
use std::pin::Pin;

use crate::timeline::Action;
use crate::Error;

/// A change about to be started on a table: the instant about to be written to its timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedChange {
    /// [`Action::Rollback`] or [`Action::Restore`].
    pub action: Action,
    /// The rollback or restore instant time.
    pub instant: String,
    /// What it undoes: the instant a rollback rolls back, the restore point of a restore.
    pub target: String,
}

/// Where a long-running caller (the daemon) records each rollback and restore it starts, before
/// the change's first timeline file is written, so that after a crash it knows which pending
/// changes were its own and resumes them at once (`RollbackOptions::own_rollbacks`).
pub trait ChangeJournal: Send + Sync + std::fmt::Debug {
    /// `change` is about to be written. An error refuses the change with nothing written.
    fn starting<'a>(
        &'a self,
        change: &'a StartedChange,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
}

/// Record `change` in the journal of `options`, if any: a failure refuses the change before
/// anything was written.
pub(crate) async fn journal_start(
    journal: Option<&std::sync::Arc<dyn ChangeJournal>>,
    table: &crate::Table,
    change: StartedChange,
) -> Result<(), Error> {
    let Some(journal) = journal else {
        return Ok(());
    };
    journal
        .starting(&change)
        .await
        .map_err(|why| Error::Refused {
            table: table.uri().to_string(),
            instant: change.target.clone(),
            reason: format!(
                "could not record {} {} before starting it: {why}; nothing was changed",
                change.action, change.instant
            ),
        })
}

/// The outcome of work done under the table lock, given the lock's release: the work's error
/// comes first, except that a stop at a safe point whose lock could not be released reports the
/// failed release (a stopped run promises its lock was released). A failed release behind a
/// failed work is never lost: it is logged at error level (its message names the table and the
/// lock), since a lock left behind may block every writer of the table.
pub(crate) fn after_release<T>(
    result: Result<T, Error>,
    released: Result<(), Error>,
) -> Result<T, Error> {
    match (result, released) {
        (Err(Error::Cancelled { .. }), Err(e)) => Err(e),
        (Err(work), Err(release)) => {
            tracing::error!(release_error = %release, work_error = %work, "the table lock could not be released after the work failed: it may be left behind and block the table's writers until it is removed");
            Err(work)
        }
        (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
        (Ok(v), Ok(())) => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_logs::Captured;

    #[test]
    fn a_failed_release_after_failed_work_is_logged_as_an_error_with_table_and_lock() {
        let (captured, subscriber) = Captured::subscriber();
        let work = Err::<(), _>(Error::Refused {
            table: "file:///t".into(),
            instant: "20260101000000000".into(),
            reason: "the work failed".into(),
        });
        let release = Err(Error::Lock {
            table: "file:///t".into(),
            lock: ".hoodie/lock".into(),
            reason: "releasing: the store is unreachable".into(),
        });
        let err = tracing::subscriber::with_default(subscriber, || {
            after_release(work, release).unwrap_err()
        });
        assert!(err.to_string().contains("the work failed"), "{err}");
        let line = captured.error_line();
        assert!(line.contains("file:///t"), "{line}");
        assert!(line.contains(".hoodie/lock"), "{line}");
        assert!(line.contains("the store is unreachable"), "{line}");
    }
}
