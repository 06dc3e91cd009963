//! Deadlines and stops for the daemon's work on a table.
//!
//! A poll's reads (opening the table, listing its timeline, reading heartbeats) must end within
//! `server.poll_timeout`: they change nothing, so a late one is simply dropped and counts as a
//! failed poll. A change (a rollback, a restore, a savepoint) is never dropped mid-write: at
//! `server.mutation_timeout`, or at shutdown, it is asked to stop at its next safe point, where
//! it releases its lock through the normal path. Only one that reaches no safe point within
//! `server.shutdown_grace` more (a store that hangs) is abandoned; the lock guard it dropped is
//! released in the background (the lock module's backstop).

use std::future::Future;
use std::time::Duration;

use hudi_keeper_core::{Error, Table};
use tracing::warn;

use super::error::{MutationError, PollError};
use super::Daemon;

/// `work` unless `deadline` passes first: then [`PollError::TimedOut`], naming
/// `server.poll_timeout` (`limit`). For reads only: `work` is dropped at the deadline.
pub async fn within<T>(
    deadline: tokio::time::Instant,
    limit: Duration,
    work: impl Future<Output = Result<T, PollError>>,
) -> Result<T, PollError> {
    tokio::time::timeout_at(deadline, work)
        .await
        .unwrap_or(Err(PollError::TimedOut(limit)))
}

impl Daemon {
    /// Run a change of `table`: `work` gets the table with a stop token that the daemon's
    /// shutdown, or `server.mutation_timeout`, cancels; it then stops at its next safe point and
    /// releases its lock. One that reaches no safe point within `server.shutdown_grace` more,
    /// or is still running when the daemon gives up at shutdown, is dropped (its lock released
    /// by the backstop).
    pub(super) async fn mutate<T, Fut>(
        &self,
        table: &Table,
        work: impl FnOnce(Table) -> Fut,
    ) -> Result<T, MutationError>
    where
        Fut: Future<Output = Result<T, Error>>,
    {
        let stop = self.shutdown.child_token();
        let work = work(table.with_cancel(stop.clone()));
        tokio::pin!(work);
        let limit = self.config.server.mutation_timeout;
        tokio::select! {
            r = &mut work => return r.map_err(MutationError::Failed),
            _ = tokio::time::sleep(limit) => {}
            _ = self.abandon.cancelled() => return Err(MutationError::Abandoned),
        }
        warn!(table = %table.uri(), timeout_s = limit.as_secs(), "a change of the table did not finish within server.mutation_timeout; stopping it at its next safe point");
        stop.cancel();
        tokio::select! {
            r = &mut work => match r {
                Ok(v) => Ok(v),
                Err(Error::Cancelled { at, .. }) => Err(MutationError::TimedOut {
                    limit,
                    stopped_at: Some(at),
                }),
                Err(e) => Err(MutationError::Failed(e)),
            },
            _ = tokio::time::sleep(self.config.server.shutdown_grace) => {
                warn!(table = %table.uri(), "no safe point reached within server.shutdown_grace: abandoning the change (its lock is released in the background)");
                Err(MutationError::TimedOut { limit, stopped_at: None })
            }
            _ = self.abandon.cancelled() => Err(MutationError::Abandoned),
        }
    }
}
