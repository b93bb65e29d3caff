//! Bearer-token authentication: the middleware every route of the HTTP API passes when the
//! server was started with `--token`.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cordon_core::ids::constant_time_eq;

use super::app_state::AppState;
use crate::error::ApiError;

/// Lets a request through when the server has no token, or the request presents it
/// (`Authorization: Bearer`, `x-api-key` or `x-goog-api-key`); answers `401 unauthorized`
/// otherwise.
pub(super) async fn authenticate(
    State(app): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &app.token else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        // The anthropic SDK sends its `api_key` as `x-api-key`, google-genai as
        // `x-goog-api-key` (the gateway's clients).
        .or_else(|| {
            ["x-api-key", "x-goog-api-key"].iter().find_map(|name| {
                request
                    .headers()
                    .get(*name)
                    .and_then(|value| value.to_str().ok())
            })
        });
    match presented {
        Some(presented) if constant_time_eq(presented.as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the bearer token is wrong",
        )
        .into_response(),
        None => {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs `Authorization: Bearer <token>` (the --token it was started with)",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}
