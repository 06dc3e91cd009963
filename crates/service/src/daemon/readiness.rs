//! The tables' part of readiness (`/readyz`): every table polled at least once, and every table
//! that is not halted succeeded its last poll (the registry's part is `Daemon::registry_report`).

use serde::Serialize;

use super::Daemon;

impl Daemon {
    /// Whether every table has been polled at least once, and every table that is not halted
    /// succeeded its last poll.
    pub async fn readiness(&self) -> Readiness {
        let mut r = Readiness::default();
        // Read under the lock for the tables' names, in name order; nothing is cloned but the
        // names listed.
        for t in self.tables.read().await.values() {
            let state = t.ready_state();
            r.tables.total += 1;
            match state {
                ReadyState::Ok => r.tables.ok += 1,
                ReadyState::NotPolledYet => r.tables.not_polled_yet += 1,
                ReadyState::LastPollFailed => r.tables.last_poll_failed += 1,
                ReadyState::Halted => r.tables.halted += 1,
            }
            if state != ReadyState::Ok {
                if r.not_ok.len() < READINESS_NAMES_MAX {
                    r.not_ok.push(NotOkTable {
                        name: t.entry.name.to_string(),
                        state,
                    });
                } else {
                    r.not_ok_more += 1;
                }
            }
        }
        r.ready = r.tables.not_polled_yet == 0 && r.tables.last_poll_failed == 0;
        r
    }

    /// Whether a table this replica owns has not been polled yet (the first round runs).
    pub(super) async fn some_table_not_polled_yet(&self) -> bool {
        let cluster = self.cluster();
        self.tables
            .read()
            .await
            .iter()
            .any(|(name, t)| t.ready_state() == ReadyState::NotPolledYet && cluster.owns(name))
    }
}

/// At most this many tables are named in `/readyz` (the counts cover them all): a probe of a
/// daemon with 100,000 tables must stay small.
pub const READINESS_NAMES_MAX: usize = 100;

/// The tables' part of `/readyz`.
#[derive(Debug, Default, Serialize)]
pub struct Readiness {
    /// Every table polled at least once, and every table not halted succeeded its last poll.
    pub ready: bool,
    /// The tables by state.
    pub tables: ReadyCounts,
    /// The tables that are not `ok`, in name order, at most [`READINESS_NAMES_MAX`].
    pub not_ok: Vec<NotOkTable>,
    /// How many more tables are not `ok` than `not_ok` names.
    pub not_ok_more: usize,
}

/// How many tables are in each readiness state.
#[derive(Debug, Default, Serialize)]
pub struct ReadyCounts {
    pub total: usize,
    pub ok: usize,
    pub not_polled_yet: usize,
    pub last_poll_failed: usize,
    pub halted: usize,
}

/// A table that is not `ok`.
#[derive(Debug, Serialize)]
pub struct NotOkTable {
    pub name: String,
    pub state: ReadyState,
}

/// A table's state for readiness: halted tables do not hold readiness back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadyState {
    Ok,
    NotPolledYet,
    LastPollFailed,
    Halted,
}
