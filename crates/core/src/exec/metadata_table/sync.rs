//! The start of the deltacommit Hudi writes into the metadata table after the metadata table's
//! own restore (1.x: empty, [`super::restore`]; table version 6: `files` records syncing it
//! with storage, [`super::v6_restore`]).

use crate::exec::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::table::Table;
use crate::timeline::{Action, State, Timeline};
use crate::Error;

/// The sync deltacommit after a metadata-table restore.
pub(super) enum SyncDeltacommit {
    /// An earlier attempt completed it: its instant.
    Completed(String),
    /// Its requested and inflight files exist (an earlier attempt's, or new): its instant.
    Started(String),
}

/// The deltacommit after the metadata table's restore `m` (`tl`, the metadata table's timeline
/// read first): an earlier attempt's, else a new one at a time after every time of both
/// timelines (with `suffix`) with its requested file; then, unless it completed, its inflight
/// file.
pub(super) async fn start_sync_deltacommit(
    table: &Table,
    mdt: &Table,
    tl: &Timeline,
    m: &str,
    suffix: &str,
) -> Result<SyncDeltacommit, Error> {
    let existing = tl
        .after(m)
        .find(|i| i.action == Action::DeltaCommit)
        .cloned();
    let config = mdt.config();
    let storage = mdt.storage();
    let s = match &existing {
        Some(i) if !i.is_pending() => {
            return Ok(SyncDeltacommit::Completed(i.requested_time.clone()))
        }
        Some(i) => i.requested_time.clone(),
        None => {
            let parent = table.timeline().await?;
            let s = format!("{}{suffix}", new_instant_time(&[tl, &parent], mdt.zone()));
            let path = timeline_file(config, &s, None, Action::DeltaCommit, State::Requested)?;
            create_if_absent(storage, &path, Vec::new()).await?;
            s
        }
    };
    let inflight = timeline_file(config, &s, None, Action::DeltaCommit, State::Inflight)?;
    create_if_absent(storage, &inflight, Vec::new()).await?;
    Ok(SyncDeltacommit::Started(s))
}
