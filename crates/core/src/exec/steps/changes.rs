//! What a rollback or a restore changes on a local table, checked for symbolic links before its
//! first change.

use std::collections::BTreeSet;

use super::refused;
use crate::exec::timeline_ops::timeline_file;
use crate::protocol::heartbeat::heartbeat_path;
use crate::protocol::markers::marker_dir;
use crate::storage::{OpKind, RelPath, StorageError};
use crate::table::{Table, METADATA_TABLE_PATH};
use crate::timeline::{Action, State};
use crate::Error;

/// What a rollback (or a restore) changes on a local table, looked at for symbolic links
/// before its first change.
#[derive(Debug, Default)]
pub(in crate::exec) struct Changes {
    /// Files it deletes.
    pub(in crate::exec) deletes: Vec<RelPath>,
    /// Files it writes (a placeholder name stands for a new file in a folder).
    pub(in crate::exec) writes: Vec<RelPath>,
    /// Folders it deletes whole, by listing them (marker folders), and the metadata table's.
    pub(in crate::exec) trees: Vec<RelPath>,
}

impl Changes {
    /// What every rollback of `t` changes besides its plan's files: its timeline files, its
    /// heartbeat and marker folder (and `r`'s, the rollback's own), and the metadata table.
    pub(in crate::exec) fn around(table: &Table, t: &str, r: Option<&str>) -> Result<Self, Error> {
        let timeline = timeline_file(
            table.config(),
            r.unwrap_or(t),
            None,
            Action::Rollback,
            State::Requested,
        )?;
        let mut trees = vec![marker_dir(t)?, metadata_table_dir()?];
        if let Some(r) = r {
            trees.push(marker_dir(r)?);
        }
        Ok(Self {
            deletes: vec![heartbeat_path(t)?],
            writes: vec![timeline],
            trees,
        })
    }

    /// The deletes of a resolved plan, and the folders its command blocks are written to.
    pub(in crate::exec) fn add_plan(
        &mut self,
        resolved: &crate::plan::rollback::ResolvedPlan,
    ) -> Result<(), Error> {
        self.deletes.extend(
            resolved
                .deletes
                .values()
                .flat_map(|v| v.iter().map(|(_, rel)| rel.clone())),
        );
        for (partition, file_id, _, _) in &resolved.log_blocks {
            let folder = RelPath::parse(partition).map_err(StorageError::from)?;
            self.writes
                .push(folder.join(file_id).map_err(StorageError::from)?);
        }
        Ok(())
    }
}

fn metadata_table_dir() -> Result<RelPath, Error> {
    Ok(RelPath::parse(METADATA_TABLE_PATH).map_err(StorageError::from)?)
}

/// Refuse, before the first change, a rollback or restore of `instant` that would delete or
/// write through a symbolic link below the table's base path, or in a table folder that is
/// no longer the folder opened (swapped for a link after it was opened): the local store
/// follows links, so such a change would land outside the table. The refusal names the link
/// (and the dry run shows it). Every mutating request checks its own way again as a last line
/// of defence; this check makes the refusal come before anything changed. Nothing to check on
/// object stores.
pub(in crate::exec) async fn refuse_links(
    table: &Table,
    instant: &str,
    changes: &Changes,
) -> Result<(), Error> {
    let storage = table.storage();
    if !storage.is_local() {
        return Ok(());
    }
    let checked = async {
        storage.check_way(OpKind::Delete, &changes.deletes).await?;
        storage.check_way(OpKind::Put, &changes.writes).await?;
        for tree in changes.trees.iter().collect::<BTreeSet<_>>() {
            storage.check_tree(OpKind::Delete, tree).await?;
        }
        Ok::<_, StorageError>(())
    };
    match checked.await {
        Ok(()) => Ok(()),
        Err(e) if e.is_link_refusal() => {
            Err(refused(table, instant, format!("{e}; nothing was changed")))
        }
        Err(e) => Err(e.into()),
    }
}
