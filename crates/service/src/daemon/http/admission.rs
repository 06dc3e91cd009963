//! What the API admits: the token of a change, a slot of `server.max_concurrent_requests`, and a
//! change's whole body within `server.client_timeout`, before any handler runs.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::check_token;
use super::ApiError;

/// What the API admits at once, and how long a client may take to send a body.
#[derive(Debug)]
pub(super) struct Admission {
    /// `server.max_concurrent_requests`.
    pub(super) requests: Arc<Semaphore>,
    pub(super) max_body_bytes: usize,
    pub(super) client_timeout: Duration,
    /// `server.auth_token`, checked before a change takes a slot.
    pub(super) auth_token: Option<String>,
}

/// A slot of `server.max_concurrent_requests`, held by a request until its response is ready and
/// by the change it started until that ends (a change outlives a client that goes away).
#[derive(Debug, Clone)]
pub(super) struct InFlight(#[allow(dead_code)] Arc<OwnedSemaphorePermit>);

/// Admit a request: a change (any method but GET and HEAD) only with the bearer token (401 or
/// 403 before anything else, so that clients without it cannot hold slots); then a slot of
/// `server.max_concurrent_requests` (503 with `Retry-After` when none is free; `/healthz`,
/// `/readyz` and `/metrics` need none, so probes and scrapes answer while the API is busy);
/// then a change's whole body, at most `server.max_body_bytes` (413) within
/// `server.client_timeout` (408), before any handler runs. A read's body is not read.
pub(super) async fn admit(State(a): State<Arc<Admission>>, req: Request, next: Next) -> Response {
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
    let bytes = match read_body(&a, &parts.headers, body).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    if let Some(slot) = slot {
        req.extensions_mut().insert(slot);
    }
    next.run(req).await
}

/// A change's whole body: at most `server.max_body_bytes` (else 413), within
/// `server.client_timeout` (else 408); a body that cannot be read is 400.
async fn read_body(a: &Admission, headers: &HeaderMap, body: Body) -> Result<Vec<u8>, Response> {
    let declared = headers
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
        return Err(too_large());
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
    match tokio::time::timeout(a.client_timeout, read).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(Ok(()))) => Err(too_large()),
        Ok(Err(Err(e))) => Err(ApiError(
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read: {e}"),
        )
        .into_response()),
        Err(_) => Err(ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within server.client_timeout ({} ms)",
                a.client_timeout.as_millis()
            ),
        )
        .into_response()),
    }
}
