//! Readiness, the Prometheus exposition and the OpenAPI document.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::{ApiError, Shared, OPENAPI};

pub(super) async fn readyz(State(d): Shared) -> Response {
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
pub(super) async fn metrics(State(d): Shared) -> Response {
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

pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}
