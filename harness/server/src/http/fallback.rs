//! The answers for requests no route takes: an unknown path (`404 route_not_found`) and a
//! known path with another method (`405 method_not_allowed`).

use axum::http::{Method, StatusCode, Uri};

use crate::error::ApiError;

pub(super) async fn route_not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route for {method} {}; see /openapi.json", uri.path()),
    )
}

pub(super) async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}
