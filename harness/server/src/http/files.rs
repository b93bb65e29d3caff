//! A sandbox's files: upload, download, list and delete what its code sees at
//! `/workspace` (`/v1/sandboxes/{id}/files…`).

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use cordon_sandbox::{Workspace, WorkspaceError};

use cordon_protocol::time::rfc3339;

use super::app_state::AppState;
use super::created::created;
use super::extract::body_rejection;
use crate::api::{ErrorBody, FileInfo, FileList};
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sandboxes/{id}/files", get(list_files))
        .route(
            "/v1/sandboxes/{id}/files/{*path}",
            get(get_file).put(put_file).delete(delete_file),
        )
}

async fn workspace(app: &AppState, id: &str) -> Result<Workspace, ApiError> {
    Ok(app.sandboxes.live_sandbox(id).await?.workspace.clone())
}

fn workspace_error(error: WorkspaceError) -> ApiError {
    let message = error.to_string();
    match error {
        WorkspaceError::InvalidPath(_) => ApiError::bad_request("invalid_path", message),
        WorkspaceError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "not_found", message),
        WorkspaceError::NotAFile(_) => ApiError::new(StatusCode::CONFLICT, "not_a_file", message),
        WorkspaceError::QuotaBytes { .. } | WorkspaceError::QuotaFiles { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "workspace_quota", message)
        }
        _ => ApiError::bad_request("invalid_path", message),
    }
}

/// Stores a file in the sandbox's workspace (missing directories are created).
#[utoipa::path(
    put, path = "/v1/sandboxes/{id}/files/{path}",
    params(
        ("id" = String, Path, description = "Sandbox id"),
        ("path" = String, Path, description = "Relative path in the workspace, e.g. `data/in.csv`"),
    ),
    request_body(content = Vec<u8>, description = "The file's bytes", content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "Stored", body = FileInfo),
        (status = 400, description = "The path is absolute or has `..`", body = ErrorBody),
        (status = 404, description = "Unknown sandbox", body = ErrorBody),
        (status = 409, description = "A directory is at that path", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
        (status = 413, description = "Over `workspace_bytes`, `workspace_files` or the body limit", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn put_file(
    State(app): State<AppState>,
    Path((id, path)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let workspace = workspace(&app, &id).await?;
    let body = body.map_err(body_rejection)?;
    workspace.write(&path, &body).map_err(workspace_error)?;
    let info = workspace
        .list()
        .into_iter()
        .find(|entry| entry.path == path)
        .map(file_info)
        .ok_or_else(|| workspace_error(WorkspaceError::NotFound(path.clone())))?;
    Ok(created(format!("/v1/sandboxes/{id}/files/{path}"), info))
}

fn file_info(entry: cordon_sandbox::FileEntry) -> FileInfo {
    FileInfo {
        path: entry.path,
        size: entry.size,
        modified: rfc3339(entry.modified_ns / 1_000_000),
    }
}

/// A file's bytes, as a download (`Content-Disposition: attachment`) with a passive
/// content type taken from its extension (HTML, SVG, XML, scripts: `text/plain`).
#[utoipa::path(
    get, path = "/v1/sandboxes/{id}/files/{path}",
    params(
        ("id" = String, Path, description = "Sandbox id"),
        ("path" = String, Path, description = "Relative path in the workspace"),
    ),
    responses(
        (status = 200, description = "The file, as an inert download: `Content-Disposition: attachment`, `nosniff`, `Content-Security-Policy: sandbox`", content_type = "application/octet-stream"),
        (status = 400, description = "The path is absolute or has `..`", body = ErrorBody),
        (status = 404, description = "Unknown sandbox or no such file", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_file(
    State(app): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let bytes = workspace(&app, &id)
        .await?
        .read(&path)
        .map_err(workspace_error)?;
    // The bytes are the sandbox's: a download no browser renders or runs (see `inert`).
    Ok(super::inert::download(&path, bytes))
}

/// Every file in the workspace (directories are implied by the paths).
#[utoipa::path(
    get, path = "/v1/sandboxes/{id}/files",
    params(("id" = String, Path, description = "Sandbox id")),
    responses(
        (status = 200, description = "The files", body = FileList),
        (status = 404, description = "Unknown sandbox", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_files(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<FileList>, ApiError> {
    let workspace = workspace(&app, &id).await?;
    let (bytes, entries) = workspace.usage();
    let quota = workspace.quota();
    Ok(axum::Json(FileList {
        files: workspace.list().into_iter().map(file_info).collect(),
        bytes,
        entries,
        workspace_bytes: quota.bytes,
        workspace_files: quota.files,
    }))
}

/// Deletes a file (or a directory with everything in it).
#[utoipa::path(
    delete, path = "/v1/sandboxes/{id}/files/{path}",
    params(
        ("id" = String, Path, description = "Sandbox id"),
        ("path" = String, Path, description = "Relative path in the workspace"),
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "The path is absolute or has `..`", body = ErrorBody),
        (status = 404, description = "Unknown sandbox or no such file", body = ErrorBody),
        (status = 410, description = "The sandbox expired", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_file(
    State(app): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    workspace(&app, &id)
        .await?
        .remove(&path)
        .map_err(workspace_error)?;
    Ok(StatusCode::NO_CONTENT)
}
