//! The operator's view of a table: its configuration, every instant, and each pending instant
//! with its heartbeat, verdict and markers.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Error;
use crate::protocol::detect::{
    assess, DetectionInput, FailedWritesPolicy, LazyWritersEvidence, Verdict, WritersReport,
};
use crate::protocol::heartbeat::HeartbeatPolicy;
use crate::protocol::markers::{read_markers, MarkerKind};
use crate::table::Table;
use crate::timeline::{Action, Instant, MalformedFile, State};

pub use crate::protocol::observe::{observe, Observation};

/// How to judge pending instants.
#[derive(Debug, Clone, Copy)]
pub struct InspectOptions {
    /// LAZY or EAGER.
    pub policy: FailedWritesPolicy,
    /// Heartbeat thresholds.
    pub heartbeat: HeartbeatPolicy,
    /// Now, in epoch ms.
    pub now_ms: i64,
    /// What is known about the table's writers beyond its storage (the operator's statement,
    /// or what a daemon saw); heartbeat files present now count by themselves.
    pub lazy_writers: Option<LazyWritersEvidence>,
    /// The operator's opt-in: no write runs longer than this.
    pub max_write_duration: Option<std::time::Duration>,
    /// Hudi 1.2's clustering expiration threshold, when clustering expirations are on.
    pub clustering_expiration: Option<std::time::Duration>,
}

/// The table part of a report.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    /// The table URI.
    pub uri: String,
    /// `hoodie.table.name`.
    pub name: String,
    /// `COPY_ON_WRITE` or `MERGE_ON_READ`.
    #[serde(rename = "type")]
    pub table_type: String,
    /// `hoodie.table.version`.
    pub version: u32,
    /// `hoodie.timeline.layout.version`.
    pub timeline_layout: u32,
    /// The active timeline folder.
    pub timeline_path: String,
    /// `LOCAL` or `UTC`.
    pub timeline_timezone: String,
    /// Enabled metadata-table partitions.
    pub metadata_partitions: Vec<String>,
}

/// One instant in a report.
#[derive(Debug, Clone, Serialize)]
pub struct InstantRow {
    /// The instant time.
    pub requested_time: String,
    /// The action as Hudi reports it.
    pub action: Action,
    /// The latest state.
    pub state: State,
    /// The completion time (layout 2 only).
    pub completion_time: Option<String>,
}

impl From<&Instant> for InstantRow {
    fn from(i: &Instant) -> Self {
        Self {
            requested_time: i.requested_time.clone(),
            action: i.action,
            state: i.state,
            completion_time: i.completion_time.clone(),
        }
    }
}

/// The markers of a pending instant.
#[derive(Debug, Clone, Serialize)]
pub struct MarkerSummary {
    /// DIRECT or TIMELINE_SERVER_BASED; `None` without a marker folder.
    pub kind: Option<MarkerKind>,
    /// Markers by IO type.
    pub counts: BTreeMap<String, usize>,
    /// Total markers.
    pub total: usize,
    /// Why the markers could not be read, if they could not.
    pub error: Option<String>,
}

/// One pending instant in a report.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRow {
    /// The instant time.
    pub requested_time: String,
    /// The pending action.
    pub action: Action,
    /// Requested or inflight.
    pub state: State,
    /// The heartbeat's age in ms, when a heartbeat file exists.
    pub heartbeat_age_ms: Option<i64>,
    /// The instant's age in ms.
    pub instant_age_ms: Option<i64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
    /// Its markers (for candidates).
    pub markers: Option<MarkerSummary>,
}

/// The timeline of the metadata table.
#[derive(Debug, Clone, Serialize)]
pub struct MetadataTableReport {
    /// Its table version.
    pub version: u32,
    /// Every instant.
    pub instants: Vec<InstantRow>,
    /// Timeline-looking files that did not parse.
    pub malformed: Vec<MalformedFile>,
}

/// What the table's storage says about the lock its writers use.
#[derive(Debug, Clone, Serialize, Default)]
pub struct LockReport {
    /// Age in ms of `.hoodie/lock` (Hudi's `FileSystemBasedLockProvider`), if it exists: held
    /// now, or left by a writer that died holding it.
    pub filesystem_lock_age_ms: Option<i64>,
    /// Whether `.hoodie/.locks/table_lock.json` exists (Hudi 1.x `StorageBasedLockProvider`).
    pub storage_lock_file: bool,
    /// What that lock file says, when it exists.
    pub storage_lock: Option<StorageLockState>,
    /// The `--lock` provider the lock files point to, when they point to one.
    pub suggested_provider: Option<String>,
    /// What that suggests, in words.
    pub hint: String,
}

/// The state of a storage-based lock file.
#[derive(Debug, Clone, Serialize, Default)]
pub struct StorageLockState {
    /// The holder's owner id.
    pub owner: Option<String>,
    /// Epoch milliseconds until which the lease runs.
    pub valid_until_ms: Option<i64>,
    /// Released by its holder.
    pub expired: Option<bool>,
    /// Held right now (neither released nor lapsed).
    pub held: bool,
    /// Why the file could not be read as a lock file, if it could not.
    pub corrupt: Option<String>,
}

/// What `hudi-keeper inspect` shows.
#[derive(Debug, Clone, Serialize)]
pub struct InspectReport {
    /// The table.
    pub table: TableSummary,
    /// The policy pending instants were judged under.
    pub policy: FailedWritesPolicy,
    /// What is known about the table's writers, and the writes left alone.
    pub writers: WritersReport,
    /// Every instant, sorted as Hudi sorts them.
    pub instants: Vec<InstantRow>,
    /// Pending instants, newest first.
    pub pending: Vec<PendingRow>,
    /// Timeline-looking files that did not parse.
    pub malformed: Vec<MalformedFile>,
    /// The metadata table's timeline, when there is one.
    pub metadata_table: Option<MetadataTableReport>,
    /// Signs of the lock the writers use.
    pub lock: LockReport,
}

/// Look for the lock files of Hudi's lock providers (two HEADs).
pub async fn lock_report(table: &Table, now_ms: i64) -> Result<LockReport, Error> {
    let rel =
        |p: &str| crate::storage::RelPath::parse(p).map_err(crate::storage::StorageError::from);
    let fs = table.storage().head(&rel(".hoodie/lock")?).await?;
    let lock_path = rel(crate::protocol::lock::storage_lock::DEFAULT_PATH)?;
    let lock_file = match table
        .storage()
        .get_opt_capped(&lock_path, crate::storage::SMALL_FILE_MAX_READ)
        .await
    {
        Ok(bytes) => bytes.map(Ok),
        // Reported like any other lock file that is not one, and left unread.
        Err(e @ crate::storage::StorageError::TooLarge { .. }) => Some(Err(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let storage_lock = lock_file.map(|read| {
        match read.and_then(|bytes| crate::protocol::lock::storage_lock::LockData::parse(&bytes)) {
            Ok(d) => StorageLockState {
                owner: Some(d.owner.clone()),
                valid_until_ms: Some(d.valid_until),
                expired: Some(d.expired),
                held: !d.is_free(now_ms),
                corrupt: None,
            },
            Err(why) => StorageLockState {
                corrupt: Some(why),
                ..Default::default()
            },
        }
    });
    let storage_lock_file = storage_lock.is_some();
    let filesystem_lock_age_ms = fs.map(|m| now_ms - m.last_modified.timestamp_millis());
    let (suggested, hint) = match (filesystem_lock_age_ms, &storage_lock) {
        (Some(age), _) => (Some("filesystem"), format!("`.hoodie/lock` exists ({} s old): writers use the file-system lock (--lock filesystem), and it is held now or was left by a writer that died holding it", age / 1000)),
        (None, Some(l)) if l.corrupt.is_some() => (None, format!("`.hoodie/.locks/table_lock.json` is not a valid lock file: {}; writers using the storage-based lock fail until it is fixed", l.corrupt.clone().unwrap_or_default())),
        (None, Some(l)) if l.held => (Some("storage"), format!("writers use Hudi 1.x's storage-based lock (--lock storage); it is held now by `{}`", l.owner.clone().unwrap_or_default())),
        (None, Some(_)) => (Some("storage"), "writers use Hudi 1.x's storage-based lock (--lock storage); it is free now".to_string()),
        (None, None) => (None, "no lock file: the writers' lock provider cannot be told from storage (a free file-system lock leaves no file; a ZooKeeper lock lives outside the table)".to_string()),
    };
    Ok(LockReport {
        filesystem_lock_age_ms,
        storage_lock_file,
        storage_lock,
        suggested_provider: suggested.map(str::to_string),
        hint,
    })
}

/// The markers of pending instant `instant`, counted by IO type (or why they could not be read).
async fn marker_summary(table: &Table, instant: &str) -> MarkerSummary {
    match read_markers(table.storage(), instant).await {
        Ok(m) => {
            let mut counts = BTreeMap::new();
            for marker in &m.markers {
                *counts.entry(marker.io_type.to_string()).or_insert(0) += 1;
            }
            MarkerSummary {
                kind: m.kind,
                total: m.markers.len(),
                counts,
                error: None,
            }
        }
        Err(e) => MarkerSummary {
            kind: None,
            counts: BTreeMap::new(),
            total: 0,
            error: Some(e.to_string()),
        },
    }
}

/// Inspect `table`.
pub async fn inspect(table: &Table, options: &InspectOptions) -> Result<InspectReport, Error> {
    let config = table.config();
    let timeline = table.timeline().await?;
    let observed = observe(table, &timeline, options.clustering_expiration.is_some()).await?;
    let lazy_writers = observed.lazy_writers(options.lazy_writers);
    let input = DetectionInput {
        now_ms: options.now_ms,
        policy: options.policy,
        heartbeat: options.heartbeat,
        heartbeats: &observed.heartbeats,
        replace_kinds: &observed.replace_kinds,
        lazy_writers,
        max_write_duration: options.max_write_duration,
        clustering_expiration: options.clustering_expiration,
    };
    let assessments = assess(&timeline, &input);
    let writers = WritersReport::new(
        options.policy,
        lazy_writers,
        options.max_write_duration,
        observed.heartbeat_files,
        &assessments,
    );
    let mut pending = Vec::new();
    for a in assessments {
        let markers = if a.verdict == Verdict::NotACandidate {
            None
        } else {
            Some(marker_summary(table, &a.requested_time).await)
        };
        pending.push(PendingRow {
            requested_time: a.requested_time,
            action: a.action,
            state: a.state,
            heartbeat_age_ms: a.heartbeat_age_ms,
            instant_age_ms: a.instant_age_ms,
            verdict: a.verdict,
            reason: a.reason,
            markers,
        });
    }
    let metadata_table = match table.metadata_table().await? {
        Some(mdt) => {
            let t = mdt.timeline().await?;
            Some(MetadataTableReport {
                version: mdt.config().version.number(),
                instants: t.instants().iter().map(InstantRow::from).collect(),
                malformed: t.malformed().to_vec(),
            })
        }
        None => None,
    };
    Ok(InspectReport {
        table: TableSummary {
            uri: table.uri().to_string(),
            name: config.name.to_string(),
            table_type: config.table_type.to_string(),
            version: config.version.number(),
            timeline_layout: config.timeline_layout.number(),
            timeline_path: config.timeline_dir.to_string(),
            timeline_timezone: match config.timezone {
                crate::config::TimelineTimezone::Local => "LOCAL".into(),
                crate::config::TimelineTimezone::Utc => "UTC".into(),
            },
            metadata_partitions: config.metadata_partitions.to_vec(),
        },
        policy: options.policy,
        writers,
        instants: timeline.instants().iter().map(InstantRow::from).collect(),
        pending,
        malformed: timeline.malformed().to_vec(),
        metadata_table,
        lock: lock_report(table, options.now_ms).await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{RelPath, Storage, SMALL_FILE_MAX_READ};
    use bytes::Bytes;
    use object_store::memory::InMemory;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_storage_lock_file_over_a_mebibyte_is_reported_corrupt_unread() {
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        let put = |p: &str, b: Vec<u8>| {
            let s = s.clone();
            let p = RelPath::parse(p).unwrap();
            async move { s.put(&p, Bytes::from(b)).await.unwrap() }
        };
        put(
            ".hoodie/hoodie.properties",
            b"hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n"
                .to_vec(),
        )
        .await;
        let mut big = br#"{"expired":false,"validUntil":1,"owner":"x"}"#.to_vec();
        big.resize(SMALL_FILE_MAX_READ as usize + 1, b' ');
        put(crate::protocol::lock::storage_lock::DEFAULT_PATH, big).await;
        let table = Table::open_storage(s).await.unwrap();
        let report = lock_report(&table, 0).await.unwrap();
        assert!(report.storage_lock_file);
        let corrupt = report
            .storage_lock
            .and_then(|l| l.corrupt)
            .unwrap_or_default();
        assert!(corrupt.contains("more than the"), "{corrupt:?}");
    }
}
