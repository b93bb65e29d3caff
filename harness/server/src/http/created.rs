//! `201 Created` answers: the new resource as JSON, its URL in `Location`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A `201 Created` answer with `body` as JSON and `location` as its `Location` header.
pub(super) fn created(location: String, body: impl serde::Serialize) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}
