//! The HTTP surface: health, readiness, metrics, the table API and its OpenAPI document.
//!
//! Mutating routes need `Authorization: Bearer <server.auth_token>`; without a configured token
//! they answer 403 (off). Errors are JSON: `{"error": "..."}`.
//!
//! The server's own limits ([`serve`], [`admit`]): at most `server.max_connections` connections;
//! request headers within `server.client_timeout`, then the whole body (at most
//! `server.max_body_bytes`) within it again, read before any handler runs, so a slow client
//! never holds a table; at most `server.max_concurrent_requests` API requests at once, a change
//! holding its slot until it ends even if its client has gone; a response the client does not
//! take for `server.client_timeout` ends the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::config::{ServerConfig, TableEntry};
use super::{Daemon, TableError};

/// The OpenAPI document of this API.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Every route: (method, path as axum and OpenAPI spell it, whether it needs the token); the
/// router below and the OpenAPI document are both checked against it.
#[cfg(test)]
pub const ROUTES: &[(&str, &str, bool)] = &[
    ("get", "/healthz", false),
    ("get", "/readyz", false),
    ("get", "/metrics", false),
    ("get", "/api/v1/openapi.json", false),
    ("get", "/api/v1/tables", false),
    ("post", "/api/v1/tables", true),
    ("get", "/api/v1/tables/{name}", false),
    ("delete", "/api/v1/tables/{name}", true),
    ("get", "/api/v1/tables/{name}/timeline", false),
    ("post", "/api/v1/tables/{name}/rollback", true),
    ("post", "/api/v1/tables/{name}/resume", true),
    ("post", "/api/v1/tables/{name}/restore", true),
    ("post", "/api/v1/tables/{name}/savepoints", true),
];

/// An API error: a status and a message, rendered as JSON.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": self.1 }));
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            // Busy: a change holds the table, or too many timeline reads run.
            return (self.0, [(header::RETRY_AFTER, "1")], body).into_response();
        }
        (self.0, body).into_response()
    }
}

impl From<TableError> for ApiError {
    fn from(e: TableError) -> Self {
        let status = match &e {
            TableError::NotFound(_) => StatusCode::NOT_FOUND,
            TableError::Conflict(_) => StatusCode::CONFLICT,
            TableError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            TableError::Forbidden(_) => StatusCode::FORBIDDEN,
            TableError::Failed(_) => StatusCode::BAD_GATEWAY,
            TableError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            // 421: the request went to a replica that does not serve this table's changes.
            TableError::NotOwner { .. } => StatusCode::MISDIRECTED_REQUEST,
        };
        ApiError(status, e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(e: JsonRejection) -> Self {
        ApiError(e.status(), e.body_text())
    }
}

type Shared = State<Arc<Daemon>>;

/// The router.
pub fn router(daemon: Arc<Daemon>) -> Router {
    let limit = daemon.config.server.max_body_bytes;
    let admission = Arc::new(Admission {
        requests: Arc::new(Semaphore::new(daemon.config.server.max_concurrent_requests)),
        max_body_bytes: limit,
        client_timeout: daemon.config.server.client_timeout,
        auth_token: daemon.config.server.auth_token.clone(),
    });
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/tables", get(list_tables).post(register))
        .route("/api/v1/tables/{name}", get(table).delete(unregister))
        .route("/api/v1/tables/{name}/timeline", get(timeline))
        .route("/api/v1/tables/{name}/rollback", post(rollback))
        .route("/api/v1/tables/{name}/resume", post(resume))
        .route("/api/v1/tables/{name}/restore", post(restore))
        .route("/api/v1/tables/{name}/savepoints", post(savepoint))
        .fallback(|| async { ApiError(StatusCode::NOT_FOUND, "no such route".into()) })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(admission, admit))
        .with_state(daemon)
}

/// The probe listener's router (`server.probe_listen`): `/healthz`, `/readyz` and `/metrics`
/// only, no API. Its connections have their own slots, so API clients cannot starve it.
pub fn probe_router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            ApiError(
                StatusCode::NOT_FOUND,
                "the probe listener serves /healthz, /readyz and /metrics only".into(),
            )
        })
        .layer(DefaultBodyLimit::max(0))
        .with_state(daemon)
}

/// What the API admits at once, and how long a client may take to send a body.
#[derive(Debug)]
struct Admission {
    /// `server.max_concurrent_requests`.
    requests: Arc<Semaphore>,
    max_body_bytes: usize,
    client_timeout: Duration,
    /// `server.auth_token`, checked before a change takes a slot.
    auth_token: Option<String>,
}

/// A slot of `server.max_concurrent_requests`, held by a request until its response is ready and
/// by the change it started until that ends (a change outlives a client that goes away).
#[derive(Debug, Clone)]
struct InFlight(#[allow(dead_code)] Arc<OwnedSemaphorePermit>);

/// Admit a request: a change (any method but GET and HEAD) only with the bearer token (401 or
/// 403 before anything else, so that clients without it cannot hold slots); then a slot of
/// `server.max_concurrent_requests` (503 with `Retry-After` when none is free; `/healthz`,
/// `/readyz` and `/metrics` need none, so probes and scrapes answer while the API is busy);
/// then a change's whole body, at most `server.max_body_bytes` (413) within
/// `server.client_timeout` (408), before any handler runs. A read's body is not read.
async fn admit(State(a): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    let counted = !matches!(req.uri().path(), "/healthz" | "/readyz" | "/metrics");
    let change = !matches!(*req.method(), Method::GET | Method::HEAD);
    if counted && change {
        if let Err(e) = check_token(a.auth_token.as_deref(), req.headers()) {
            return e.into_response();
        }
    }
    let slot =
        if counted {
            match a.requests.clone().try_acquire_owned() {
                Ok(p) => Some(InFlight(Arc::new(p))),
                Err(_) => return ApiError(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many API requests at once (server.max_concurrent_requests); retry later"
                        .into(),
                )
                .into_response(),
            }
        } else {
            None
        };
    let (parts, body) = req.into_parts();
    if !change {
        // No handler of a read takes a body: it is not waited for.
        drop(body);
        let mut req = Request::from_parts(parts, Body::empty());
        if let Some(slot) = slot {
            req.extensions_mut().insert(slot);
        }
        return next.run(req).await;
    }
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than server.max_body_bytes ({} bytes)",
                a.max_body_bytes
            ),
        )
        .into_response()
    };
    if declared.is_some_and(|n| n > a.max_body_bytes as u64) {
        return too_large();
    }
    let read = async {
        let mut stream = body.into_data_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| Err(e.to_string()))?;
            if bytes.len() + chunk.len() > a.max_body_bytes {
                return Err(Ok(()));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    };
    let bytes = match tokio::time::timeout(a.client_timeout, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(Ok(()))) => return too_large(),
        Ok(Err(Err(e))) => {
            return ApiError(
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            )
            .into_response()
        }
        Err(_) => {
            return ApiError(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within server.client_timeout ({} ms)",
                    a.client_timeout.as_millis()
                ),
            )
            .into_response()
        }
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    if let Some(slot) = slot {
        req.extensions_mut().insert(slot);
    }
    next.run(req).await
}

/// Serve `app` on `listener` until `shutdown` within the server's limits: at most
/// `server.max_connections` connections at once (more wait in the listen backlog until one
/// closes); request headers within `server.client_timeout`, which is also how long a kept-alive
/// connection waits for its next request; a response the client takes nothing of for
/// `server.client_timeout` ends its connection. At shutdown, open connections finish the
/// request they serve, then close.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let client_timeout = limits.client_timeout;
    let open = tokio_util::task::TaskTracker::new();
    loop {
        let slot = tokio::select! {
            s = connections.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            _ = shutdown.cancelled() => break,
        };
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted.
                    warn!(error = %e, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let io = TokioIo::new(WriteDeadline::new(stream, client_timeout));
        let shutdown = shutdown.clone();
        open.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(client_timeout);
            let conn = builder.serve_connection(io, service);
            tokio::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => Some(r),
                _ = shutdown.cancelled() => None,
            };
            let ended = match ended {
                Some(r) => r,
                None => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                debug!(peer = %peer, error = %e, "connection ended");
            }
        });
    }
    open.close();
    open.wait().await;
}

/// A listener's connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a client may take to send its request headers, or to take part of a response.
    pub client_timeout: Duration,
}

impl ConnectionLimits {
    /// The API listener's (`server.max_connections`, `server.client_timeout`).
    pub fn api(server: &ServerConfig) -> Self {
        Self {
            max_connections: server.max_connections,
            client_timeout: server.client_timeout,
        }
    }

    /// The probe listener's.
    pub fn probes() -> Self {
        Self {
            max_connections: super::config::PROBE_MAX_CONNECTIONS,
            client_timeout: super::config::PROBE_CLIENT_TIMEOUT,
        }
    }
}

/// A connection whose write fails once it has made no progress for `limit`: a client that does
/// not read its response does not keep its connection (and its slot of
/// `server.max_connections`).
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            stalled: None,
        }
    }

    /// The inner write gave `r`: progress resets the deadline; no progress past it is an error.
    fn judge<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match std::future::Future::poll(sleep.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no response data for server.client_timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.judge(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.judge(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.judge(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Check the bearer token of a mutating request.
fn authorize(daemon: &Daemon, headers: &HeaderMap) -> Result<(), ApiError> {
    check_token(daemon.config.server.auth_token.as_deref(), headers)
}

/// Check `headers` for the bearer token `expected` (none: changes are off).
fn check_token(expected: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = expected else {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "mutating endpoints are off: set server.auth_token to enable them".into(),
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !tokens_match(given.as_bytes(), expected.as_bytes()) {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token".into(),
        ));
    }
    Ok(())
}

/// Whether `given` is the token `expected`, in a time that tells neither how much of it matched
/// nor how long the token is: their SHA-256 digests (32 bytes, whatever the lengths) are
/// compared in constant time. Comparing the tokens themselves would answer a token of the
/// wrong length at once.
fn tokens_match(given: &[u8], expected: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    token_digest(given).ct_eq(&token_digest(expected)).into()
}

/// The SHA-256 digest of a token: fixed length, so what is compared does not depend on it.
fn token_digest(token: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token).as_ref());
    out
}

async fn readyz(State(d): Shared) -> Response {
    let tables = d.readiness().await;
    // A registry that could not be read, or entries of it not restored: tables the operator
    // registered are not watched.
    let (registry_ok, registry) = d.registry_report();
    let ready = tables.ready && registry_ok;
    let body = json!({
        "ready": ready,
        "tables": tables.tables,
        "not_ok": tables.not_ok,
        "not_ok_more": tables.not_ok_more,
        "registry": registry,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// The Prometheus exposition, streamed part by part (with 100,000 tables the whole text is over
/// 100 MB), at most `server.max_concurrent_scrapes` at once: a scrape holds its slot until its
/// last part is sent or its client is gone, so memory does not grow with the scrapers.
async fn metrics(State(d): Shared) -> Response {
    let Ok(slot) = d.scrapes.clone().try_acquire_owned() else {
        let mut r = ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many /metrics scrapes at once (server.max_concurrent_scrapes); retry later".into(),
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        return r;
    };
    let parts = d
        .metrics
        .exposition(d.config.server.table_metrics)
        .map(move |part| {
            let _held = &slot;
            Ok::<_, std::convert::Infallible>(part)
        });
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        Body::from_stream(futures::stream::iter(parts)),
    )
        .into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// A table as the API shows it, serialized as it is written out (no JSON tree per table: a
/// list of 100,000 tables must not cost ten times its text).
#[derive(Serialize)]
struct TableView<'a> {
    name: &'a str,
    uri: &'a str,
    source: super::Source,
    owner: Option<super::cluster::Owner>,
    settings: &'a super::config::TableSettings,
    status: super::TableStatus,
}

fn table_view<'a>(cluster: &super::cluster::Cluster, t: &'a super::TableState) -> TableView<'a> {
    TableView {
        name: &t.entry.name,
        uri: &t.entry.uri,
        source: t.source,
        owner: cluster.owner(&t.entry.name),
        settings: &t.settings,
        status: t.status(),
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
    /// Registered tables, this page's first included.
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
struct Page {
    /// Tables on the page (default [`DEFAULT_PAGE`], at most [`MAX_PAGE`]).
    limit: Option<usize>,
    /// List the tables whose names sort after this one (the last page's `next`).
    after: Option<String>,
}

async fn list_tables(
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
        tables: tables.iter().map(|t| table_view(&cluster, t)).collect(),
        next: more
            .then(|| tables.last().map(|t| t.entry.name.as_str()))
            .flatten(),
    };
    Ok(Json(list).into_response())
}

async fn table(State(d): Shared, Path(name): Path<String>) -> Result<Response, ApiError> {
    let t = d.table(&name).await?;
    Ok(Json(table_view(&d.cluster(), &t)).into_response())
}

async fn timeline(
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

/// `POST /api/v1/tables`: only what the operator allowed the API (`Daemon::register`); run
/// detached, so that a client that goes away never leaves a table registered but not persisted.
async fn register(
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
    Ok((StatusCode::CREATED, Json(table_view(&d.cluster(), &t))).into_response())
}

async fn unregister(
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

async fn rollback(
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
        super::ManualRollback::Plan(p) => json!({"table": name, "dry_run": true, "rollbacks": p}),
        super::ManualRollback::Done(done) => {
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

async fn restore(
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

async fn savepoint(
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

async fn resume(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_lists_exactly_the_routes() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("valid JSON");
        assert_eq!(
            doc["openapi"].as_str().map(|v| v.starts_with("3.")),
            Some(true)
        );
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                    documented.push((method.clone(), path.clone()));
                }
            }
        }
        documented.sort();
        let mut routes: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p, _)| (m.to_string(), p.to_string()))
            .collect();
        routes.sort();
        assert_eq!(documented, routes);
        // Mutating routes declare the bearer scheme; the others do not.
        for (m, p, auth) in ROUTES {
            let op = &doc["paths"][p][m];
            assert_eq!(op["security"].is_array(), *auth, "{m} {p}");
            assert!(op["responses"].is_object(), "{m} {p}");
        }
    }

    #[tokio::test]
    async fn every_listed_route_is_served_by_the_router() {
        use tower::ServiceExt;
        let daemon = Daemon::new(crate::daemon::config::Config::default()).unwrap();
        let app = router(daemon);
        for (method, path, auth) in ROUTES {
            let uri = path.replace("{name}", "t");
            let req = axum::http::Request::builder()
                .method(method.to_ascii_uppercase().as_str())
                .uri(&uri)
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{}"))
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            let status = resp.status();
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let body = String::from_utf8_lossy(&body);
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert!(
                !body.contains("no such route"),
                "{method} {path} is not routed"
            );
            // Without a configured token every mutating route is off.
            assert_eq!(
                status == StatusCode::FORBIDDEN,
                *auth,
                "{method} {path}: {status} {body}"
            );
        }
    }

    async fn get(app: &Router, uri: &str) -> Response {
        use tower::ServiceExt;
        let req = axum::http::Request::builder()
            .uri(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        app.clone().oneshot(req).await.unwrap()
    }

    #[tokio::test]
    async fn scrapes_beyond_max_concurrent_scrapes_are_refused_until_one_ends() {
        let mut config = crate::daemon::config::Config::default();
        config.server.max_concurrent_scrapes = 2;
        let daemon = Daemon::new(config).unwrap();
        let app = router(daemon.clone());
        let probes = probe_router(daemon);
        // Two scrapes whose clients take nothing hold both slots (their bodies are streams).
        let first = get(&app, "/metrics").await;
        let second = get(&probes, "/metrics").await;
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(second.status(), StatusCode::OK);
        let third = get(&app, "/metrics").await;
        assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(third.headers()[header::RETRY_AFTER], "1");
        // The probes still answer.
        assert_eq!(get(&probes, "/healthz").await.status(), StatusCode::OK);
        // A scrape read to its end gives its slot back; one whose client went away too.
        let body = axum::body::to_bytes(first.into_body(), 1 << 24)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("hudi_keeper_tables "));
        drop(second);
        assert_eq!(get(&app, "/metrics").await.status(), StatusCode::OK);
        assert_eq!(get(&app, "/metrics").await.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn the_probe_listener_serves_probes_and_metrics_only() {
        let daemon = Daemon::new(crate::daemon::config::Config::default()).unwrap();
        let probes = probe_router(daemon);
        for path in ["/healthz", "/readyz", "/metrics"] {
            assert_eq!(get(&probes, path).await.status(), StatusCode::OK, "{path}");
        }
        for path in ["/api/v1/tables", "/api/v1/openapi.json"] {
            assert_eq!(
                get(&probes, path).await.status(),
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_response_the_client_does_not_take_ends_its_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let limit = Duration::from_secs(5);
        // A client that takes 16 bytes every 4 s keeps its connection.
        let (server, mut client) = tokio::io::duplex(16);
        let mut w = WriteDeadline::new(server, limit);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            loop {
                tokio::time::sleep(Duration::from_secs(4)).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return got.len(),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        w.write_all(&[1u8; 64]).await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), 64);
        // One that takes nothing loses it.
        let (server, _client) = tokio::io::duplex(16);
        let mut w = WriteDeadline::new(server, limit);
        let err = w.write_all(&[1u8; 64]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }

    #[test]
    fn tokens_are_compared_as_fixed_length_digests() {
        // What is compared has one length whatever the token's: nothing is decided by it.
        let short = token_digest(b"a");
        let long = token_digest(&[b'x'; 4096]);
        assert_eq!((short.len(), long.len()), (32, 32));
        assert_eq!(token_digest(b""), token_digest(b""));
        // SHA-256, as published (FIPS 180-2, "abc").
        assert_eq!(
            token_digest(b"abc")[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "{:02x?}",
            token_digest(b"abc")
        );
        assert!(tokens_match(b"abc", b"abc"));
        assert!(!tokens_match(b"abc", b"abd"));
        assert!(!tokens_match(b"abc", b"abcd"));
        assert!(!tokens_match(b"", b"abc"));
        // A prefix of the token is no match either.
        let token = b"test-token-0123456789abcdef";
        assert!(!tokens_match(&token[..16], token));
    }
}
