//! The session protocol over HTTP (`PUT /session`, `POST /session/{id}`, `GET
//! /session/{id}`, `DELETE /session/{id}`): each turn answers with an SSE stream of the
//! gateway's session events; the state goes to the store after every turn, so a session
//! outlives the process, until it has been idle for the session time to live.

use std::convert::Infallible;
use std::sync::{Arc, PoisonError};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use cordon_gateway::Credential;
use cordon_gateway::session::{SessionError, SessionEvent, SessionInput, SessionState};
use serde_json::{Value, json};

use super::app_state::AppState;
use super::gateway_headers::credential;
use super::gateway_mount::Mount;
use crate::api::ErrorBody;
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/session", put(create)).route(
        "/session/{id}",
        post(continue_session).get(history).delete(remove),
    )
}

fn mount(app: &AppState) -> Result<Arc<Mount>, ApiError> {
    app.gateway.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "this server has no model behind it: start it with `cordon serve --upstream API=URL`",
        )
    })
}

fn session_error(error: &SessionError) -> ApiError {
    match error {
        SessionError::BadRequest(message) => {
            ApiError::bad_request("invalid_session_request", message)
        }
        SessionError::Conflict(message) => ApiError::conflict("answered_twice", message),
    }
}

fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ApiError::bad_request(
            "invalid_json",
            "the body must be a JSON object",
        )),
        Err(error) => Err(ApiError::bad_request(
            "invalid_json",
            format!("the body is not valid JSON: {error}"),
        )),
    }
}

/// A session's state from the store: 404 when unknown, 410 when idle past its time.
async fn load(mount: &Mount, id: &str) -> Result<SessionState, ApiError> {
    let Some((text, updated_ms)) = mount.store.load_session(id).await? else {
        return Err(ApiError::not_found("session", id));
    };
    let ttl_ms = u64::try_from(mount.sessions.ttl.as_millis()).unwrap_or(u64::MAX);
    if cordon_core::clock::now_ms().saturating_sub(updated_ms) > ttl_ms {
        let _ = mount.store.delete_session(id).await;
        return Err(ApiError::gone(
            "session_expired",
            format!(
                "session `{id}` expired (idle longer than its time to live); start a new one with PUT /session"
            ),
        ));
    }
    serde_json::from_str(&text).map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "session_unreadable",
            format!("session `{id}` cannot be read back: {error}"),
        )
    })
}

async fn save(mount: &Mount, state: &SessionState) {
    let text = match serde_json::to_string(state) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("cordon serve: session {}: {error}", state.id);
            return;
        }
    };
    if let Err(error) = mount.store.save_session(&state.id, &text).await {
        eprintln!("cordon serve: saving session {}: {error}", state.id);
    }
}

/// Starts a session (the session protocol) and streams its first turn as SSE.
#[utoipa::path(
    put, path = "/session", tag = "session",
    request_body(content = Object, description = "The session's settings and first input (docs/gateway.md)"),
    responses(
        (status = 200, description = "SSE: `session`, then the turn's events up to `turn_stop`; the `x-session-id` header names it"),
        (status = 400, description = "The body is malformed", body = ErrorBody),
        (status = 404, description = "The server has no upstream model", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let mount = mount(&app)?;
    let body = json_body(&body)?;
    let (state, input) = SessionState::create(&body, mount.sessions.default_model.as_deref())
        .map_err(|e| session_error(&e))?;
    save(&mount, &state).await;
    mount.sessions.claim(&state.id);
    Ok(turn(mount, state, input, credential(&headers)))
}

/// Continues a session with the client's input (messages, tool results, permissions).
#[utoipa::path(
    post, path = "/session/{id}", tag = "session",
    params(("id" = String, Path, description = "Session id")),
    request_body(content = Object, description = "The next input (docs/gateway.md)"),
    responses(
        (status = 200, description = "SSE: the turn's events up to `turn_stop`"),
        (status = 400, description = "The input does not fit the session's state", body = ErrorBody),
        (status = 404, description = "Unknown session", body = ErrorBody),
        (status = 409, description = "The session is running a turn", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn continue_session(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let mount = mount(&app)?;
    let body = json_body(&body)?;
    let input = SessionInput::parse(&body).map_err(|e| session_error(&e))?;
    if !mount.sessions.claim(&id) {
        return Err(ApiError::conflict(
            "session_busy",
            format!("session `{id}` is running a turn; wait for its turn_stop"),
        ));
    }
    let state = load(&mount, &id).await.and_then(|state| {
        state.check(&input).map_err(|e| session_error(&e))?;
        Ok(state)
    });
    match state {
        Ok(state) => Ok(turn(mount, state, input, credential(&headers))),
        Err(error) => {
            mount.sessions.release(&id);
            Err(error)
        }
    }
}

/// Runs the turn in a task of its own (a client that goes away does not stop it, and its
/// state is kept) and streams its events.
fn turn(
    mount: Arc<Mount>,
    mut state: SessionState,
    input: SessionInput,
    credential: Option<Credential>,
) -> Response {
    let id = state.id.clone();
    let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
    let _ = events.send(SessionEvent::Session(id.clone()));
    tokio::spawn(async move {
        mount
            .gateway
            .session_turn(&mut state, input, credential, &events)
            .await;
        save(&mount, &state).await;
        mount.sessions.release(&state.id);
    });
    let stream = futures::stream::unfold(receiver, |mut receiver| async move {
        let event = receiver.recv().await?;
        let sse = Event::default()
            .event(event.name())
            .data(event.data().to_string());
        Some((Ok::<_, Infallible>(sse), receiver))
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response
            .headers_mut()
            .insert(HeaderName::from_static("x-session-id"), value);
    }
    response
}

/// A session's state and history.
#[utoipa::path(
    get, path = "/session/{id}", tag = "session",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The session's state, with `running`", body = Object),
        (status = 404, description = "Unknown session", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn history(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mount = mount(&app)?;
    let state = load(&mount, &id).await?;
    let mut body = state.to_json();
    body["running"] = json!(
        mount
            .sessions
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&id)
    );
    Ok(axum::Json(body).into_response())
}

/// Deletes a session.
#[utoipa::path(
    delete, path = "/session/{id}", tag = "session",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown session", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn remove(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mount = mount(&app)?;
    if mount.store.delete_session(&id).await? {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError::not_found("session", &id))
    }
}
