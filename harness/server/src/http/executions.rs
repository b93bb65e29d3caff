//! Executions over HTTP: start one in a sandbox (answering with its event stream when asked),
//! read it with its pending calls and approvals, stream its events, post client tool
//! results, cancel and delete it.

use std::collections::HashSet;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordon_core::SubmitError;
use cordon_protocol::execution::{ExecutionEvent, parse_event_seq};
use cordon_protocol::tool::Locus;

use super::app_state::{App, AppState};
use super::created::created;
use super::event_stream::sse;
use super::extract::{After, ApiJson};
use crate::api::{
    CreateExecution, ErrorBody, ExecutionCreated, ExecutionInfo, ExecutionState, LoggedEvent,
    PendingApproval, PendingToolCall, ToolResults, ToolResultsAccepted,
};
use crate::error::ApiError;
use crate::store::StoreError;

/// How long `DELETE /v1/executions/{id}` waits for a cancelled execution to stop.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sandboxes/{id}/executions", post(create_execution))
        .route(
            "/v1/executions/{id}",
            get(get_execution).delete(delete_execution),
        )
        .route("/v1/executions/{id}/events", get(execution_events))
        .route("/v1/executions/{id}/tool_results", post(post_tool_results))
        .route("/v1/executions/{id}/cancel", post(cancel_execution))
}

fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.to_ascii_lowercase().contains("text/event-stream"))
}

/// Starts an execution. With `Accept: text/event-stream` the response is its event stream.
#[utoipa::path(
    post, path = "/v1/sandboxes/{id}/executions", request_body = CreateExecution,
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 201, description = "Started", body = ExecutionCreated),
        (status = 200, description = "Started; the body is the SSE event stream (with `Accept: text/event-stream`)", content_type = "text/event-stream"),
        (status = 404, description = "Unknown sandbox", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
        (status = 422, description = "Bad fields", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create_execution(
    State(app): State<AppState>,
    Path(sandbox_id): Path<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateExecution>,
) -> Result<Response, ApiError> {
    let id = app
        .sandboxes
        .start_execution(&sandbox_id, body.code)
        .await?;
    let location = format!("/v1/executions/{id}");
    if wants_event_stream(&headers) {
        let mut response = sse(app.sandboxes.clone(), id.clone(), 0).into_response();
        if let Ok(value) = HeaderValue::from_str(&location) {
            response.headers_mut().insert(header::LOCATION, value);
        }
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert("cordon-execution-id", value);
        }
        return Ok(response);
    }
    Ok(created(location, ExecutionCreated { id }))
}

/// The event stream of an execution, from the start or after `Last-Event-ID` / `?after=`.
#[utoipa::path(
    get, path = "/v1/executions/{id}/events",
    params(
        ("id" = String, Path, description = "Execution id"),
        ("after" = Option<u64>, Query, description = "Send events with a larger seq only"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this seq (wins over `after`)"),
    ),
    responses(
        (status = 200, description = "SSE: `event: <type>`, `id: <seq>`, `data: <event JSON>`; ends after `execution.completed`", content_type = "text/event-stream"),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn execution_events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    After(mut after): After,
) -> Result<Response, ApiError> {
    if let Some(value) = headers.get("last-event-id") {
        after = parse_event_seq(value.as_bytes()).map_err(|error| {
            ApiError::bad_request("invalid_last_event_id", format!("Last-Event-ID: {error}"))
        })?;
    }
    if app.sandboxes.store.execution(&id).await?.is_none() {
        return Err(ApiError::not_found("execution", &id));
    }
    Ok(sse(app.sandboxes.clone(), id, after).into_response())
}

/// An execution: status, what it waits for, its events and its result.
#[utoipa::path(
    get, path = "/v1/executions/{id}",
    params(
        ("id" = String, Path, description = "Execution id"),
        ("after" = Option<u64>, Query, description = "List events with a larger seq only"),
    ),
    responses(
        (status = 200, description = "The execution", body = ExecutionInfo),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
    After(after): After,
) -> Result<Json<ExecutionInfo>, ApiError> {
    let store = &app.sandboxes.store;
    let Some(row) = store.execution(&id).await? else {
        return Err(ApiError::not_found("execution", &id));
    };
    let status = ExecutionState::parse(&row.status);
    let rows = store.events_after(&id, 0, usize::MAX).await?;
    let mut events = Vec::with_capacity(rows.len());
    let mut calls: Vec<PendingToolCall> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for row in rows {
        let event: ExecutionEvent = serde_json::from_str(&row.data).map_err(StoreError::from)?;
        match &event {
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus: Locus::Client,
                ..
            } => calls.push(PendingToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
                locus: Locus::Client,
            }),
            ExecutionEvent::ToolResult { id, .. } => {
                answered.insert(id.clone());
            }
            _ => {}
        }
        if row.seq > after {
            events.push(LoggedEvent {
                seq: row.seq,
                event,
            });
        }
    }
    let running = status == ExecutionState::Running;
    let pending_tool_calls = if running {
        // The log says which calls were announced and not yet finished; the live broker
        // says which of those still accept a result (a result posted a moment ago is
        // delivered before its `tool.result` is logged).
        let waiting: HashSet<String> = app
            .sandboxes
            .live_execution(&id)
            .map(|live| live.control.pending_tool_calls().into_iter().collect())
            .unwrap_or_default();
        calls
            .into_iter()
            .filter(|call| !answered.contains(&call.id) && waiting.contains(&call.id))
            .collect()
    } else {
        Vec::new()
    };
    let pending_approvals = if running {
        store
            .pending_approvals(&id)
            .await?
            .into_iter()
            .map(|approval| PendingApproval {
                approval_id: approval.id,
                call_id: approval.call_id,
                tool: approval.tool,
                input: approval.input,
                reason: approval.reason,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(ExecutionInfo {
        id: row.id,
        sandbox_id: row.sandbox_id,
        language: row.language,
        status,
        pending_tool_calls,
        pending_approvals,
        events,
        result: row.result,
    }))
}

/// Results for pending client tool calls; the execution resumes when its batch is complete.
#[utoipa::path(
    post, path = "/v1/executions/{id}/tool_results", request_body = ToolResults,
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Delivered", body = ToolResultsAccepted),
        (status = 404, description = "Unknown execution, or a call id that was never pending (`unknown_call`)", body = ErrorBody),
        (status = 409, description = "The execution ended, or a call was already answered or expired", body = ErrorBody),
        (status = 422, description = "Empty, or an id repeated within the request (`duplicate_call`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn post_tool_results(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ToolResults>,
) -> Result<Json<ToolResultsAccepted>, ApiError> {
    if body.results.is_empty() {
        return Err(ApiError::invalid_request(
            "invalid_request",
            "`results` is empty; send at least one {\"call_id\", \"output\", \"is_error\"}",
        ));
    }
    let Some(execution) = app.sandboxes.live_execution(&id) else {
        return Err(not_running(&app, &id).await?);
    };
    let accepted: Vec<String> = body.results.iter().map(|r| r.call_id.clone()).collect();
    execution
        .control
        .submit_tool_results(body.results)
        .map_err(|error| {
            let message = format!("{error}; nothing in this request was delivered");
            match error {
                SubmitError::UnknownCall { .. } => {
                    ApiError::new(StatusCode::NOT_FOUND, "unknown_call", message)
                }
                SubmitError::Duplicate { .. } => {
                    ApiError::invalid_request("duplicate_call", message)
                }
                SubmitError::AlreadyAnswered { .. } => {
                    ApiError::conflict("already_answered", message)
                }
                SubmitError::Expired { .. } => ApiError::conflict("call_expired", message),
                _ => ApiError::conflict("tool_results_rejected", message),
            }
        })?;
    Ok(Json(ToolResultsAccepted {
        accepted,
        pending: execution.control.pending_tool_calls(),
    }))
}

/// The error for an execution that is not running: 409 if it ended, 404 if unknown.
async fn not_running(app: &App, id: &str) -> Result<ApiError, ApiError> {
    Ok(match app.sandboxes.store.execution(id).await? {
        Some(row) => ApiError::conflict(
            "execution_finished",
            format!(
                "execution {id} has ended ({}); it takes no more input",
                row.status
            ),
        ),
        None => ApiError::not_found("execution", id),
    })
}

/// Cancels a running execution; its history stays.
#[utoipa::path(
    post, path = "/v1/executions/{id}/cancel",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 202, description = "Cancelling; it ends `cancelled`", body = ExecutionCreated),
        (status = 404, description = "Unknown execution", body = ErrorBody),
        (status = 409, description = "It has already ended", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn cancel_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<ExecutionCreated>), ApiError> {
    let Some(execution) = app.sandboxes.live_execution(&id) else {
        return Err(not_running(&app, &id).await?);
    };
    execution.control.cancel();
    Ok((StatusCode::ACCEPTED, Json(ExecutionCreated { id })))
}

/// Deletes an execution: cancels it if it runs, then removes its history.
#[utoipa::path(
    delete, path = "/v1/executions/{id}",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown execution", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_execution(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if let Some(execution) = app.sandboxes.live_execution(&id) {
        let receiver = app.sandboxes.subscribe(&id);
        execution.control.cancel();
        drop(execution);
        if let Some(mut receiver) = receiver {
            // The sender goes away once the last event is stored.
            let _ = tokio::time::timeout(CANCEL_WAIT, async {
                while receiver.changed().await.is_ok() {}
            })
            .await;
        }
    }
    if app.sandboxes.store.delete_execution(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("execution", &id))
    }
}
