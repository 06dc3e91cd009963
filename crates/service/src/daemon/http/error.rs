//! API errors: a status and a message, rendered as JSON `{"error": "..."}`. The status of each
//! kind of [`TableError`] is decided here, and only here.

use axum::extract::rejection::JsonRejection;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::daemon::TableError;

/// An API error: a status and a message, rendered as JSON.
#[derive(Debug)]
pub struct ApiError(pub(super) StatusCode, pub(super) String);

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
