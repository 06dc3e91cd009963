//! The parts of a table's metrics that an idle table never sets, each made at its first use:
//! what its last poll found pending, its rollbacks and leftovers, its audits; and the zeros that a
//! table without them reads.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::Mutex;

use super::AtomicF64;

/// What a table's last poll found pending.
#[derive(Debug, Default)]
pub struct PendingCounts {
    /// Pending instants by action, as last polled.
    pub pending: Mutex<Vec<(&'static str, i64)>>,
    pub oldest_pending_age: AtomicF64,
    pub stalest_heartbeat_age: AtomicF64,
    pub failed_instants: AtomicI64,
    /// Pending rollbacks another process runs (their rollback heartbeat is fresh), at the last
    /// poll.
    pub rollbacks_in_progress: AtomicI64,
    /// Pending writes left alone at the last poll, by [`super::LEFT_ALONE_REASONS`].
    pub left_alone: [AtomicI64; 3],
    /// A young pending write without heartbeat file on a table judged LAZY, at the last poll.
    pub eager_writer_suspected: AtomicBool,
}

/// What a table whose polls never found anything pending reads.
pub(super) static NO_PENDING: PendingCounts = PendingCounts {
    pending: Mutex::new(Vec::new()),
    oldest_pending_age: AtomicF64(AtomicU64::new(0)),
    stalest_heartbeat_age: AtomicF64(AtomicU64::new(0)),
    failed_instants: AtomicI64::new(0),
    rollbacks_in_progress: AtomicI64::new(0),
    left_alone: [const { AtomicI64::new(0) }; 3],
    eager_writer_suspected: AtomicBool::new(false),
};

/// What a table's rollbacks and leftover guard did, and their lock waits.
#[derive(Debug, Default)]
pub struct ChangeCounts {
    /// By `ROLLBACK_LABELS`.
    pub rollbacks: [AtomicU64; 4],
    pub files_deleted: AtomicU64,
    /// Files of rolled-back instants the leftover guard removed, and found but kept.
    pub leftovers_removed: AtomicU64,
    pub leftovers_kept: AtomicU64,
    pub lock_waits: AtomicU64,
    pub lock_wait_ms: AtomicU64,
}

/// What a table's audits found.
#[derive(Debug, Default)]
pub struct AuditCounts {
    /// Audits by `AuditOutcome::ALL`.
    pub audits: [AtomicU64; 3],
    /// A complete audit ran: the audit's files and bytes are its.
    pub audited: AtomicBool,
    /// Of the last complete audit, by [`super::AUDIT_CLASSES`].
    pub audit_files: [AtomicU64; 5],
    pub audit_bytes: [AtomicU64; 5],
    pub audit_last_complete_timestamp: AtomicF64,
}

/// What tables without rollbacks, leftovers, lock waits or audits read.
pub(super) static NO_CHANGES: ChangeCounts = ChangeCounts {
    rollbacks: [const { AtomicU64::new(0) }; 4],
    files_deleted: AtomicU64::new(0),
    leftovers_removed: AtomicU64::new(0),
    leftovers_kept: AtomicU64::new(0),
    lock_waits: AtomicU64::new(0),
    lock_wait_ms: AtomicU64::new(0),
};
pub(super) static NO_AUDITS: AuditCounts = AuditCounts {
    audits: [const { AtomicU64::new(0) }; 3],
    audited: AtomicBool::new(false),
    audit_files: [const { AtomicU64::new(0) }; 5],
    audit_bytes: [const { AtomicU64::new(0) }; 5],
    audit_last_complete_timestamp: AtomicF64(AtomicU64::new(0)),
};
