//! `GET /v1/health`: whether the server is up, and its version.

use axum::Json;

/// Whether the server is up, and its version.
#[utoipa::path(
    get, path = "/v1/health",
    responses((status = 200, description = "`{status: \"ok\", version}`", body = Object)),
    security(("bearer" = []))
)]
pub(super) async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}
