//! `hudi-keeper audit --repair --repair-metadata-table`: delete a metadata table that disagrees
//! with the store, for the next writer to rebuild from a listing, as Hudi's own CLI does
//! (`metadata delete`, `HoodieTableMetadataUtil.deleteMetadataTable`: the metadata partitions
//! cleared in `hoodie.properties` first, then `.hoodie/metadata` removed) and as hudi-keeper's
//! restore does when it cannot keep it (the same code,
//! [`crate::exec::metadata_table::restore::delete_metadata_table`]).
//!
//! Refused before anything changes (the table left byte for byte as it was):
//!
//! - while any instant is pending on the data table: a live writer writes to the metadata table
//!   too (and a failed one is rolled back through it): roll it back first;
//! - when the audit did not compare the metadata table with the store (no metadata table, or
//!   one it cannot judge), or found no disagreement.
//!
//! Under the table lock both are checked again (the timeline read, the table audited again)
//! before the deletion. Left-overs of a metadata table that `hoodie.properties` no longer lists
//! (a deletion cut off halfway) are deleted the same way. A cut-off deletion is finished by
//! running the command again (each step is idempotent).

use std::time::Duration;

use serde::Serialize;
use tracing::info;

use super::repair::RepairOptions;
use super::{audit, AuditOptions, AuditReport};
use crate::exec::holding_lock;
use crate::exec::metadata_table::restore::{delete_metadata_table, metadata_table_action};
use crate::exec::metadata_table::MetadataTableAction;
use crate::table::Table;
use crate::Error;

/// What the metadata-table repair did.
#[derive(Debug, Clone, Serialize)]
pub struct MetadataTableRepair {
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// Whether the metadata table was deleted (a dry run: would be).
    pub deleted: bool,
    /// Why: the disagreement found.
    pub reason: String,
    /// How long taking the lock waited.
    pub lock_wait_ms: u64,
}

fn refused(table: &Table, reason: impl Into<String>) -> Error {
    Error::RepairRefused {
        table: table.uri().to_string(),
        reason: format!("{}; the metadata table was not changed", reason.into()),
    }
}

/// Why the metadata table of `table` (audited as `audited`) may be deleted, or the refusal.
async fn grounds(table: &Table, audited: &AuditReport) -> Result<String, Error> {
    let timeline = table.timeline().await?;
    if let Some(p) = timeline.pending().next() {
        return Err(refused(
            table,
            format!(
                "{} {} is pending on the table: a live writer writes to the metadata table too; roll it back first (hudi-keeper rollback)",
                p.pending_action.as_str(),
                p.requested_time
            ),
        ));
    }
    let check = &audited.metadata_table;
    if check.disagrees() {
        return Ok(format!(
            "it lists {} file(s) the store lacks and misses {} committed file(s), in {} partition(s)",
            check.missing_from_store,
            check.not_listed,
            check.partitions.len()
        ));
    }
    if !table.config().metadata_table_enabled()
        && metadata_table_action(table).await? == MetadataTableAction::Deleted
    {
        return Ok(
            "left-overs of a metadata table that `hoodie.properties` no longer lists (a deletion cut off halfway)"
                .into(),
        );
    }
    Err(refused(
        table,
        match &check.not_checked {
            Some(why) => format!("the metadata table was not compared with the store: {why}"),
            None => "the metadata table agrees with the store".to_string(),
        },
    ))
}

/// Delete the metadata table of `table`, audited as `audited`, by the rules of the module.
pub async fn repair_metadata_table(
    table: &Table,
    audited: &AuditReport,
    options: &RepairOptions,
    audit_options: &AuditOptions,
) -> Result<MetadataTableRepair, Error> {
    let reason = grounds(table, audited).await?;
    if options.dry_run {
        return Ok(MetadataTableRepair {
            dry_run: true,
            deleted: true,
            reason,
            lock_wait_ms: 0,
        });
    }
    let (reason, waited): (String, Duration) =
        holding_lock(table, &options.lock, |fenced| async move {
            let again = audit(&fenced, audit_options).await?;
            let reason = grounds(&fenced, &again).await?;
            delete_metadata_table(&fenced).await?;
            Ok(reason)
        })
        .await?;
    info!(table = %table.uri(), %reason, "metadata table deleted by the audit's repair; the next writer rebuilds it");
    Ok(MetadataTableRepair {
        dry_run: false,
        deleted: true,
        reason,
        lock_wait_ms: waited.as_millis() as u64,
    })
}
