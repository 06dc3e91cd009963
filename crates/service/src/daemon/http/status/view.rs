//! What the status page shows, made from the API's table view (`tables::TableView`): the rows
//! of `/` and the parts of `/tables/{name}`. The templates (`templates/status/`) escape every
//! value; only the timeline's SVG, escaped where it is built (`svg`), goes in as it is.

use askama::Template;
use hudi_keeper_core::protocol::detect::Verdict;

use super::super::tables::TableView;
use super::format::{age, duration, moment};
use super::svg::verdict_class;
use crate::daemon::TableStatus;

/// The table's state in one word, and its CSS class.
pub fn state_of(s: &TableStatus) -> (&'static str, &'static str) {
    match (s.polls, s.last_poll_ok, s.halted) {
        (_, _, true) => ("halted", "bad"),
        (0, _, _) => ("not polled yet", "idle"),
        (_, Some(true), _) => ("ok", "ok"),
        _ => ("failing", "bad"),
    }
}

/// How bad a verdict is, to pick a table's worst pending write.
fn severity(v: Verdict) -> u8 {
    match v {
        v if v.is_failed() => 5,
        Verdict::RollbackInProgress => 4,
        v if v.is_left_alone() => 3,
        Verdict::EagerWriterSuspected | Verdict::Unknown => 2,
        Verdict::Live | Verdict::TooYoung => 1,
        _ => 0,
    }
}

/// One row of `/`.
pub struct Row {
    pub name: String,
    pub uri: String,
    pub state: &'static str,
    pub state_class: &'static str,
    pub pending: usize,
    pub worst: Option<&'static str>,
    pub worst_class: &'static str,
    pub last_change: String,
    pub owner: String,
    pub audit: String,
}

impl Row {
    pub fn new(v: &TableView<'_>, now_ms: i64) -> Self {
        let s = &v.status;
        let (state, state_class) = state_of(s);
        let worst = s
            .pending
            .iter()
            .map(|a| a.verdict)
            .max_by_key(|v| severity(*v));
        Row {
            name: v.name.to_string(),
            uri: v.uri.to_string(),
            state,
            state_class,
            pending: s.pending.len(),
            worst: worst.map(Verdict::as_str),
            worst_class: worst.map(verdict_class).unwrap_or(""),
            last_change: last_change(s, now_ms),
            owner: owner(v),
            audit: audit(v),
        }
    }
}

/// The newer of this daemon's last rollback and the last rollback or restore the timeline
/// showed (which another process may have made): empty when there is neither.
fn last_change(s: &TableStatus, now_ms: i64) -> String {
    let own = s.last_rollback.as_deref();
    let seen = s.last_timeline_change;
    match (own, seen) {
        (_, Some(c)) if own.is_none_or(|r| c.completed_ms > r.at_ms) => format!(
            "{} on the timeline, {}",
            c.action.as_str(),
            moment(c.completed_ms, now_ms)
        ),
        (Some(r), _) => format!(
            "{} of {}: {}, {}",
            r.trigger,
            r.instant,
            r.outcome,
            moment(r.at_ms, now_ms)
        ),
        (None, _) => String::new(),
    }
}

/// The table's owner in a cluster (empty when the daemon runs alone).
pub fn owner(v: &TableView<'_>) -> String {
    match &v.owner {
        Some(o) if o.this_replica => format!("{} (this replica)", o.name),
        Some(o) => o.name.clone(),
        None => String::new(),
    }
}

/// The last complete audit's files that are not committed, in short.
pub fn audit(v: &TableView<'_>) -> String {
    let a = &v.audit;
    let mut out = match &a.files {
        Some(files) => files
            .iter()
            .map(|(c, n)| format!("{} {n}", c.as_str()))
            .collect::<Vec<_>>()
            .join(", "),
        None => String::new(),
    };
    if a.running_since_ms.is_some() {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str("an audit runs");
    }
    out
}

/// A pending write on `/tables/{name}`.
pub struct PendingRow {
    pub instant: String,
    pub action: String,
    pub state: &'static str,
    pub verdict: &'static str,
    pub class: &'static str,
    pub heartbeat: String,
    pub age: String,
    pub reason: String,
}

impl PendingRow {
    pub fn all(s: &TableStatus) -> Vec<Self> {
        s.pending
            .iter()
            .map(|a| PendingRow {
                instant: a.requested_time.clone(),
                action: a.action.to_string(),
                state: a.state.as_str(),
                verdict: a.verdict.as_str(),
                class: verdict_class(a.verdict),
                heartbeat: a
                    .heartbeat_age_ms
                    .map(|ms| format!("{} ago", age(ms)))
                    .unwrap_or_else(|| "no heartbeat file".into()),
                age: a
                    .instant_age_ms
                    .map(age)
                    .unwrap_or_else(|| "unknown".into()),
                reason: a.reason.clone(),
            })
            .collect()
    }
}

/// A rollback or restore on `/tables/{name}`.
pub struct ChangeRow {
    pub what: String,
    pub instant: String,
    pub when: String,
    pub outcome: String,
    pub duration: String,
    pub detail: String,
}

impl ChangeRow {
    /// The daemon's last rollback of the table, if it made one since it started.
    pub fn daemons_last(s: &TableStatus, now_ms: i64) -> Option<Self> {
        let r = s.last_rollback.as_deref()?;
        let mut detail = format!("{} files deleted", r.files_deleted);
        if let Some(ri) = &r.rollback_instant {
            detail.push_str(&format!(", rollback instant {ri}"));
        }
        if let Some(e) = &r.error {
            detail.push_str(&format!("; error: {e}"));
        }
        Some(ChangeRow {
            what: format!("{} rollback", r.trigger),
            instant: r.instant.clone(),
            when: moment(r.at_ms, now_ms),
            outcome: r.outcome.to_string(),
            duration: duration(r.duration_ms),
            detail,
        })
    }
}

/// The writers line: what the daemon knows of the table's writers.
pub fn writers_line(s: &TableStatus, now_ms: i64) -> String {
    let w = &s.writers;
    let mut out = match (w.lazy_writers_known, w.evidence) {
        (true, Some(e)) => format!("LAZY writers known ({})", evidence_name(e)),
        _ => "no LAZY writers known (EAGER assumed)".to_string(),
    };
    if let Some(n) = w.heartbeat_files {
        let files = if n == 1 { "file" } else { "files" };
        out.push_str(&format!("; {n} heartbeat {files} at the last poll"));
    }
    if let Some(ms) = w.heartbeats_first_seen_ms {
        out.push_str(&format!("; heartbeats first seen {}", moment(ms, now_ms)));
    }
    if w.eager_writer_suspected {
        out.push_str("; an EAGER writer's write is suspected");
    }
    let left: Vec<String> = w
        .left_alone
        .by_reason()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    if !left.is_empty() {
        out.push_str(&format!("; left alone: {}", left.join(", ")));
    }
    out
}

fn evidence_name(e: hudi_keeper_core::protocol::detect::LazyWritersEvidence) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{e:?}"))
}

/// `GET /`.
#[derive(Template)]
#[template(path = "status/index.html")]
pub struct IndexPage {
    pub q: String,
    pub page: usize,
    pub pages: usize,
    pub matched: usize,
    pub total: usize,
    pub first: usize,
    pub rows: Vec<Row>,
    pub prev: Option<String>,
    pub next: Option<String>,
    pub cluster: String,
}

/// `GET /tables/{name}`.
#[derive(Template)]
#[template(path = "status/table.html")]
pub struct TablePage {
    pub name: String,
    pub uri: String,
    pub state: &'static str,
    pub state_class: &'static str,
    pub halted_reason: Option<String>,
    pub last_error: Option<String>,
    pub last_poll: String,
    pub owner: String,
    pub audit: String,
    pub svg: String,
    pub timeline_note: String,
    pub writers: String,
    pub pending: Vec<PendingRow>,
    pub changes: Vec<ChangeRow>,
}

/// A page that says what went wrong (an unknown table, a bad query).
#[derive(Template)]
#[template(path = "status/error.html")]
pub struct ErrorPage {
    pub title: String,
    pub message: String,
}
