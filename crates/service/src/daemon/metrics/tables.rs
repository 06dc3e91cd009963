//! Per-table metrics: [`TableMetrics`], plain atomics per table, and the text of their families
//! in the exposition (one series per table, or one over all tables).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};

use hudi_keeper_core::audit::Class;

use super::counts::{AuditCounts, ChangeCounts, PendingCounts, NO_AUDITS, NO_CHANGES, NO_PENDING};
use super::{AtomicF64, LEFT_ALONE_REASONS, POLL_OUTCOMES};
use crate::daemon::audit_view::{AuditOutcome, AuditSummary};

/// The classes of `hudi_keeper_audit_files` and `hudi_keeper_audit_bytes`, in the order their
/// series are written: a table's first two always (once it has a complete audit), the others
/// once they are not 0.
pub const AUDIT_CLASSES: [Class; 5] = [
    Class::Committed,
    Class::RollbackLeftover,
    Class::Orphan,
    Class::Pending,
    Class::Unknown,
];

/// The help of `hudi_keeper_rollback_leftovers_total`.
const LEFTOVERS_HELP: &str = "Data files of rolled-back instants found by the leftover guard in the partitions completed rollbacks touched (a zombie writer's, or missed by the rollback), by outcome: removed, or kept (see the log).";

/// The (outcome, trigger) of each of [`TableMetrics::rollbacks`].
const ROLLBACK_LABELS: [(&str, &str); 4] = [
    ("success", "auto"),
    ("failure", "auto"),
    ("success", "manual"),
    ("failure", "manual"),
];

/// One table's metrics.
#[derive(Debug, Default)]
pub struct TableMetrics {
    /// By [`POLL_OUTCOMES`].
    pub polls: [AtomicU64; 4],
    /// Another replica owns the table (`[cluster]`): its per-table series are left out, so
    /// that each table has one set of series across the replicas.
    pub not_owned: AtomicBool,
    /// Its next poll is at `idle_poll_interval` (it was idle at its last poll).
    pub idle: AtomicBool,
    pub last_poll_timestamp: AtomicF64,
    pub last_poll_duration: AtomicF64,
    /// What its last poll found pending: made at the first poll that finds anything (an idle
    /// table's polls find nothing; they would cost it 112 bytes).
    pub(super) pending: OnceLock<Box<PendingCounts>>,
    /// By `OpKind::ALL`.
    pub requests: [AtomicU64; 8],
    pub halted: AtomicBool,
    /// Its rollbacks, leftovers and lock waits: made at the first one (an idle table never
    /// has any; they would cost it 96 bytes).
    pub(super) changes: OnceLock<Box<ChangeCounts>>,
    /// Its audits: made at the first one that ends (104 bytes a table with audits off).
    pub(super) audits: OnceLock<Box<AuditCounts>>,
}

impl TableMetrics {
    /// What its last poll found pending, to read (nothing before the first poll that found
    /// anything).
    pub fn pending_now(&self) -> &PendingCounts {
        self.pending.get().map_or(&NO_PENDING, |c| c)
    }

    /// What its last poll found pending, to set (made at the first poll that finds anything).
    pub fn count_pending(&self) -> &PendingCounts {
        self.pending.get_or_init(Box::default)
    }

    /// What its last poll found pending, if any poll ever found anything.
    pub fn pending_if_any(&self) -> Option<&PendingCounts> {
        self.pending.get().map(|c| &**c)
    }

    /// Its rollbacks, leftovers and lock waits, to read (all zero before the first).
    pub fn changes(&self) -> &ChangeCounts {
        self.changes.get().map_or(&NO_CHANGES, |c| c)
    }

    /// Its rollbacks, leftovers and lock waits, to count (made at the first).
    pub fn count_changes(&self) -> &ChangeCounts {
        self.changes.get_or_init(Box::default)
    }

    /// What its audits found, to read (all zero before the first).
    pub fn audit(&self) -> &AuditCounts {
        self.audits.get().map_or(&NO_AUDITS, |c| c)
    }

    pub fn poll(&self, outcome: &str) {
        if let Some(i) = POLL_OUTCOMES.iter().position(|o| *o == outcome) {
            self.polls[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn rollback(&self, success: bool, trigger: &str) {
        let i = match (success, trigger) {
            (true, "auto") => 0,
            (false, "auto") => 1,
            (true, _) => 2,
            (false, _) => 3,
        };
        self.count_changes().rollbacks[i].fetch_add(1, Ordering::Relaxed);
    }

    /// What the last poll found about the writers: writes left alone by reason, and whether
    /// EAGER writers are suspected.
    pub fn set_writers(&self, left_alone: [(&str, usize); 3], eager_writer_suspected: bool) {
        let nothing = !eager_writer_suspected && left_alone.iter().all(|(_, n)| *n == 0);
        let counts = match self.pending_if_any() {
            Some(c) => c,
            None if nothing => return,
            None => self.count_pending(),
        };
        for (i, reason) in LEFT_ALONE_REASONS.iter().enumerate() {
            let n = left_alone
                .iter()
                .find(|(r, _)| r == reason)
                .map(|(_, n)| *n as i64)
                .unwrap_or(0);
            counts.left_alone[i].store(n, Ordering::Relaxed);
        }
        counts
            .eager_writer_suspected
            .store(eager_writer_suspected, Ordering::Relaxed);
    }

    /// An audit ended: counted by outcome; a complete one's files and bytes per class become
    /// the table's (others leave the last complete one's).
    pub fn audit_ended(&self, outcome: AuditOutcome, summary: Option<&AuditSummary>) {
        let counts = self.audits.get_or_init(Box::default);
        if let Some(i) = AuditOutcome::ALL.iter().position(|o| *o == outcome) {
            counts.audits[i].fetch_add(1, Ordering::Relaxed);
        }
        let Some(s) = summary.filter(|_| outcome == AuditOutcome::Complete) else {
            return;
        };
        for (i, class) in AUDIT_CLASSES.iter().enumerate() {
            let c = s.classes.get(class).cloned().unwrap_or_default();
            counts.audit_files[i].store(c.files, Ordering::Relaxed);
            counts.audit_bytes[i].store(c.bytes, Ordering::Relaxed);
        }
        counts.audited.store(true, Ordering::Relaxed);
        counts
            .audit_last_complete_timestamp
            .set(chrono::Utc::now().timestamp_millis() as f64 / 1000.0);
    }

    pub fn set_pending(&self, counts: Vec<(&'static str, i64)>) {
        let pending = match self.pending_if_any() {
            Some(p) => p,
            None if counts.is_empty() => return,
            None => self.count_pending(),
        };
        if let Ok(mut p) = pending.pending.lock() {
            *p = counts;
        }
    }
}

/// The `# HELP` and `# TYPE` lines of an aggregate family.
fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        out,
        "# HELP {name} {help} Summed over the owned tables (server.table_metrics = \"aggregate\")."
    );
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// An aggregate family of one series: its `# HELP` and `# TYPE` lines, then its value.
fn single(out: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    head(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// The per-table families as one series each over `tables` (no `table` label): counters and
/// counts summed, ages the largest, flags counted.
pub(super) fn render_aggregate(out: &mut String, tables: &[&TableMetrics]) {
    let u = |f: &dyn Fn(&TableMetrics) -> u64| tables.iter().map(|m| f(m)).sum::<u64>();
    let i = |f: &dyn Fn(&TableMetrics) -> i64| tables.iter().map(|m| f(m)).sum::<i64>();
    let max = |f: &dyn Fn(&TableMetrics) -> f64| tables.iter().map(|m| f(m)).fold(0.0, f64::max);
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    head(
        out,
        "hudi_keeper_polls_total",
        "counter",
        "Polls, by outcome.",
    );
    for (k, outcome) in POLL_OUTCOMES.iter().enumerate() {
        let v = u(&|m| load(&m.polls[k]));
        let _ = writeln!(out, "hudi_keeper_polls_total{{outcome=\"{outcome}\"}} {v}");
    }
    let mut pending: BTreeMap<&'static str, i64> = BTreeMap::new();
    for m in tables {
        if let Ok(p) = m.pending_now().pending.lock() {
            for (action, n) in p.iter() {
                *pending.entry(action).or_default() += n;
            }
        }
    }
    head(
        out,
        "hudi_keeper_pending_instants",
        "gauge",
        "Pending instants at the last polls, by action.",
    );
    for (action, n) in pending {
        let _ = writeln!(
            out,
            "hudi_keeper_pending_instants{{action=\"{action}\"}} {n}"
        );
    }
    single(
        out,
        "hudi_keeper_oldest_pending_instant_age_seconds",
        "gauge",
        "Age of the oldest pending write (the largest over the tables).",
        max(&|m| m.pending_now().oldest_pending_age.get()),
    );
    single(out, "hudi_keeper_stalest_heartbeat_age_seconds", "gauge", "Heartbeat age of the pending write whose heartbeat is oldest (the largest over the tables).", max(&|m| m.pending_now().stalest_heartbeat_age.get()));
    single(
        out,
        "hudi_keeper_failed_instants",
        "gauge",
        "Pending writes judged failed at the last polls.",
        i(&|m| m.pending_now().failed_instants.load(Ordering::Relaxed)),
    );
    single(
        out,
        "hudi_keeper_rollbacks_in_progress",
        "gauge",
        "Pending rollbacks another process runs (fresh rollback heartbeat) at the last polls.",
        i(&|m| {
            m.pending_now()
                .rollbacks_in_progress
                .load(Ordering::Relaxed)
        }),
    );
    head(
        out,
        "hudi_keeper_pending_writes_left_alone",
        "gauge",
        "Pending writes without heartbeat file left alone at the last polls, by reason.",
    );
    for (k, reason) in LEFT_ALONE_REASONS.iter().enumerate() {
        let v = i(&|m| m.pending_now().left_alone[k].load(Ordering::Relaxed));
        let _ = writeln!(
            out,
            "hudi_keeper_pending_writes_left_alone{{reason=\"{reason}\"}} {v}"
        );
    }
    single(
        out,
        "hudi_keeper_eager_writer_suspected",
        "gauge",
        "Tables whose last poll found a pending write that looks like an EAGER writer's.",
        u(&|m| {
            u64::from(
                m.pending_now()
                    .eager_writer_suspected
                    .load(Ordering::Relaxed),
            )
        }),
    );
    render_aggregate_changes(out, tables);
    render_aggregate_audits(out, tables);
}

/// [`render_aggregate`]'s families of the audits: outcomes summed; files and bytes per class
/// summed over the tables with a complete audit; the oldest last complete audit.
fn render_aggregate_audits(out: &mut String, tables: &[&TableMetrics]) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    head(
        out,
        "hudi_keeper_audits_total",
        "counter",
        "Audits of tables, by outcome.",
    );
    for (k, o) in AuditOutcome::ALL.iter().enumerate() {
        let v: u64 = tables.iter().map(|m| load(&m.audit().audits[k])).sum();
        let _ = writeln!(
            out,
            "hudi_keeper_audits_total{{outcome=\"{}\"}} {v}",
            o.as_str()
        );
    }
    let audited: Vec<&&TableMetrics> = tables
        .iter()
        .filter(|m| m.audit().audited.load(Ordering::Relaxed))
        .collect();
    let oldest = audited
        .iter()
        .map(|m| m.audit().audit_last_complete_timestamp.get())
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.min(t))));
    single(
        out,
        "hudi_keeper_audit_last_complete_timestamp_seconds",
        "gauge",
        "The oldest last complete audit (Unix time; 0: none).",
        oldest.unwrap_or(0.0),
    );
    for (name, help, of) in [
        (
            "hudi_keeper_audit_files",
            "Data files by class at the last complete audits.",
            (|m: &TableMetrics, i: usize| m.audit().audit_files[i].load(Ordering::Relaxed))
                as fn(&TableMetrics, usize) -> u64,
        ),
        (
            "hudi_keeper_audit_bytes",
            "Their bytes.",
            |m: &TableMetrics, i: usize| m.audit().audit_bytes[i].load(Ordering::Relaxed),
        ),
    ] {
        head(out, name, "gauge", help);
        for (i, class) in AUDIT_CLASSES.iter().enumerate() {
            let v: u64 = audited.iter().map(|m| of(m, i)).sum();
            let _ = writeln!(out, "{name}{{class=\"{}\"}} {v}", class.as_str());
        }
    }
}

/// [`render_aggregate`]'s families of what the daemon changed and what it cost.
fn render_aggregate_changes(out: &mut String, tables: &[&TableMetrics]) {
    let u = |f: &dyn Fn(&TableMetrics) -> u64| tables.iter().map(|m| f(m)).sum::<u64>();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    head(
        out,
        "hudi_keeper_rollbacks_total",
        "counter",
        "Rollbacks of failed writes, by outcome and trigger.",
    );
    for (k, (outcome, trigger)) in ROLLBACK_LABELS.iter().enumerate() {
        let v = u(&|m| load(&m.changes().rollbacks[k]));
        let _ = writeln!(
            out,
            "hudi_keeper_rollbacks_total{{outcome=\"{outcome}\",trigger=\"{trigger}\"}} {v}"
        );
    }
    single(
        out,
        "hudi_keeper_files_deleted_total",
        "counter",
        "Data files deleted by rollbacks.",
        u(&|m| load(&m.changes().files_deleted)),
    );
    head(
        out,
        "hudi_keeper_rollback_leftovers_total",
        "counter",
        LEFTOVERS_HELP,
    );
    for (outcome, v) in [
        ("removed", u(&|m| load(&m.changes().leftovers_removed))),
        ("kept", u(&|m| load(&m.changes().leftovers_kept))),
    ] {
        let _ = writeln!(
            out,
            "hudi_keeper_rollback_leftovers_total{{outcome=\"{outcome}\"}} {v}"
        );
    }
    head(
        out,
        "hudi_keeper_object_store_requests_total",
        "counter",
        "Object-store requests, by kind.",
    );
    for (k, kind) in OpKind::ALL.iter().enumerate() {
        let v = u(&|m| load(&m.requests[k]));
        let _ = writeln!(
            out,
            "hudi_keeper_object_store_requests_total{{kind=\"{}\"}} {v}",
            kind.as_str()
        );
    }
    single(
        out,
        "hudi_keeper_lock_waits_total",
        "counter",
        "Times taking a table lock had to wait.",
        u(&|m| load(&m.changes().lock_waits)),
    );
    single(
        out,
        "hudi_keeper_lock_wait_seconds_total",
        "counter",
        "Time spent waiting for table locks.",
        u(&|m| load(&m.changes().lock_wait_ms)) as f64 / 1000.0,
    );
}

/// Tables per part of the exposition (about 100 KB of text for a family of one line each).
pub const TABLES_PER_PART: usize = 2_000;

/// One part of the per-table exposition: family number `family`, for `tables`.
pub(super) struct Part<'a> {
    pub(super) out: String,
    pub(super) tables: &'a [(Arc<str>, Arc<TableMetrics>)],
    pub(super) family: usize,
    /// With the family's `# HELP` and `# TYPE` lines (its first part).
    pub(super) header: bool,
    /// Families passed so far.
    pub(super) seen: usize,
}

impl Part<'static> {
    /// A part that writes nothing and counts the families.
    pub(super) fn counting() -> Self {
        Part {
            out: String::new(),
            tables: &[],
            family: usize::MAX,
            header: false,
            seen: 0,
        }
    }
}

/// One per-table family: header, then one line per table (and label combination) that `lines`
/// writes; only where it is the family `part` is for.
fn family(
    part: &mut Part<'_>,
    name: &str,
    kind: &str,
    help: &str,
    mut lines: impl FnMut(&mut String, &str, &TableMetrics),
) {
    let this = part.seen;
    part.seen += 1;
    if this != part.family {
        return;
    }
    if part.header {
        let _ = writeln!(part.out, "# HELP {name} {help}");
        let _ = writeln!(part.out, "# TYPE {name} {kind}");
    }
    for (table, m) in part.tables {
        lines(&mut part.out, table, m);
    }
}

/// A per-table family with one value per table.
fn scalar(
    part: &mut Part<'_>,
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&TableMetrics) -> String,
) {
    family(part, name, kind, help, |o, t, m| {
        let _ = writeln!(o, "{name}{{table=\"{t}\"}} {}", value(m));
    });
}

/// The lines of a table in a family with one label besides `table`: one per label, the first
/// two always, the others once they are not 0.
fn by_label<T: std::fmt::Display + Default + PartialOrd>(
    o: &mut String,
    name: &str,
    key: &str,
    labels: &[&str],
    table: &str,
    value: impl Fn(usize) -> T,
) {
    for (i, label) in labels.iter().enumerate() {
        let v = value(i);
        if i < 2 || v > T::default() {
            let _ = writeln!(o, "{name}{{{key}=\"{label}\",table=\"{table}\"}} {v}");
        }
    }
}

/// Every per-table family, in the exposition's order, into `out`.
pub(super) fn render_tables(out: &mut Part<'_>) {
    render_poll_families(out);
    render_writer_families(out);
    render_change_families(out);
    render_audit_families(out);
}

/// What the audits found: outcomes, the last complete one's time, files and bytes per class.
fn render_audit_families(out: &mut Part<'_>) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let outcomes = AuditOutcome::ALL.map(AuditOutcome::as_str);
    family(
        out,
        "hudi_keeper_audits_total",
        "counter",
        "Audits of a table, by outcome (complete; cut_short: its request budget, audit_max_requests, was spent, and its counts are not used; failed).",
        |o, t, m| {
            by_label(o, "hudi_keeper_audits_total", "outcome", &outcomes, t, |i| {
                load(&m.audit().audits[i])
            })
        },
    );
    scalar(
        out,
        "hudi_keeper_audit_last_complete_timestamp_seconds",
        "gauge",
        "Unix time at which the last complete audit of a table finished (0 before the first).",
        |m| m.audit().audit_last_complete_timestamp.get().to_string(),
    );
    let classes = AUDIT_CLASSES.map(Class::as_str);
    family(
        out,
        "hudi_keeper_audit_files",
        "gauge",
        "Data files by class (committed, rollback_leftover, orphan, pending, unknown) at the last complete audit of a table; none before the first. committed and rollback_leftover are always written, the others once not 0.",
        |o, t, m| {
            if m.audit().audited.load(Ordering::Relaxed) {
                by_label(o, "hudi_keeper_audit_files", "class", &classes, t, |i| {
                    load(&m.audit().audit_files[i])
                })
            }
        },
    );
    family(
        out,
        "hudi_keeper_audit_bytes",
        "gauge",
        "Bytes of the data files by class at the last complete audit of a table (as hudi_keeper_audit_files).",
        |o, t, m| {
            if m.audit().audited.load(Ordering::Relaxed) {
                by_label(o, "hudi_keeper_audit_bytes", "class", &classes, t, |i| {
                    load(&m.audit().audit_bytes[i])
                })
            }
        },
    );
}

/// What the polls found: their outcomes, times and the pending instants.
fn render_poll_families(out: &mut Part<'_>) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    family(
        out,
        "hudi_keeper_polls_total",
        "counter",
        "Polls of a table, by outcome (ok, error, skipped_halted, skipped_busy).",
        |o, t, m| {
            by_label(
                o,
                "hudi_keeper_polls_total",
                "outcome",
                &POLL_OUTCOMES,
                t,
                |i| load(&m.polls[i]),
            )
        },
    );
    scalar(
        out,
        "hudi_keeper_last_poll_timestamp_seconds",
        "gauge",
        "Unix time at which the last poll of a table finished (0 before the first).",
        |m| m.last_poll_timestamp.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_last_poll_duration_seconds",
        "gauge",
        "Wall time of the last poll of a table.",
        |m| m.last_poll_duration.get().to_string(),
    );
    family(
        out,
        "hudi_keeper_pending_instants",
        "gauge",
        "Pending instants on the active timeline at the last poll, by action.",
        |o, t, m| {
            if let Ok(p) = m.pending_now().pending.lock() {
                for (action, n) in p.iter() {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_pending_instants{{action=\"{action}\",table=\"{t}\"}} {n}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_oldest_pending_instant_age_seconds",
        "gauge",
        "Age of the oldest pending write at the last poll (0 when none).",
        |m| m.pending_now().oldest_pending_age.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_stalest_heartbeat_age_seconds",
        "gauge",
        "Heartbeat age of the pending write whose heartbeat is oldest (0 when none).",
        |m| m.pending_now().stalest_heartbeat_age.get().to_string(),
    );
    scalar(
        out,
        "hudi_keeper_failed_instants",
        "gauge",
        "Pending writes judged failed at the last poll (observe tables keep them).",
        |m| {
            m.pending_now()
                .failed_instants
                .load(Ordering::Relaxed)
                .to_string()
        },
    );
    scalar(
        out,
        "hudi_keeper_rollbacks_in_progress",
        "gauge",
        "Pending rollbacks another process runs (fresh rollback heartbeat) at the last poll.",
        |m| {
            m.pending_now()
                .rollbacks_in_progress
                .load(Ordering::Relaxed)
                .to_string()
        },
    );
}

/// What the last poll judged of the writers.
fn render_writer_families(out: &mut Part<'_>) {
    family(
        out,
        "hudi_keeper_pending_writes_left_alone",
        "gauge",
        "Pending writes without heartbeat file that nothing proves dead, left alone at the last poll, by reason (no_heartbeat_unconfirmed: no heartbeat ever seen on the table; awaiting_newer_write: the newest write under EAGER; age_unknown).",
        |o, t, m| {
            let name = "hudi_keeper_pending_writes_left_alone";
            by_label(o, name, "reason", &LEFT_ALONE_REASONS, t, |i| {
                m.pending_now().left_alone[i].load(Ordering::Relaxed)
            })
        },
    );
    scalar(
        out,
        "hudi_keeper_eager_writer_suspected",
        "gauge",
        "1 when the last poll found a pending write without heartbeat file on a table judged LAZY that looks like an EAGER writer's (younger than min_instant_age, or on a table with heartbeat files).",
        |m| u8::from(m.pending_now().eager_writer_suspected.load(Ordering::Relaxed)).to_string(),
    );
}

/// What the daemon changed and what it cost: rollbacks, deletes, requests, lock waits, halts.
fn render_change_families(out: &mut Part<'_>) {
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    family(
        out,
        "hudi_keeper_rollbacks_total",
        "counter",
        "Rollbacks of failed writes, by outcome (success, failure) and trigger (auto, manual).",
        |o, t, m| {
            for (i, (outcome, trigger)) in ROLLBACK_LABELS.iter().enumerate() {
                let v = load(&m.changes().rollbacks[i]);
                if i < 2 || v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_rollbacks_total{{outcome=\"{outcome}\",table=\"{t}\",trigger=\"{trigger}\"}} {v}"
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_files_deleted_total",
        "counter",
        "Data files deleted by rollbacks.",
        |m| load(&m.changes().files_deleted).to_string(),
    );
    family(
        out,
        "hudi_keeper_rollback_leftovers_total",
        "counter",
        LEFTOVERS_HELP,
        |o, t, m| {
            for (outcome, v) in [
                ("removed", load(&m.changes().leftovers_removed)),
                ("kept", load(&m.changes().leftovers_kept)),
            ] {
                let _ = writeln!(
                    o,
                    "hudi_keeper_rollback_leftovers_total{{outcome=\"{outcome}\",table=\"{t}\"}} {v}"
                );
            }
        },
    );
    family(
        out,
        "hudi_keeper_object_store_requests_total",
        "counter",
        "Object-store requests, by kind (list, list_dir, get, head, put, put_if_absent, delete, put_if_match).",
        |o, t, m| {
            for (i, kind) in OpKind::ALL.iter().enumerate() {
                let v = load(&m.requests[i]);
                if v > 0 {
                    let _ = writeln!(
                        o,
                        "hudi_keeper_object_store_requests_total{{kind=\"{}\",table=\"{t}\"}} {v}",
                        kind.as_str()
                    );
                }
            }
        },
    );
    scalar(
        out,
        "hudi_keeper_lock_waits_total",
        "counter",
        "Times taking the table lock had to wait for another holder.",
        |m| load(&m.changes().lock_waits).to_string(),
    );
    scalar(
        out,
        "hudi_keeper_lock_wait_seconds_total",
        "counter",
        "Time spent waiting for the table lock.",
        |m| (load(&m.changes().lock_wait_ms) as f64 / 1000.0).to_string(),
    );
    scalar(
        out,
        "hudi_keeper_table_halted",
        "gauge",
        "1 when a table is halted after repeated failures (resume it through the API).",
        |m| u8::from(m.halted.load(Ordering::Relaxed)).to_string(),
    );
}

/// A table's metrics count its storage requests by kind themselves: a table's storage holds
/// its `Arc<TableMetrics>` as its interceptor (no wrapper to allocate a table).
impl Interceptor for TableMetrics {
    fn before(&self, op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        if let Some(i) = OpKind::ALL.iter().position(|k| *k == op) {
            self.requests[i].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}
