//! The status page: `GET /` lists the tables (search `?q=`, pages of [`PAGE`] with `?page=`),
//! `GET /tables/{name}` shows one table's timeline as SVG, its writers, its pending writes with
//! their verdicts and reasons, and its recent rollbacks and restores.
//!
//! Read-only, rendered on the server (askama templates in `templates/status/`, which escape
//! every value; no script, no outside asset), and admitted like the API's reads (no token, a
//! slot of `server.max_concurrent_requests`). It shows what `GET /api/v1/tables` and
//! `GET /api/v1/tables/{name}` serve (their `TableView`), plus the table's timeline as
//! `GET …/timeline` reads it and the metadata of its newest rollbacks.
//!
//! At 100,000 tables a page of `/` copies the status of its own [`PAGE`] tables only; a search
//! compares each table's name and URI under the registry's read lock, copying nothing.

mod format;
mod svg;
#[cfg(test)]
mod tests;
mod view;

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use hudi_keeper_core::format::rollback::RollbackMetadata;
use hudi_keeper_core::storage::RelPath;
use hudi_keeper_core::timeline::{
    instant_to_epoch_ms, Action, Instant, InstantZone, State as IState, Timeline,
};
use hudi_keeper_core::Table;
use serde::Deserialize;

use super::tables::table_view;
use super::Shared;
use crate::daemon::table_state::{now_ms, TIMELINE_READS_PER_TABLE};
use crate::daemon::{Daemon, TableError, TableState};
use format::{contains_ignore_case, duration, moment, query_value};
use svg::{timeline_svg, Undone};
use view::{
    audit, owner, state_of, writers_line, ChangeRow, ErrorPage, IndexPage, PendingRow, Row,
    TablePage,
};

/// Tables on a page of `/`.
pub const PAGE: usize = 100;
/// The longest search accepted.
const MAX_QUERY: usize = 256;
/// The newest instants drawn (older ones are counted, not drawn).
const MAX_DRAWN: usize = 5000;
/// The newest rollbacks and restores listed; the rollbacks among them have their metadata read
/// (one GET each) to mark what they undid.
const RECENT_CHANGES: usize = 20;
/// The most read of one rollback's metadata for a page.
const METADATA_MAX_READ: u64 = hudi_keeper_core::storage::SMALL_FILE_MAX_READ;

/// `GET /?q=&page=`.
#[derive(Debug, Deserialize)]
pub(super) struct IndexQuery {
    #[serde(default)]
    q: String,
    page: Option<usize>,
}

/// What a page may load and run: nothing but its own inline styles (no script, no outside
/// asset, no frame around it), a second line behind the escaping.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn page_response<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(html) => (
            status,
            [
                (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            Html(html),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the page could not be rendered: {e}\n"),
        )
            .into_response(),
    }
}

fn error_page(status: StatusCode, title: &str, message: String) -> Response {
    page_response(
        status,
        &ErrorPage {
            title: title.into(),
            message,
        },
    )
}

/// The tables whose name or URI holds `q` (ASCII case ignored): how many are registered, how
/// many match, and the matches on page `page` (0-based).
async fn search(d: &Daemon, q: &str, page: usize) -> (usize, usize, Vec<Arc<TableState>>) {
    let tables = d.tables.read().await;
    let skip = page.saturating_mul(PAGE);
    if q.is_empty() {
        let out = tables.values().skip(skip).take(PAGE).cloned().collect();
        return (tables.len(), tables.len(), out);
    }
    let needle = q.to_ascii_lowercase();
    let mut matched = 0usize;
    let mut out = Vec::new();
    for t in tables.values() {
        if contains_ignore_case(&t.entry.name, needle.as_bytes())
            || contains_ignore_case(&t.entry.uri, needle.as_bytes())
        {
            if matched >= skip && out.len() < PAGE {
                out.push(t.clone());
            }
            matched += 1;
        }
    }
    (tables.len(), matched, out)
}

pub(super) async fn index(
    State(d): Shared,
    query: Result<Query<IndexQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Query(query) = match query {
        Ok(q) => q,
        Err(e) => return error_page(StatusCode::BAD_REQUEST, "Bad request", e.body_text()),
    };
    if query.q.len() > MAX_QUERY {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Bad request",
            format!("a search holds at most {MAX_QUERY} bytes"),
        );
    }
    let page = query.page.unwrap_or(1).max(1);
    let (total, matched, tables) = search(&d, &query.q, page - 1).await;
    let cluster = d.cluster();
    let now = now_ms();
    let rows: Vec<Row> = tables
        .iter()
        .map(|t| Row::new(&table_view(&d, &cluster, t), now))
        .collect();
    let pages = matched.div_ceil(PAGE).max(1);
    let link = |p: usize| {
        if query.q.is_empty() {
            format!("/?page={p}")
        } else {
            format!("/?q={}&page={p}", query_value(&query.q))
        }
    };
    let replicas = cluster.members().len();
    let page_view = IndexPage {
        first: (page - 1).saturating_mul(PAGE).saturating_add(1),
        prev: (page > 1).then(|| link(page - 1)),
        next: (page < pages).then(|| link(page + 1)),
        q: query.q,
        page,
        pages,
        matched,
        total,
        rows,
        cluster: format!(
            "{} tables registered; this replica: {} ({} mode, {} replicas)",
            total,
            cluster.my_name(),
            cluster.mode().as_str(),
            replicas
        ),
    };
    page_response(StatusCode::OK, &page_view)
}

/// How long an instant took: from its requested time to its completion time (layout 2), else
/// between its first and last timeline files' modification times.
fn took_ms(i: &Instant, zone: InstantZone) -> Option<u64> {
    let from_names = i.completion_time.as_deref().and_then(|c| {
        Some(instant_to_epoch_ms(c, zone)? - instant_to_epoch_ms(&i.requested_time, zone)?)
    });
    let from_files = || {
        let first = i.files.first()?.last_modified.timestamp_millis();
        let last = i.files.last()?.last_modified.timestamp_millis();
        Some(last - first)
    };
    from_names.or_else(from_files).map(|ms| ms.max(0) as u64)
}

/// What one rollback's metadata says: the writes it undid (with their action when recorded), and
/// a line for the page.
fn undid(m: &RollbackMetadata) -> (Vec<(String, Option<Action>)>, String) {
    let times: Vec<(String, Option<Action>)> = if m.instants_rollback.is_empty() {
        m.commits_rollback
            .iter()
            .map(|t| (t.clone(), None))
            .collect()
    } else {
        m.instants_rollback
            .iter()
            .map(|x| (x.commit_time.clone(), x.action.parse().ok()))
            .collect()
    };
    let partitions: Vec<&str> = m.partition_metadata.keys().map(String::as_str).collect();
    let line = format!(
        "undid {}; {} files deleted in {}",
        times
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        m.total_files_deleted,
        if partitions.is_empty() {
            "no partition".to_string()
        } else {
            partitions.join(", ")
        }
    );
    (times, line)
}

/// The newest rollbacks and restores of `tl`, with what the rollbacks undid (their metadata
/// read through `table`, at once and within `server.poll_timeout`).
async fn recent_changes(
    d: &Daemon,
    state: &TableState,
    table: &Table,
    tl: &Timeline,
    now: i64,
) -> (Vec<ChangeRow>, Vec<Undone>) {
    let zone = table.zone();
    let recent: Vec<&Instant> = tl
        .instants()
        .iter()
        .rev()
        .filter(|i| matches!(i.action, Action::Rollback | Action::Restore))
        .take(RECENT_CHANGES)
        .collect();
    let files: Vec<Option<&RelPath>> = recent
        .iter()
        .map(|i| match i.action {
            Action::Rollback => i.file(IState::Completed).map(|f| &f.path),
            _ => None,
        })
        .collect();
    // One of the table's timeline reads (as the timeline itself), each file at most 1 MiB:
    // a page costs at most RECENT_CHANGES MiB, however large a rollback was.
    let reads = match state.timeline_reads.try_take() {
        None => Err(TableError::Busy(format!(
            "{TIMELINE_READS_PER_TABLE} timeline reads of the table run already"
        ))),
        Some(_read) => {
            d.read_within(async {
                let gets = files.iter().map(|f| async move {
                    match f {
                        Some(path) => {
                            Some(table.storage().get_capped(path, METADATA_MAX_READ).await)
                        }
                        None => None,
                    }
                });
                Ok(futures::future::join_all(gets).await)
            })
            .await
        }
    };
    let mut rows = Vec::new();
    let mut undone = Vec::new();
    for (n, i) in recent.iter().enumerate() {
        let when = instant_to_epoch_ms(&i.requested_time, zone)
            .map(|ms| moment(ms, now))
            .unwrap_or_default();
        let mut row = ChangeRow {
            what: i.action.to_string(),
            instant: i.requested_time.clone(),
            when,
            outcome: if i.is_pending() {
                format!("pending ({})", i.state.as_str())
            } else {
                "completed".into()
            },
            duration: took_ms(i, zone).map(duration).unwrap_or_default(),
            detail: String::new(),
        };
        match reads.as_ref().map(|r| r.get(n)) {
            Ok(Some(Some(Ok(bytes)))) => match RollbackMetadata::from_avro(bytes) {
                Ok(m) => {
                    let (times, line) = undid(&m);
                    row.detail = line;
                    if m.time_taken_in_millis > 0 {
                        row.duration = duration(m.time_taken_in_millis as u64);
                    }
                    undone.extend(times.into_iter().map(|(t, action)| Undone {
                        instant: t,
                        action,
                        by: i.requested_time.clone(),
                    }));
                }
                Err(e) => row.detail = format!("metadata unreadable: {e}"),
            },
            Ok(Some(Some(Err(e)))) => row.detail = format!("metadata not read: {e}"),
            Ok(_) => {}
            Err(e) => row.detail = format!("metadata not read: {e}"),
        }
        rows.push(row);
    }
    // The daemon's own last rollback, whatever the timeline still shows.
    let status = state.status();
    if let Some(r) = status.last_rollback.as_deref() {
        let known = undone.iter().any(|u| u.instant == r.instant)
            || tl.instants().iter().any(|i| i.requested_time == r.instant);
        if !known && r.outcome == "success" {
            undone.push(Undone {
                instant: r.instant.clone(),
                action: None,
                by: r.rollback_instant.clone().unwrap_or_default(),
            });
        }
    }
    if let Some(last) = ChangeRow::daemons_last(&status, now) {
        rows.insert(0, last);
    }
    (rows, undone)
}

pub(super) async fn table_page(State(d): Shared, Path(name): Path<String>) -> Response {
    let state = match d.table(&name).await {
        Ok(s) => s,
        Err(e) => return error_page(StatusCode::NOT_FOUND, "No such table", e.to_string()),
    };
    let now = now_ms();
    let cluster = d.cluster();
    let view = table_view(&d, &cluster, &state);
    let s = &view.status;
    let (state_word, state_class) = state_of(s);
    let (svg, timeline_note, changes) = match d.timeline_and_table(&name).await {
        Ok((table, tl)) => {
            let (changes, undone) = recent_changes(&d, &state, &table, &tl, now).await;
            let all = tl.instants();
            let drawn = &all[all.len().saturating_sub(MAX_DRAWN)..];
            let svg = timeline_svg(drawn, &s.pending, &undone, table.zone(), now);
            let note = if drawn.len() < all.len() {
                format!(
                    "The newest {} of {} instants on the active timeline.",
                    drawn.len(),
                    all.len()
                )
            } else {
                format!("{} instants on the active timeline.", all.len())
            };
            (svg, note, changes)
        }
        Err(e) => (
            String::new(),
            format!("The timeline could not be read: {e}"),
            ChangeRow::daemons_last(s, now).into_iter().collect(),
        ),
    };
    let page = TablePage {
        name: view.name.to_string(),
        uri: view.uri.to_string(),
        state: state_word,
        state_class,
        halted_reason: s.halted_reason.clone(),
        last_error: s.last_error.clone(),
        last_poll: match s.last_poll_finished_ms {
            Some(ms) => format!(
                "{}{}",
                moment(ms, now),
                s.last_poll_duration_ms
                    .map(|d| format!(", took {}", duration(d)))
                    .unwrap_or_default()
            ),
            None => "none yet".into(),
        },
        owner: owner(&view),
        audit: audit(&view),
        svg,
        timeline_note,
        writers: writers_line(s, now),
        pending: PendingRow::all(s),
        changes,
    };
    page_response(StatusCode::OK, &page)
}
