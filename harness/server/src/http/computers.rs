//! Computer sessions over HTTP (`/v1/computers…`): open one, describe it, run actions on it,
//! read its trajectory and screenshots, close it. The sessions themselves are
//! [`ComputerSessions`](super::computer_sessions::ComputerSessions).

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};

use super::app_state::AppState;
use super::extract::{After, ApiJson};
use super::inert;
use crate::api::{
    ComputerActions, ComputerCreated, ComputerInfo, ComputerStep, ComputerTrajectory,
    CreateComputer, ErrorBody,
};
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/computers", post(create_computer))
        .route(
            "/v1/computers/{id}",
            get(get_computer).delete(delete_computer),
        )
        .route("/v1/computers/{id}/actions", post(computer_actions))
        .route("/v1/computers/{id}/trajectory", get(computer_trajectory))
        .route(
            "/v1/computers/{id}/trajectory/{step}/screenshot",
            get(computer_screenshot),
        )
}

/// Opens an isolated browser session (its own BrowserContext in the server's Chromium,
/// started on first use) and takes its first screenshot.
#[utoipa::path(
    post, path = "/v1/computers", request_body = CreateComputer,
    responses(
        (status = 201, description = "Opened", body = ComputerCreated),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 415, description = "Not `application/json`", body = ErrorBody),
        (status = 422, description = "Bad fields (`invalid_request`), or the start url is refused by the session's origin policy (`url_blocked`)", body = ErrorBody),
        (status = 502, description = "The browser failed to open the session (`browser_error`)", body = ErrorBody),
        (status = 503, description = "Chromium is not installed or did not start (`browser_unavailable`), or too many sessions are open (`too_many_computers`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create_computer(
    State(app): State<AppState>,
    ApiJson(body): ApiJson<CreateComputer>,
) -> Result<Response, ApiError> {
    let created = app.computers.create(body).await?;
    let location = format!("/v1/computers/{}", created.id);
    Ok(super::created::created(location, created))
}

/// Describes a computer session: its state, display and the approval it waits for.
#[utoipa::path(
    get, path = "/v1/computers/{id}",
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 200, description = "The session", body = ComputerInfo),
        (status = 404, description = "Unknown (or deleted)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_computer(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<ComputerInfo>, ApiError> {
    Ok(Json(app.computers.info(&id).await?))
}

/// Closes a live session (state `closed`; its trajectory stays readable); deletes the
/// record and trajectory of a session that is already over.
#[utoipa::path(
    delete, path = "/v1/computers/{id}",
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 204, description = "Closed, or deleted"),
        (status = 404, description = "Unknown (or deleted)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_computer(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    app.computers.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Runs one model call (one or more actions in the vendor's shape, then one screenshot).
/// Problems the model can fix are a `200` with status `error` or `denied`.
#[utoipa::path(
    post, path = "/v1/computers/{id}/actions", request_body = ComputerActions,
    params(("id" = String, Path, description = "Computer id")),
    responses(
        (status = 200, description = "The step: `ok`, `error`, `approval_required` or `denied`", body = ComputerStep),
        (status = 404, description = "Unknown computer", body = ErrorBody),
        (status = 409, description = "A step waits for approval (`approval_pending`)", body = ErrorBody),
        (status = 410, description = "The session is over: `computer_expired`, `computer_closed`, `computer_interrupted` (its server stopped), `computer_lost` (its browser crashed)", body = ErrorBody),
        (status = 422, description = "Unknown `format`, or no actions", body = ErrorBody),
        (status = 502, description = "A browser command failed (`browser_error`); the session may still work", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn computer_actions(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ComputerActions>,
) -> Result<Json<ComputerStep>, ApiError> {
    Ok(Json(app.computers.act(&id, body).await?))
}

/// The recorded steps of a computer session (also after it ended or the server restarted).
#[utoipa::path(
    get, path = "/v1/computers/{id}/trajectory",
    params(
        ("id" = String, Path, description = "Computer id"),
        ("after" = Option<u64>, Query, description = "List steps with a larger number only"),
    ),
    responses(
        (status = 200, description = "The steps", body = ComputerTrajectory),
        (status = 404, description = "Unknown computer", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn computer_trajectory(
    State(app): State<AppState>,
    Path(id): Path<String>,
    After(after): After,
) -> Result<Json<ComputerTrajectory>, ApiError> {
    Ok(Json(app.computers.trajectory(&id, after).await?))
}

/// The screenshot the model saw after step `step`.
#[utoipa::path(
    get, path = "/v1/computers/{id}/trajectory/{step}/screenshot",
    params(
        ("id" = String, Path, description = "Computer id"),
        ("step" = u64, Path, description = "Step number"),
    ),
    responses(
        (status = 200, description = "The image", content_type = "image/png"),
        (status = 400, description = "`step` is not a number", body = ErrorBody),
        (status = 404, description = "Unknown computer, or the step has no screenshot", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn computer_screenshot(
    State(app): State<AppState>,
    Path((id, step)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let step: u64 = step.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_path",
            format!("the step must be a step number, not {step:?}"),
        )
    })?;
    let (media_type, bytes) = app.computers.screenshot(&id, step).await?;
    // A picture of a web page's content: an inert download like any served bytes.
    let extension = if media_type == "image/jpeg" {
        "jpg"
    } else {
        "png"
    };
    let name = format!("{id}-step-{step}.{extension}");
    Ok(inert::download_as(&name, media_type, bytes))
}
