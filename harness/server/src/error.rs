//! Errors of the HTTP API: each becomes a JSON body `{"type", "message"}` with a status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::api::ErrorBody;
use crate::store::StoreError;

/// An error answered to an HTTP client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {error_type}: {message}")]
#[non_exhaustive]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Machine-readable kind.
    pub error_type: &'static str,
    /// What was wrong, for humans.
    pub message: String,
}

impl ApiError {
    /// An error with any status.
    pub fn new(status: StatusCode, error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error_type,
            message: message.into(),
        }
    }

    /// 400: the request cannot be understood.
    pub fn bad_request(error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, error_type, message)
    }

    /// 422: well-formed JSON with the wrong content.
    pub fn invalid_request(error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, error_type, message)
    }

    /// 404 for a resource id.
    pub fn not_found(what: &str, id: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no {what} with id {id:?}"),
        )
    }

    /// 409: the resource is not in a state that allows this.
    pub fn conflict(error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, error_type, message)
    }

    /// 410: the resource existed and is gone for good.
    pub fn gone(error_type: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::GONE, error_type, message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            error.to_string(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error_type: self.error_type.to_owned(),
            message: self.message,
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            // The oversized body was not read, so the connection cannot carry another
            // request: say so, or a keep-alive client reuses it and sees a disconnect.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}
