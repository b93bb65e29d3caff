//! The model gateway's HTTP surface (`cordon serve --upstream`): `POST /v1/messages`
//! (Anthropic Messages, streamed and not) and `GET /v1/conversations/{id}`. The loop itself
//! is `cordon-gateway`; this module reads headers, writes SSE, and records conversations in
//! the store. The contract is `docs/gateway.md`, section "Gateway endpoints".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordon_core::ToolRegistry;
use cordon_gateway::{
    Api, ComputerOutcome, Computers, Credential, Entry, Gateway, GatewayOptions, MessagesCall,
    MessagesReply, Recorder, Upstream,
};
use cordon_protocol::conversation::encode_error;
use cordon_protocol::execution::Decision;
use cordon_sandbox::Sandbox;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use cordon_protocol::time::rfc3339;

use super::AppState;
use crate::api::{ComputerActions, ComputerStep, CreateComputer, ErrorBody, StepStatus};
use crate::computers::ComputerHub;
use crate::error::ApiError;
use crate::store::{NewConversationEntry, Store};

/// What `cordon serve --upstream` puts behind `/v1/messages`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewaySetup {
    /// The model.
    pub upstream: Arc<dyn Upstream>,
    /// Round cap, container time to live, key forwarding.
    pub options: GatewayOptions,
    /// Operator server tools (`--tools FILE`).
    pub tools: Option<ToolRegistry>,
    /// Idle time after which a session of the session protocol expires.
    pub session_ttl: Duration,
    /// The model of sessions that name none.
    pub default_model: Option<String>,
}

impl GatewaySetup {
    /// A setup with default options and no operator tools.
    pub fn new(upstream: Arc<dyn Upstream>) -> Self {
        GatewaySetup {
            upstream,
            options: GatewayOptions::default(),
            tools: None,
            session_ttl: super::session::DEFAULT_SESSION_TTL,
            default_model: None,
        }
    }

    crate::setters! {
        options: GatewayOptions,
        tools: Option<ToolRegistry>,
        session_ttl: Duration,
        default_model: Option<String>,
    }
}

/// The gateway as mounted: the loop and the store its conversations go to.
#[derive(Debug)]
pub(crate) struct Mount {
    pub(super) gateway: Gateway,
    pub(super) store: Arc<Store>,
    pub(super) sessions: super::session::Sessions,
}

impl Mount {
    pub(crate) fn new(
        setup: GatewaySetup,
        sandbox: Sandbox,
        store: Arc<Store>,
        computers: Arc<ComputerHub>,
        has_token: bool,
    ) -> Self {
        // With a server token the client's credential is that token: never forward it.
        let options = setup
            .options
            .clone()
            .forward_client_key(setup.options.forward_client_key && !has_token);
        let mut gateway = Gateway::new(setup.upstream, options)
            .with_sandbox(sandbox)
            .with_recorder(Arc::new(StoreRecorder(store.clone())))
            .with_computers(Arc::new(HubComputers {
                hub: computers,
                asked: Mutex::new(HashMap::new()),
            }));
        if let Some(tools) = setup.tools {
            gateway = gateway.with_operator_tools(tools);
        }
        Mount {
            gateway,
            store,
            sessions: super::session::Sessions::new(setup.session_ttl, setup.default_model),
        }
    }
}

/// Deletes conversations not updated for `retain` now and then (at start, then every
/// `retain / 4`, at least every second and at most every hour), like the other histories.
pub(crate) fn spawn_retention(mount: &Arc<Mount>, retain: Duration) {
    let every = (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let retain_ms = u64::try_from(retain.as_millis()).unwrap_or(u64::MAX);
    crate::hub::spawn_periodic(mount, every, move |mount| async move {
        let now = cordon_core::clock::now_ms();
        if let Err(error) = mount
            .store
            .purge_conversations(now.saturating_sub(retain_ms))
        {
            eprintln!("cordon serve: deleting old conversations failed: {error}");
        }
        let session_ttl_ms = u64::try_from(mount.sessions.ttl.as_millis()).unwrap_or(u64::MAX);
        if let Err(error) = mount
            .store
            .purge_sessions(now.saturating_sub(session_ttl_ms))
        {
            eprintln!("cordon serve: deleting expired sessions failed: {error}");
        }
    });
}

/// The server's computer sessions (`/v1/computers`) as the gateway's computers.
struct HubComputers {
    hub: Arc<ComputerHub>,
    /// The approval each computer's last step waits for (the gate asked), with the action
    /// it is for: an approval of another action does not release it.
    asked: Mutex<HashMap<String, (String, Value)>>,
}

impl std::fmt::Debug for HubComputers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubComputers").finish_non_exhaustive()
    }
}

impl HubComputers {
    fn outcome(&self, id: &str, input: &Value, step: ComputerStep) -> ComputerOutcome {
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.remove(id);
        match step.status {
            StepStatus::ApprovalRequired => {
                let Some(pending) = step.pending_approval else {
                    return ComputerOutcome::Done {
                        screenshot: None,
                        text: Some("the step waits for an approval that has no id".into()),
                        is_error: true,
                    };
                };
                let reason = format!(
                    "{} ({}{})",
                    pending.reason,
                    pending.action,
                    pending
                        .element
                        .map(|e| format!(" on {e}"))
                        .unwrap_or_default()
                );
                asked.insert(id.to_owned(), (pending.approval_id, input.clone()));
                ComputerOutcome::NeedsApproval { reason }
            }
            status => ComputerOutcome::Done {
                screenshot: step.screenshot.map(|s| (s.media_type, s.data)),
                text: step.error.or(step.text),
                is_error: status != StepStatus::Ok,
            },
        }
    }
}

impl Computers for HubComputers {
    fn open<'a>(
        &'a self,
        url: &'a str,
        display: Option<(u64, u64)>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            // The client named this page: its origin is allowed, as a client creating the
            // session with `POST /v1/computers` could allow it. Other origins keep the
            // default policy.
            let origin = url
                .split_once("://")
                .map(|(scheme, rest)| {
                    format!(
                        "{scheme}://{}",
                        rest.split(['/', '?', '#']).next().unwrap_or(rest)
                    )
                })
                .unwrap_or_default();
            let mut body = json!({"url": url, "allow_origins": [origin]});
            if let Some((width, height)) = display {
                body["display"] = json!({"width": width, "height": height});
            }
            let body: CreateComputer = serde_json::from_value(body).map_err(|e| e.to_string())?;
            self.hub
                .create(body)
                .await
                .map(|created| created.id)
                .map_err(|e| e.message)
        })
    }

    fn exists<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.hub
                .info(id)
                .is_ok_and(|info| serde_json::to_value(&info).is_ok_and(|v| v["state"] == "live"))
        })
    }

    fn act<'a>(
        &'a self,
        id: &'a str,
        input: &'a Value,
        approved: bool,
    ) -> BoxFuture<'a, Result<ComputerOutcome, String>> {
        Box::pin(async move {
            let asked = self
                .asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
                .cloned();
            let step = match (approved, asked) {
                (true, Some((_, action))) if action != *input => {
                    return Err(
                        "this computer's pending approval is for another action; the model must \
                         ask again"
                            .to_owned(),
                    );
                }
                (true, Some((approval, _))) => {
                    match self.hub.decide(&approval, Decision::Approve).await {
                        Some(Ok((_, step))) => step,
                        Some(Err(e)) => return Err(e.message),
                        None => return Err(format!("approval {approval} is no longer pending")),
                    }
                }
                _ => {
                    let body: ComputerActions =
                        serde_json::from_value(json!({"format": "anthropic", "actions": [input]}))
                            .map_err(|e| e.to_string())?;
                    self.hub.act(id, body).await.map_err(|e| e.message)?
                }
            };
            Ok(self.outcome(id, input, step))
        })
    }
}

/// Records conversations in the store; a failing write is reported, never fatal.
#[derive(Debug)]
struct StoreRecorder(Arc<Store>);

impl Recorder for StoreRecorder {
    fn begin(&self, conversation: &str, upstream: &str) {
        if let Err(error) = self.0.begin_conversation(conversation, upstream) {
            eprintln!("cordon serve: recording conversation {conversation}: {error}");
        }
    }

    fn record(&self, conversation: &str, entry: Entry) {
        let row = NewConversationEntry {
            kind: entry.kind,
            call_id: entry.call_id.as_deref(),
            round: entry.round.map(u64::from),
            duration_ms: entry.duration_ms,
            data: &entry.data,
        };
        if let Err(error) = self.0.append_conversation_entry(conversation, &row) {
            eprintln!("cordon serve: recording conversation {conversation}: {error}");
        }
    }

    fn knows(&self, conversation: &str) -> bool {
        self.0.conversation_exists(conversation).unwrap_or(false)
    }

    fn keep_response(&self, id: &str, parent: Option<&str>, items: &Value) {
        if let Err(error) = self.0.keep_response(id, parent, items) {
            eprintln!("cordon serve: keeping response {id}: {error}");
        }
    }

    fn response(&self, id: &str) -> Option<(Option<String>, Value)> {
        self.0.response(id).ok().flatten()
    }
}

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

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// One client request to the gateway, in the shape of `api`.
async fn gateway_call(
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
    let credential = header_text(&headers, "x-api-key")
        .or_else(|| {
            header_text(&headers, "authorization")
                .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned))
        })
        .map(Credential);
    let call = MessagesCall::new(body)
        .api(api)
        .credential(credential)
        .conversation(header_text(&headers, "x-cordon-conversation-id"))
        .computer(header_text(&headers, "x-cordon-computer"));
    let reply = mount.gateway.messages(call).await;
    respond(reply)
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
        .list_conversations(limit, before)?
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
    let Some(row) = mount.store.conversation(&id)? else {
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

/// Parses `500ms`, `30s`, `45m`, `12h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number with a unit, like 500ms, 30s or 45m"))?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit must be ms, s, m, h or d")),
    };
    if number == 0 {
        return Err(format!("{text:?}: must be longer than 0"));
    }
    Ok(Duration::from_millis(number.saturating_mul(ms)))
}
