//! The table API: list, show, register and unregister tables, read a table's timeline, and
//! change it (rollback, restore, savepoint, resume). A change runs detached from its client.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::admission::InFlight;
use super::auth::authorize;
use super::{ApiError, Shared};
use crate::daemon::cluster::{Cluster, Owner};
use crate::daemon::config::{TableEntry, TableSettings};
use crate::daemon::{
    AuditBrief, Daemon, ManualRollback, Source, TableError, TableState, TableStatus,
};

/// A table as the API shows it, serialized as it is written out (no JSON tree per table: a
/// list of 100,000 tables must not cost ten times its text).
/// The status page (`status`) shows the same view.
#[derive(Serialize)]
pub(super) struct TableView<'a> {
    pub(super) name: &'a str,
    pub(super) uri: &'a str,
    pub(super) source: Source,
    /// The `[[discover]]` source that found the table (`source` is `discovered`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) discovered_by: Option<&'a str>,
    pub(super) owner: Option<Owner>,
    pub(super) settings: &'a TableSettings,
    pub(super) status: TableStatus,
    /// The last audits, in short (`GET …/audit` has them whole).
    pub(super) audit: AuditBrief,
}

pub(super) fn table_view<'a>(d: &'a Daemon, cluster: &Cluster, t: &'a TableState) -> TableView<'a> {
    TableView {
        name: &t.entry.name,
        uri: &t.entry.uri,
        source: t.source,
        discovered_by: match t.source {
            Source::Discovered(i) => d
                .config
                .discover
                .get(usize::from(i))
                .map(|s| s.name.as_str()),
            _ => None,
        },
        owner: cluster.owner(&t.entry.name),
        settings: &t.settings,
        status: t.status(),
        audit: t.audit_update(|a| a.brief()),
    }
}

#[derive(Serialize)]
struct ClusterView<'a> {
    mode: &'a str,
    this_replica: String,
    member: bool,
    replicas: usize,
}

#[derive(Serialize)]
struct TableList<'a> {
    cluster: ClusterView<'a>,
    /// Every registered table, whatever the page (the same on every page).
    total: usize,
    tables: Vec<TableView<'a>>,
    /// The `after` of the next page; `None` on the last page.
    next: Option<&'a str>,
}

/// Tables a page of `GET /api/v1/tables` lists unless the client asks for fewer.
pub const DEFAULT_PAGE: usize = 100;
/// The most tables one page lists: a page costs its own tables, never the whole fleet.
pub const MAX_PAGE: usize = 1000;

/// `GET /api/v1/tables?limit=&after=`: a page of the tables in name order.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Page {
    /// Tables on the page (default [`DEFAULT_PAGE`], at most [`MAX_PAGE`]).
    limit: Option<usize>,
    /// List the tables whose names sort after this one (the last page's `next`).
    after: Option<String>,
}

pub(super) async fn list_tables(
    State(d): Shared,
    page: Result<axum::extract::Query<Page>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let axum::extract::Query(page) =
        page.map_err(|e| ApiError(StatusCode::BAD_REQUEST, e.body_text()))?;
    let limit = page.limit.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            format!("limit must be between 1 and {MAX_PAGE}"),
        ));
    }
    let cluster = d.cluster();
    let (total, tables, more) = d.tables_page(page.after.as_deref(), limit).await;
    let list = TableList {
        cluster: ClusterView {
            mode: cluster.mode().as_str(),
            this_replica: cluster.my_name(),
            member: cluster.me().is_some(),
            replicas: cluster.members().len(),
        },
        total,
        tables: tables.iter().map(|t| table_view(&d, &cluster, t)).collect(),
        next: more
            .then(|| tables.last().map(|t| &*t.entry.name))
            .flatten(),
    };
    Ok(Json(list).into_response())
}

pub(super) async fn table(
    State(d): Shared,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let t = d.table(&name).await?;
    Ok(Json(table_view(&d, &d.cluster(), &t)).into_response())
}

pub(super) async fn timeline(
    State(d): Shared,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let tl = d.timeline(&name).await?;
    Ok(Json(json!({
        "table": name,
        "instants": tl.instants(),
        "malformed": tl.malformed().iter().map(|m| json!({"name": m.name, "reason": m.reason})).collect::<Vec<_>>(),
    })))
}

/// `GET /api/v1/tables/{name}/audit`: the last audit and the last complete one (404 until one
/// ended on this replica).
pub(super) async fn audit(
    State(d): Shared,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let t = d.table(&name).await?;
    let (running, runs, last, complete) = t.audit_update(|a| {
        (
            a.running_since_ms,
            a.runs,
            a.last.clone(),
            a.last_complete.clone(),
        )
    });
    let Some(last) = last else {
        let when = match t.settings.audit_interval_ms {
            _ if running.is_some() => "one runs now".to_string(),
            Some(ms) => format!(
                "audit_interval is {} s; the first audit comes within {} s of the table's registration",
                ms / 1000,
                (ms / 1000).min(crate::daemon::FIRST_AUDIT_WITHIN.as_secs())
            ),
            None => "audit_interval = 0: no scheduled audit (POST this path to run one)".into(),
        };
        let owner = match d.cluster().owner(&name) {
            Some(o) if !o.this_replica => format!("; its owner, {}, audits it", o.name),
            _ => String::new(),
        };
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no audit of `{name}` has ended on this replica yet: {when}{owner}"),
        ));
    };
    Ok(Json(json!({
        "table": name,
        "audit_interval_ms": t.settings.audit_interval_ms,
        "audit_max_requests": t.settings.audit_max_requests,
        "running_since_ms": running,
        "runs": runs,
        "last": &*last,
        "last_complete": complete.as_deref(),
    }))
    .into_response())
}

/// `POST /api/v1/tables/{name}/audit`: audit the table now (202: queued for an audit slot).
pub(super) async fn request_audit(
    State(d): Shared,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&d, &headers)?;
    d.request_audit(&name).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"table": name, "audit": "queued"})),
    )
        .into_response())
}

/// `POST /api/v1/tables`: only what the operator allowed the API (`Daemon::register`); run
/// detached, so that a client that goes away never leaves a table registered but not persisted.
pub(super) async fn register(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    body: Result<Json<TableEntry>, JsonRejection>,
) -> Result<Response, ApiError> {
    authorize(&d, &headers)?;
    let Json(entry) = body?;
    let name = entry.name.clone();
    let t = detached(&d, slot, {
        let d = d.clone();
        async move {
            d.register(entry).await?;
            d.table(&name).await
        }
    })
    .await?;
    Ok((StatusCode::CREATED, Json(table_view(&d, &d.cluster(), &t))).into_response())
}

pub(super) async fn unregister(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    authorize(&d, &headers)?;
    detached(&d, slot, {
        let d = d.clone();
        async move { d.unregister(&name).await }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Run a change of a table on its own task, so that a client that goes away does not cut it
/// short: the handler waits for it, and if the connection drops, the change still runs to its
/// end (or to a safe point at shutdown or its deadline) and releases its lock. It keeps the
/// request's slot of `server.max_concurrent_requests` until it ends.
async fn detached<T: Send + 'static>(
    d: &Daemon,
    slot: Option<Extension<InFlight>>,
    work: impl std::future::Future<Output = Result<T, TableError>> + Send + 'static,
) -> Result<T, ApiError> {
    let work = async move {
        let _slot = slot;
        work.await
    };
    match d.tracker.spawn(work).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the change ended abnormally: {e}"),
        )),
    }
}

/// The body of `POST /api/v1/tables/{name}/rollback`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// One pending instant; every failed write when absent.
    #[serde(default)]
    pub instant: Option<String>,
    /// Return the plan; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

pub(super) async fn rollback(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<RollbackRequest>, JsonRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&d, &headers)?;
    let Json(req) = body?;
    let result = detached(&d, slot, {
        let (d, name) = (d.clone(), name.clone());
        async move { d.manual_rollback(&name, req.instant, req.dry_run).await }
    })
    .await?;
    Ok(Json(match result {
        ManualRollback::Plan(p) => json!({"table": name, "dry_run": true, "rollbacks": p}),
        ManualRollback::Done(done) => {
            json!({"table": name, "dry_run": false, "rollbacks": done})
        }
    }))
}

/// The body of `POST /api/v1/tables/{name}/restore`: exactly one of `savepoint` and
/// `to_instant`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRequest {
    /// A savepointed commit to restore to.
    #[serde(default)]
    pub savepoint: Option<String>,
    /// Any completed commit on the active timeline (no savepoint required).
    #[serde(default)]
    pub to_instant: Option<String>,
    /// Return the plan; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

pub(super) async fn restore(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<RestoreRequest>, JsonRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&d, &headers)?;
    let Json(req) = body?;
    let (target, require_savepoint) = match (req.savepoint, req.to_instant) {
        (Some(t), None) => (t, true),
        (None, Some(t)) => (t, false),
        _ => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                "give exactly one of `savepoint` and `to_instant`".into(),
            ))
        }
    };
    let done = detached(&d, slot, {
        let d = d.clone();
        async move {
            d.manual_restore(&name, target, require_savepoint, req.dry_run)
                .await
        }
    })
    .await?;
    Ok(Json(done))
}

/// The body of `POST /api/v1/tables/{name}/savepoints`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavepointBody {
    /// The commit to savepoint; the latest completed commit when absent.
    #[serde(default)]
    pub instant: Option<String>,
    /// `savepointedBy`.
    #[serde(default)]
    pub user: Option<String>,
    /// `comments`.
    #[serde(default)]
    pub comment: Option<String>,
    /// Return what would be written; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

pub(super) async fn savepoint(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<Json<SavepointBody>, JsonRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&d, &headers)?;
    let Json(req) = body?;
    let request = hudi_keeper_core::exec::savepoint::SavepointRequest {
        instant: req.instant,
        user: req.user.unwrap_or_else(|| "hudi-keeper".into()),
        comment: req.comment.unwrap_or_default(),
    };
    let created = detached(&d, slot, {
        let d = d.clone();
        async move { d.manual_savepoint(&name, request, req.dry_run).await }
    })
    .await?;
    Ok(Json(created))
}

pub(super) async fn resume(
    State(d): Shared,
    slot: Option<Extension<InFlight>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    authorize(&d, &headers)?;
    detached(&d, slot, {
        let (d, name) = (d.clone(), name.clone());
        async move { d.resume(&name).await }
    })
    .await?;
    Ok(Json(json!({"table": name, "halted": false})))
}
