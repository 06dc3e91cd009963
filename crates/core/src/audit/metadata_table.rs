//! The audit's check of the metadata table against the store (issue #33 item 2): before the
//! listing, the `files` partition is read as Hudi's reader of the table's version merges it
//! ([`crate::exec::metadata_table::files_partition`]) into a [`Listed`], its file names held as
//! 128-bit hashes; the listing ticks them off ([`Listed::see`]); after it both timelines are
//! read again, and the comparison counts only when neither changed meanwhile (a writer or a
//! cleaner at work would make it report files that came or went during the listing). When the
//! store lacks files the metadata table lists, the `files` partition is read a second time to
//! name the first few of each partition.
//!
//! Not checked (the reason is in the report; the audit itself never fails for it): no metadata
//! table in use, its `files` partition not built, a pending metadata-table instant other than a
//! deltacommit (a compaction, log compaction, rollback, restore, clean or clustering: Hudi's
//! reader merges a pending compaction's slices, which hudi-keeper does not), a `files` slice
//! hudi-keeper cannot read as Hudi does (a block type it does not read, an unreadable rollback
//! or restore on the data table), or one past the limits below. A pending deltacommit is read
//! as Hudi reads it: its blocks (version 6) or its log files (versions 8 and 9) are left out.

use std::collections::HashMap;

use super::drift::{Listed, MetadataTableCheck, MetadataTableListing, Missing, MAX_LISTED_FILES};
use crate::exec::metadata_table::files_partition::{read_files_partition, EntryKeys, ReadLimits};
use crate::plan::metadata_table::files_listing::ALL_PARTITIONS_KEY;
use crate::plan::metadata_table::name_hash::{NameHash, NameHasher};
use crate::table::Table;
use crate::timeline::{Action, Timeline};
use crate::Error;

/// What the audit reads of the `files` slice.
const LIMITS: ReadLimits = ReadLimits {
    slice_bytes: 1 << 30,
    decompressed_bytes: 1 << 30,
    entries: 2 * MAX_LISTED_FILES as u64,
};

/// The check, ready for the listing, or why it is not made.
pub(super) enum Check {
    /// Not made: why, and whether because the table has no metadata table in use.
    Off { why: String, absent: bool },
    /// Ready: the metadata table's files, and both timelines as they were read.
    On { listed: Listed, seen: Fingerprint },
}

/// The instants (time, action, state) of the data table's and the metadata table's timelines.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Fingerprint(Vec<(String, &'static str, &'static str)>);

fn fingerprint(data: &Timeline, mdt: &Timeline) -> Fingerprint {
    let row = |i: &crate::timeline::Instant| {
        (
            i.requested_time.clone(),
            i.action.as_str(),
            i.state.as_str(),
        )
    };
    Fingerprint(
        data.instants()
            .iter()
            .map(row)
            .chain(std::iter::once((String::new(), "", "")))
            .chain(mdt.instants().iter().map(row))
            .collect(),
    )
}

/// Read the metadata table's `files` partition for the check (see the module docs).
pub(super) async fn prepare(table: &Table, examples: usize) -> Result<Check, Error> {
    let config = table.config();
    if !config.metadata_table_enabled() {
        return Ok(Check::Off {
            why: "the table has no metadata table in use (`hoodie.table.metadata.partitions` is empty)"
                .into(),
            absent: true,
        });
    }
    if !config.metadata_partitions.iter().any(|p| p == "files")
        || config
            .metadata_partitions_inflight
            .iter()
            .any(|p| p == "files")
    {
        return Ok(Check::Off {
            why: "the metadata table's `files` partition is not built (`hoodie.table.metadata.partitions`)"
                .into(),
            absent: false,
        });
    }
    let Some(mdt) = table.metadata_table().await? else {
        return Ok(Check::Off {
            why: "`hoodie.table.metadata.partitions` lists partitions, but `.hoodie/metadata` holds no table"
                .into(),
            absent: false,
        });
    };
    let data_tl = table.timeline().await?;
    let mdt_tl = mdt.timeline().await?;
    if let Some(p) = mdt_tl
        .pending()
        .find(|i| i.action != Action::DeltaCommit || i.pending_action != Action::DeltaCommit)
    {
        return Ok(Check::Off {
            why: format!(
            "the metadata table has a pending {} {}, a state hudi-keeper does not judge; audit again once it completed",
            p.pending_action.as_str(),
            p.requested_time
        ),
            absent: false,
        });
    }
    let mut keys = HashKeys {
        hasher: NameHasher::new(),
        partitions: HashMap::new(),
        missing: None,
    };
    let merged = match read_files_partition(table, &mdt, LIMITS, &mut keys).await? {
        Ok(m) => m,
        Err(why) => {
            return Ok(Check::Off {
                why: format!("its `files` partition cannot be read as Hudi reads it: {why}"),
                absent: false,
            })
        }
    };
    let partitions = keys.partitions;
    let listed = match Listed::new(
        merged,
        keys.hasher,
        |h| partitions.get(h).cloned(),
        MAX_LISTED_FILES,
        examples,
    ) {
        Ok(l) => l,
        Err(why) => return Ok(Check::Off { why, absent: false }),
    };
    Ok(Check::On {
        listed,
        seen: fingerprint(&data_tl, &mdt_tl),
    })
}

impl Check {
    /// A file of `partition` named `name` on the store, `committed` or not: see
    /// [`Listed::see`]. Whether the metadata table lists it.
    pub(super) fn see(
        &mut self,
        partition: &str,
        name: &str,
        committed: bool,
    ) -> MetadataTableListing {
        match self {
            Check::On { listed, .. } => {
                if listed.see(partition, name, committed) {
                    MetadataTableListing::Listed
                } else {
                    MetadataTableListing::NotListed
                }
            }
            Check::Off { absent: true, .. } => MetadataTableListing::NoMetadataTable,
            Check::Off { .. } => MetadataTableListing::Unknown,
        }
    }

    /// A file the metadata table lists is a leftover or an orphan: see
    /// [`Listed::listed_not_committed`].
    pub(super) fn listed_not_committed(&mut self, partition: &str, name: &str) {
        if let Check::On { listed, .. } = self {
            listed.listed_not_committed(partition, name);
        }
    }

    /// Whether the table has no metadata table in use.
    pub(super) fn absent(&self) -> bool {
        matches!(self, Check::Off { absent: true, .. })
    }

    /// The result, after the listing: both timelines read again, and the comparison kept only
    /// when they did not change.
    pub(super) async fn finish(self, table: &Table) -> Result<MetadataTableCheck, Error> {
        let (listed, seen) = match self {
            Check::Off { why, .. } => return Ok(MetadataTableCheck::not_checked(why)),
            Check::On { listed, seen } => (listed, seen),
        };
        let Some(mdt) = table.metadata_table().await? else {
            return Ok(MetadataTableCheck::not_checked(
                "the metadata table disappeared while the table was audited",
            ));
        };
        let now = fingerprint(&table.timeline().await?, &mdt.timeline().await?);
        if now != seen {
            return Ok(MetadataTableCheck::not_checked(
                "the table or its metadata table was written while it was audited; audit again",
            ));
        }
        let (mut check, missing) = listed.finish();
        if !missing.is_empty() {
            name_missing(table, &mdt, missing, &mut check).await;
        }
        Ok(check)
    }
}

/// Entries keyed by the hashes of their names; the names of partitions (the partition list's
/// entries) kept to name them; with `missing`, the names of missing files met.
struct HashKeys {
    hasher: NameHasher,
    partitions: HashMap<NameHash, String>,
    missing: Option<Missing>,
}

impl EntryKeys for HashKeys {
    type Key = NameHash;

    fn key(&mut self, record: &str, name: &str) -> NameHash {
        let hash = self.hasher.hash(name);
        if record == ALL_PARTITIONS_KEY {
            self.partitions.insert(hash, name.to_string());
        } else if let Some(m) = &mut self.missing {
            m.meet(if record == "." { "" } else { record }, name, hash);
        }
        hash
    }
}

/// The names of the first few missing files of each partition, for the report's examples: the
/// `files` partition read a second time, the names of the hashes the store lacked kept. Reads
/// only when something is missing; a read that fails leaves the examples out (the counts
/// stand).
async fn name_missing(
    table: &Table,
    mdt: &Table,
    missing: Missing,
    check: &mut MetadataTableCheck,
) {
    let mut keys = HashKeys {
        hasher: missing.hasher().clone(),
        partitions: HashMap::new(),
        missing: Some(missing),
    };
    if let Err(e) = read_files_partition(table, mdt, LIMITS, &mut keys).await {
        tracing::warn!(error = %e, "the metadata table could not be read again to name the files the store lacks");
    }
    if let Some(missing) = keys.missing {
        missing.name(check);
    }
}
