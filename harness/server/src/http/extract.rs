//! The request extractors of the HTTP API, each answering every way a request can be wrong
//! with an [`ApiError`]: [`ApiJson`] (a JSON body) and [`After`] (`?after=N`).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use cordon_protocol::execution::parse_event_seq;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body, with every way it can be wrong answered as an [`ApiError`]: wrong content
/// type (415), too large (413), not JSON (400), wrong shape (422, with the path).
pub(super) struct ApiJson<T>(pub(super) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if mime != "application/json"
            && !(mime.starts_with("application/") && mime.ends_with("+json"))
        {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                if content_type.is_empty() {
                    "the body must be JSON with `Content-Type: application/json`".to_owned()
                } else {
                    format!(
                        "the body must be JSON (`Content-Type: application/json`), not {content_type:?}"
                    )
                },
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            let path = error.path().to_string();
            json_error(error.into_inner(), &path)
        })?;
        // Trailing bytes after the value make the body invalid JSON as a whole.
        deserializer.end().map_err(|error| json_error(error, "."))?;
        Ok(ApiJson(value))
    }
}

fn json_error(error: serde_json::Error, path: &str) -> ApiError {
    if error.is_data() {
        let at = if path == "." {
            String::new()
        } else {
            format!("at {path}: ")
        };
        ApiError::invalid_request("invalid_request", format!("{at}{error}"))
    } else {
        ApiError::bad_request(
            "invalid_json",
            format!("the body is not valid JSON: {error}"),
        )
    }
}

pub(super) fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request body is larger than this server accepts (--max-body-bytes)",
        )
    } else {
        ApiError::bad_request("invalid_body", rejection.body_text())
    }
}

/// `?after=N` (default 0): list only what comes after event seq or step `N`. Anything
/// else is a `400 invalid_query`.
pub(super) struct After(pub(super) u64);

impl<S: Send + Sync> FromRequestParts<S> for After {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(query) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::bad_request("invalid_query", rejection.body_text()))?;
        match query.get("after") {
            None => Ok(After(0)),
            Some(text) => parse_event_seq(text.as_bytes())
                .map(After)
                .map_err(|error| {
                    ApiError::bad_request("invalid_query", format!("`after`: {error}"))
                }),
        }
    }
}
