//! The model gateway in the shape of Gemini's API: `POST
//! /v1beta/models/{model}:generateContent` and `:streamGenerateContent?alt=sse`, as the
//! google-genai SDKs call them (under `/v1` too, the version newer SDKs default to). The model and the method share one path segment (axum
//! cannot put a parameter before `:` in one segment, so the segment is taken whole and
//! split); the client's key comes as `x-goog-api-key` or `?key=`. The request then runs
//! like every other gateway request, in Gemini's shapes (its errors included).

use std::collections::HashMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cordon_gateway::Api;
use cordon_protocol::conversation::{Vendor, encode_error};
use serde_json::{Value, json};

use super::app_state::AppState;
use super::gateway::gateway_call;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1beta/models/{model_method}", post(generate_content))
        .route("/v1/models/{model_method}", post(generate_content_v1))
}

/// An error in Google's shape.
fn google_error(status: StatusCode, message: &str) -> Response {
    let error = encode_error(Vendor::Gemini, status.as_u16(), "", message);
    (status, axum::Json(error.body)).into_response()
}

/// The model gateway in the shape of Gemini's `generateContent` and
/// `streamGenerateContent`.
#[utoipa::path(
    post, path = "/v1beta/models/{model_method}", tag = "gateway",
    params(
        ("model_method" = String, Path, description = "`{model}:generateContent` or `{model}:streamGenerateContent` (with `?alt=sse`)"),
        ("alt" = Option<String>, Query, description = "`sse`: stream as server-sent events (required by `streamGenerateContent`)"),
        ("key" = Option<String>, Query, description = "The client's key for the upstream (else `x-goog-api-key`)"),
        ("x-cordon-conversation-id" = Option<String>, Header, description = "Continue this conversation's record"),
        ("x-cordon-computer" = Option<String>, Header, description = "Drive this computer session"),
    ),
    request_body(content = Object, description = "A Gemini `GenerateContentRequest`"),
    responses(
        (status = 200, description = "A `GenerateContentResponse` (JSON), or its chunks as SSE `data:` lines", body = Object),
        (status = 400, description = "The request is malformed (Google's error shape)", body = Object),
        (status = 404, description = "Unknown method, or the server has no upstream model", body = Object),
        (status = 502, description = "The upstream model failed", body = Object),
    ),
    security(("bearer" = []))
)]
pub(super) async fn generate_content(
    state: State<AppState>,
    model_method: Path<String>,
    query: Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    gemini_call(state, model_method, query, headers, body).await
}

/// [`generate_content`] under the API version `v1`, which newer google-genai SDKs call.
#[utoipa::path(
    post, path = "/v1/models/{model_method}", tag = "gateway",
    params(
        ("model_method" = String, Path, description = "`{model}:generateContent` or `{model}:streamGenerateContent` (with `?alt=sse`)"),
        ("alt" = Option<String>, Query, description = "`sse`: stream as server-sent events (required by `streamGenerateContent`)"),
        ("key" = Option<String>, Query, description = "The client's key for the upstream (else `x-goog-api-key`)"),
    ),
    request_body(content = Object, description = "A Gemini `GenerateContentRequest`"),
    responses(
        (status = 200, description = "As `POST /v1beta/models/{model_method}`", body = Object),
    ),
    security(("bearer" = []))
)]
pub(super) async fn generate_content_v1(
    state: State<AppState>,
    model_method: Path<String>,
    query: Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    gemini_call(state, model_method, query, headers, body).await
}

async fn gemini_call(
    state: State<AppState>,
    Path(model_method): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    mut headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some((model, method)) = model_method.rsplit_once(':') else {
        return google_error(
            StatusCode::NOT_FOUND,
            "the path must be /v1beta/models/{model}:generateContent or \
             :streamGenerateContent",
        );
    };
    let stream = match method {
        "generateContent" => false,
        "streamGenerateContent" => true,
        other => {
            return google_error(
                StatusCode::NOT_FOUND,
                &format!(
                    "`{other}` is not a method this gateway serves: use generateContent or \
                     streamGenerateContent"
                ),
            );
        }
    };
    if stream && query.get("alt").map(String::as_str) != Some("sse") {
        return google_error(
            StatusCode::BAD_REQUEST,
            "streamGenerateContent is served as server-sent events only: add `?alt=sse` (the \
             google-genai SDKs do)",
        );
    }
    if !headers.contains_key("x-goog-api-key")
        && let Some(key) = query.get("key")
        && let Ok(value) = HeaderValue::from_str(key)
    {
        headers.insert("x-goog-api-key", value);
    }
    // The URL's model and method go into the body, where the gateway reads them; a body
    // that is not a JSON object is passed on as it came, for the gateway to refuse.
    let body = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(mut map)) => {
            map.insert("model".into(), json!(model));
            if stream {
                map.insert("stream".into(), json!(true));
            } else {
                map.remove("stream");
            }
            Bytes::from(Value::Object(map).to_string())
        }
        _ => body,
    };
    gateway_call(state, headers, body, Api::Gemini).await
}
