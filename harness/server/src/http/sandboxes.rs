//! Sandboxes over HTTP (`/v1/sandboxes`, `/v1/sandboxes/{id}`): create one (refusing
//! host-side tools without a token), describe it, pause and resume it, delete it.

use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use cordon_protocol::time::rfc3339;

use super::app_state::AppState;
use super::created::created;
use super::extract::ApiJson;
use super::live_sandboxes::{DEFAULT_TTL, MAX_TTL};
use crate::api::{CreateSandbox, ErrorBody, SandboxCreated, SandboxInfo};
use crate::error::ApiError;
use crate::store::SandboxRow;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sandboxes", post(create_sandbox))
        .route(
            "/v1/sandboxes/{id}",
            get(get_sandbox).delete(delete_sandbox),
        )
        .route("/v1/sandboxes/{id}/pause", post(pause_sandbox))
        .route("/v1/sandboxes/{id}/resume", post(resume_sandbox))
}

/// Creates a sandbox.
#[utoipa::path(
    post, path = "/v1/sandboxes", request_body = CreateSandbox,
    responses(
        (status = 201, description = "Created", body = SandboxCreated),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 422, description = "Bad fields or tool declarations", body = ErrorBody),
        (status = 503, description = "The server's cap on live sandboxes (`too_many_sandboxes`) or on their total `workspace_bytes` (`workspace_budget_exhausted`) is reached", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create_sandbox(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<CreateSandbox>,
) -> Result<Response, ApiError> {
    let ttl = match body.ttl_seconds {
        None => DEFAULT_TTL,
        Some(0) => {
            return Err(ApiError::invalid_request(
                "invalid_request",
                "ttl_seconds must be at least 1",
            ));
        }
        Some(seconds) if Duration::from_secs(seconds) > MAX_TTL => {
            return Err(ApiError::invalid_request(
                "invalid_request",
                format!("ttl_seconds must be at most {}", MAX_TTL.as_secs()),
            ));
        }
        Some(seconds) => Duration::from_secs(seconds),
    };
    if !app.host_tools {
        refuse_host_tools(&body.tools)?;
    }
    let (id, expires_ms) = app
        .sandboxes
        .create_sandbox(body.language, body.tools, body.limits, body.stateful, ttl)
        .await?;
    let location = format!("/v1/sandboxes/{id}");
    let body = SandboxCreated {
        id,
        expires_at: rfc3339(expires_ms),
    };
    Ok(created(location, body))
}

/// Without a token, anyone who reaches the port could declare a `command` tool and run
/// programs as this server's user: such declarations need `--allow-host-tools`.
fn refuse_host_tools(tools: &[cordon_protocol::tool::ToolDeclaration]) -> Result<(), ApiError> {
    use cordon_protocol::tool::HandlerSpec;
    let Some((index, tool, kind)) =
        tools
            .iter()
            .enumerate()
            .find_map(|(index, tool)| match tool.handler {
                HandlerSpec::Command { .. } => Some((index, tool, "command")),
                HandlerSpec::Http { .. } => Some((index, tool, "http")),
                _ => None,
            })
    else {
        return Ok(());
    };
    Err(ApiError::invalid_request(
        "host_tools_refused",
        format!(
            "tools[{index}] `{}` has a `{kind}` handler, which runs on this server's host; \
             a server started without --token accepts such tools only when started with \
             --allow-host-tools (or start it with --token, so only holders of the token can \
             declare them). Tools whose handler is `client`, `static` or `mcp` need neither",
            tool.name
        ),
    ))
}

/// Describes a sandbox.
#[utoipa::path(
    get, path = "/v1/sandboxes/{id}",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 200, description = "The sandbox", body = SandboxInfo),
        (status = 404, description = "Unknown or deleted", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    let row = match app.sandboxes.store.sandbox(&id).await? {
        Some(row) if row.state != "deleted" => row,
        _ => return Err(ApiError::not_found("sandbox", &id)),
    };
    Ok(Json(sandbox_info(&app, row)))
}

/// A sandbox's row as the API shows it (a live one's expiry as it stands in memory).
fn sandbox_info(app: &AppState, row: SandboxRow) -> SandboxInfo {
    let expires_ms = app.sandboxes.expires_ms(&row.id).unwrap_or(row.expires_ms);
    SandboxInfo {
        id: row.id,
        language: row.language,
        stateful: row.stateful,
        limits: row.limits,
        tools: row.tools.into_iter().map(|tool| tool.name).collect(),
        expires_at: rfc3339(expires_ms),
        state: row.state,
        reason: row.reason,
        paused_bytes: row.paused_bytes,
    }
}

/// Pauses a sandbox: its state (REPL session and workspace) goes to the object store, and
/// it gives back its instance and its share of the server's workspace budget. The next
/// execution (or `POST /resume`) brings it back.
#[utoipa::path(
    post, path = "/v1/sandboxes/{id}/pause",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 200, description = "Paused (`state` is `paused`, `paused_bytes` its stored size); pausing a paused sandbox answers the same", body = SandboxInfo),
        (status = 404, description = "Unknown or deleted", body = ErrorBody),
        (status = 409, description = "An execution is running in it (`sandbox_busy`)", body = ErrorBody),
        (status = 410, description = "It expired or was interrupted", body = ErrorBody),
        (status = 503, description = "The object store failed (`object_store_unavailable`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn pause_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    let row = app.sandboxes.pause(&id).await?;
    Ok(Json(sandbox_info(&app, row)))
}

/// Resumes a paused sandbox (a live one is answered as it is). Creating an execution on a
/// paused sandbox resumes it too.
#[utoipa::path(
    post, path = "/v1/sandboxes/{id}/resume",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 200, description = "Live (`state` is `live`)", body = SandboxInfo),
        (status = 404, description = "Unknown or deleted", body = ErrorBody),
        (status = 410, description = "It expired, or was interrupted (also when its paused state could not be read: `sandbox_interrupted` says why)", body = ErrorBody),
        (status = 503, description = "The server's cap on live sandboxes or workspace bytes is reached, no instance is free, or the object store failed", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn resume_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    app.sandboxes.bring_back(&id).await?;
    match app.sandboxes.store.sandbox(&id).await? {
        Some(row) => Ok(Json(sandbox_info(&app, row))),
        None => Err(ApiError::not_found("sandbox", &id)),
    }
}

/// Deletes a sandbox: cancels its running executions and frees its instance.
#[utoipa::path(
    delete, path = "/v1/sandboxes/{id}",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "Unknown or already deleted", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_sandbox(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.sandboxes.delete_sandbox(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
