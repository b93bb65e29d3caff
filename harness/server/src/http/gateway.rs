//! The model gateway's HTTP surface (`cordon serve --upstream`): `POST /v1/messages`
//! (Anthropic Messages, streamed and not) and `GET /v1/conversations/{id}`. The loop itself
//! is `cordon-gateway`; this module reads headers and writes SSE, and
//! [`Mount`](super::gateway_mount::Mount) records conversations in the store. The contract
//! is `docs/gateway.md`, section "Gateway endpoints".

use std::collections::HashMap;
use std::convert::Infallible;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordon_gateway::{Api, LiveStream, MessagesAnswer, MessagesCall, MessagesReply};
use cordon_protocol::conversation::encode_error;
use serde_json::{Value, json};

use cordon_protocol::time::rfc3339;

use super::app_state::AppState;
use super::gateway_headers::{credential, header_text};
use crate::api::ErrorBody;
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses))
        .route("/v1/conversations", get(list_conversations))
        .route("/v1/conversations/{id}", get(conversation))
}

/// The model gateway in the shape of Anthropic's Messages API.
#[utoipa::path(
    post, path = "/v1/messages", tag = "gateway",
    request_body(content = Object, description = "An Anthropic Messages request (`stream` honoured)"),
    params(
        ("x-cordon-conversation-id" = Option<String>, Header, description = "Continue this conversation's record"),
        ("x-cordon-computer" = Option<String>, Header, description = "Drive this computer session"),
    ),
    responses(
        (status = 200, description = "The model's reply in Anthropic's shape (JSON, or SSE when `stream` is true)", body = Object),
        (status = 400, description = "The request is malformed (Anthropic's error shape)", body = Object),
        (status = 404, description = "The server has no upstream model", body = Object),
        (status = 502, description = "The upstream model failed", body = Object),
    ),
    security(("bearer" = []))
)]
pub(super) async fn messages(state: State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    gateway_call(state, headers, body, Api::Anthropic).await
}

/// The model gateway in the shape of OpenAI's Chat Completions API.
#[utoipa::path(
    post, path = "/v1/chat/completions", tag = "gateway",
    request_body(content = Object, description = "A Chat Completions request (`stream` honoured)"),
    responses(
        (status = 200, description = "The model's reply in Chat Completions' shape (JSON, or SSE chunks when `stream` is true)", body = Object),
        (status = 400, description = "The request is malformed (OpenAI's error shape)", body = Object),
        (status = 404, description = "The server has no upstream model", body = Object),
        (status = 502, description = "The upstream model failed", body = Object),
    ),
    security(("bearer" = []))
)]
pub(super) async fn chat_completions(
    state: State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    gateway_call(state, headers, body, Api::OpenaiChat).await
}

/// The model gateway in the shape of OpenAI's Responses API.
#[utoipa::path(
    post, path = "/v1/responses", tag = "gateway",
    request_body(content = Object, description = "A Responses request (`stream` and `previous_response_id` honoured)"),
    responses(
        (status = 200, description = "The model's reply in the Responses shape (JSON, or SSE events when `stream` is true)", body = Object),
        (status = 400, description = "The request is malformed (OpenAI's error shape)", body = Object),
        (status = 404, description = "The server has no upstream model", body = Object),
        (status = 502, description = "The upstream model failed", body = Object),
    ),
    security(("bearer" = []))
)]
pub(super) async fn responses(state: State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    gateway_call(state, headers, body, Api::OpenaiResponses).await
}

/// One client request to the gateway, in the shape of `api`.
pub(super) async fn gateway_call(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
    api: Api,
) -> Response {
    let Some(mount) = app.gateway.clone() else {
        let error = encode_error(
            api.vendor(),
            404,
            "not_found_error",
            "this server has no model behind it: start it with `cordon serve --upstream API=URL`",
        );
        return (StatusCode::NOT_FOUND, axum::Json(error.body)).into_response();
    };
    let body: Value = match serde_json::from_slice(&body) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return respond(mount.gateway.reject(api, "the body must be a JSON object")),
        Err(error) => {
            let message = format!("the body is not valid JSON: {error}");
            return respond(mount.gateway.reject(api, &message));
        }
    };
    let call = MessagesCall::new(body)
        .api(api)
        .credential(credential(&headers))
        .conversation(header_text(&headers, "x-cordon-conversation-id"))
        .computer(header_text(&headers, "x-cordon-computer"));
    match mount.gateway.messages_live(call).await {
        MessagesAnswer::Live(live) => respond_live(live),
        MessagesAnswer::Whole(reply) => respond(*reply),
        // A kind of answer this server does not know yet.
        #[allow(unreachable_patterns, reason = "the enum is non-exhaustive")]
        _ => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A streamed reply: its head now, its events as the gateway makes them. Events that are
/// already waiting go out in one write: a burst (a fast upstream, a whole block Cordon
/// shows) costs one frame, and a lone event is written at once.
fn respond_live(live: LiveStream) -> Response {
    let LiveStream { head, events, .. } = live;
    let stream = futures::stream::unfold(events, |mut events| async move {
        let first = events.recv().await?;
        let mut text = String::new();
        write_event(&mut text, first);
        while text.len() < 64 * 1024
            && let Ok(next) = events.try_recv()
        {
            write_event(&mut text, next);
        }
        Some((Ok::<_, Infallible>(Bytes::from(text)), events))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    set("x-cordon-conversation-id", &head.conversation_id);
    if let Some(computer) = &head.computer {
        set("x-cordon-computer", computer);
    }
    response
}

/// One event as SSE: Chat chunks have no event name, and its terminator is the bare
/// `[DONE]`.
fn write_event(text: &mut String, (name, data): (String, Value)) {
    if !name.is_empty() {
        text.push_str("event: ");
        text.push_str(&name);
        text.push('\n');
    }
    text.push_str("data: ");
    match data {
        Value::String(raw) => text.push_str(&raw),
        other => text.push_str(&other.to_string()),
    }
    text.push_str("\n\n");
}

fn respond(reply: MessagesReply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = if status == StatusCode::OK && reply.stream {
        let mut text = String::new();
        for (name, data) in reply.events() {
            // Chat chunks have no event name; its terminator is the bare `[DONE]`.
            if !name.is_empty() {
                text.push_str(&format!("event: {name}\n"));
            }
            match data {
                Value::String(raw) => text.push_str(&format!("data: {raw}\n\n")),
                other => text.push_str(&format!("data: {other}\n\n")),
            }
        }
        let mut response = Response::new(Body::from(text));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    } else {
        (status, axum::Json(reply.body.clone())).into_response()
    };
    let headers = response.headers_mut();
    let mut set = |name: &'static str, value: &str| {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    set("x-cordon-conversation-id", &reply.conversation_id);
    if let Some(stop) = reply.stop {
        set("x-cordon-stop", stop);
    }
    if let Some(computer) = &reply.computer {
        set("x-cordon-computer", computer);
    }
    response
}

/// The gateway's conversations, newest first, without their entries.
#[utoipa::path(
    get, path = "/v1/conversations", tag = "gateway",
    params(
        ("limit" = Option<usize>, Query, description = "At most this many (default 50, at most 1000)"),
        ("before" = Option<String>, Query, description = "Only those updated before this RFC 3339 time or Unix millisecond count (the last item's `updated_at` gives the next page)"),
    ),
    responses(
        (status = 200, description = "`{\"conversations\": [{id, upstream, created_at, updated_at, entries}]}`", body = Object),
        (status = 400, description = "`limit` or `before` is malformed", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_conversations(
    State(app): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let limit = match query.get("limit") {
        None => 50,
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|limit| (1..=1000).contains(limit))
            .ok_or_else(|| {
                ApiError::bad_request("invalid_limit", "`limit` must be a number from 1 to 1000")
            })?,
    };
    let before = match query.get("before") {
        None => None,
        Some(text) => Some(parse_instant_ms(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_before",
                "`before` must be an RFC 3339 time (`2026-11-26T10:00:00.000Z`) or Unix milliseconds",
            )
        })?),
    };
    let Some(mount) = app.gateway.clone() else {
        return Ok(axum::Json(json!({"conversations": []})).into_response());
    };
    let listed: Vec<Value> = mount
        .store
        .list_conversations(limit, before)
        .await?
        .into_iter()
        .map(|row| {
            json!({
                "id": row.id,
                "upstream": row.upstream,
                "created_at": rfc3339(row.created_ms),
                "updated_at": rfc3339(row.updated_ms),
                "entries": row.entries,
            })
        })
        .collect();
    Ok(axum::Json(json!({"conversations": listed})).into_response())
}

/// Unix milliseconds, or an RFC 3339 UTC time as this API writes them.
fn parse_instant_ms(text: &str) -> Option<u64> {
    if let Ok(ms) = text.parse::<u64>() {
        return Some(ms);
    }
    cordon_protocol::time::parse_rfc3339(text)
}

/// One conversation with its entries in order.
#[utoipa::path(
    get, path = "/v1/conversations/{id}", tag = "gateway",
    params(("id" = String, Path, description = "Conversation id (the `x-cordon-conversation-id` response header)")),
    responses(
        (status = 200, description = "`{id, upstream, created_at, updated_at, entries: [{seq, at, kind, data, call_id?, round?, duration_ms?}]}`", body = Object),
        (status = 404, description = "Unknown conversation", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn conversation(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let Some(mount) = app.gateway.clone() else {
        return Err(ApiError::not_found("conversation", &id));
    };
    let Some(row) = mount.store.conversation(&id).await? else {
        return Err(ApiError::not_found("conversation", &id));
    };
    let entries: Vec<Value> = row
        .entries
        .iter()
        .map(|e| {
            let mut v =
                json!({"seq": e.seq, "at": rfc3339(e.at_ms), "kind": e.kind, "data": e.data});
            if let Some(call) = &e.call_id {
                v["call_id"] = json!(call);
            }
            if let Some(round) = e.round {
                v["round"] = json!(round);
            }
            if let Some(ms) = e.duration_ms {
                v["duration_ms"] = json!(ms);
            }
            v
        })
        .collect();
    Ok(axum::Json(json!({
        "id": row.id,
        "upstream": row.upstream,
        "created_at": rfc3339(row.created_ms),
        "updated_at": rfc3339(row.updated_ms),
        "entries": entries,
    }))
    .into_response())
}
