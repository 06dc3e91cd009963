//! The rollback heartbeat (Hudi 1.2's multi-writer protocol): whoever executes a rollback keeps
//! `.hoodie/.heartbeat/<rollback instant>` fresh, and nobody else starts executing it while that
//! heartbeat is fresh. A rollback claims it under the table lock, after checking that no one
//! else's is fresh and that the rollback is not completed; it keeps it fresh while executing
//! (four beats per [`claim_window`](crate::protocol::heartbeat::claim_window), more often than
//! the writers' interval), with every write fenced by it (a claim that could lapse stops the run
//! at its next write); it deletes it when done. A cut-off run leaves it to expire.

use std::sync::Arc;

use tracing::warn;

use super::refused;
use crate::protocol::heartbeat::{read_heartbeat, Heartbeat, HeartbeatStatus};
use crate::storage::Storage;
use crate::table::Table;
use crate::timeline::Action;
use crate::Error;

use super::RollbackOptions;

/// A rollback heartbeat this run holds.
#[derive(Debug)]
pub(in crate::exec) struct RollbackClaim {
    heartbeat: Heartbeat,
}

/// Why rollback `r` (of `t`) must not be executed by this run because of its heartbeat, if it
/// must not: fresh, or of unknown age, another process executes it.
pub(in crate::exec) async fn live_rollback_heartbeat(
    table: &Table,
    r: &str,
    options: &RollbackOptions,
) -> Result<Option<String>, Error> {
    let Some(mtime) = read_heartbeat(table.storage(), r).await? else {
        return Ok(None);
    };
    let now = chrono::Utc::now().timestamp_millis();
    Ok(
        match options
            .heartbeat
            .check(now, Some(mtime.timestamp_millis()), None)
        {
            HeartbeatStatus::Alive { age_ms } => Some(format!(
                "rollback {r} is running in another process (its heartbeat is {} old)",
                crate::human::Ms(age_ms)
            )),
            HeartbeatStatus::AgeUnknown => Some(format!(
                "rollback {r} has a heartbeat whose modification time the store does not give, so another process may be running it"
            )),
            _ => None,
        },
    )
}

impl RollbackClaim {
    /// Under the table lock (`locked` is the table fenced by it): claim rollback `r` of `t`,
    /// refusing when another process's heartbeat of it is fresh or it was completed meanwhile
    /// (`fresh`: `r` was scheduled by this run under this same lock, so neither can be). The
    /// heartbeat keeps beating through `beats` (the table's storage without the lock's fence:
    /// it outlives the lock); the run's cancellation stops it and leaves the file to expire.
    pub(in crate::exec) async fn take(
        locked: &Table,
        beats: &Storage,
        t: &str,
        r: &str,
        fresh: bool,
        options: &RollbackOptions,
    ) -> Result<Self, Error> {
        if !fresh {
            if let Some(why) = live_rollback_heartbeat(locked, r, options).await? {
                return Err(refused(
                    locked,
                    t,
                    format!("{why}; it is left to that process and nothing was changed"),
                ));
            }
            let timeline = locked.timeline().await?;
            if timeline
                .find(r)
                .any(|i| i.action == Action::Rollback && !i.is_pending())
            {
                return Err(refused(
                    locked,
                    t,
                    format!("rollback {r} was completed by another process meanwhile; there is nothing left to do and nothing more was written"),
                ));
            }
        }
        locked.stop_point("before claiming the rollback's heartbeat", Some(t))?;
        let token = locked.cancel_token().cloned().unwrap_or_default();
        let heartbeat = Heartbeat::claim(beats.unfenced(), r, &options.heartbeat, token).await?;
        Ok(Self { heartbeat })
    }

    /// `table` with every write fenced by this claim: a write is refused once the heartbeat
    /// was not refreshed for nearly as long as others wait before calling it expired.
    pub(in crate::exec) fn fence(&self, table: &Table, options: &RollbackOptions) -> Table {
        table.fenced(Arc::new(self.heartbeat.fence(&options.heartbeat)))
    }

    /// The rollback is completed: stop beating and delete the heartbeat (a failure to delete
    /// only leaves it to expire).
    pub(in crate::exec) async fn release(self) {
        if let Err(e) = self.heartbeat.stop().await {
            warn!(error = %e, "could not delete the rollback's heartbeat; it expires by itself");
        }
    }

    /// The rollback stopped unfinished: stop beating and leave the heartbeat to expire, so
    /// nobody takes the rollback over before then.
    pub(in crate::exec) async fn abandon(self) {
        self.heartbeat.abandon().await;
    }
}
