//! The HTTP surface: health, readiness, metrics, the table API and its OpenAPI document.
//!
//! Mutating routes need `Authorization: Bearer <server.auth_token>`; without a configured token
//! they answer 403 (off). Errors are JSON: `{"error": "..."}`.
//!
//! The server's own limits ([`serve`], `admission`): at most `server.max_connections` connections;
//! request headers within `server.client_timeout`, then the whole body (at most
//! `server.max_body_bytes`) within it again, read before any handler runs, so a slow client
//! never holds a table; at most `server.max_concurrent_requests` API requests at once, a change
//! holding its slot until it ends even if its client has gone; a response the client does not
//! take for `server.client_timeout` ends the connection.
//!
//! The parts: the routers here; `error` ([`ApiError`], the one mapping of a table error to a
//! status); `auth` (the bearer token); `admission` (what a request needs before its handler
//! runs); `server` (the accept loop and its connection limits); `tables` (the table API);
//! `probes` (readiness, metrics, the OpenAPI document); `status` (the read-only status page at
//! `/` and `/tables/{name}`, HTML for people; not part of the API or its OpenAPI document).

mod admission;
mod auth;
mod error;
mod probes;
mod server;
mod status;
mod tables;

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::Semaphore;

pub use error::ApiError;
pub use server::{serve, ConnectionLimits};

use super::Daemon;
use admission::{admit, Admission};
use probes::{metrics, openapi, readyz};
use tables::{
    audit, list_tables, register, request_audit, restore, resume, rollback, savepoint, table,
    timeline, unregister,
};

/// The OpenAPI document of this API.
pub const OPENAPI: &str = include_str!("../openapi.json");

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
    ("get", "/api/v1/tables/{name}/audit", false),
    ("post", "/api/v1/tables/{name}/audit", true),
];

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
        .route("/", get(status::index))
        .route("/tables/{name}", get(status::table_page))
        .route("/api/v1/tables", get(list_tables).post(register))
        .route("/api/v1/tables/{name}", get(table).delete(unregister))
        .route("/api/v1/tables/{name}/timeline", get(timeline))
        .route("/api/v1/tables/{name}/rollback", post(rollback))
        .route("/api/v1/tables/{name}/resume", post(resume))
        .route("/api/v1/tables/{name}/restore", post(restore))
        .route("/api/v1/tables/{name}/savepoints", post(savepoint))
        .route(
            "/api/v1/tables/{name}/audit",
            get(audit).post(request_audit),
        )
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

#[cfg(test)]
mod tests {
    use axum::http::{header, StatusCode};
    use axum::response::Response;

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
}
