//! Approvals over HTTP (`POST /v1/approvals/{id}`): a decision on a tool call waiting on an
//! `ask` policy, or on a computer step waiting on an `ask` rule.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;

use super::app_state::AppState;
use super::extract::ApiJson;
use crate::api::{ApprovalDecided, DecideApproval, ErrorBody};
use crate::error::ApiError;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/v1/approvals/{id}", post(decide_approval))
}

/// Approves or denies a tool call waiting on an `ask` policy, or a computer step waiting
/// on an `ask` rule (then the answer carries the step it produced).
#[utoipa::path(
    post, path = "/v1/approvals/{id}", request_body = DecideApproval,
    params(("id" = String, Path, description = "Approval id (from `approval.required`, or a computer step's `pending_approval`)")),
    responses(
        (status = 200, description = "Decided; the call runs or fails with `denied`; a computer step runs (its result is `step`) or is `denied`", body = ApprovalDecided),
        (status = 404, description = "Unknown approval", body = ErrorBody),
        (status = 409, description = "Already decided, or its execution or computer session ended", body = ErrorBody),
        (status = 410, description = "The computer session is gone", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn decide_approval(
    State(app): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<DecideApproval>,
) -> Result<Json<ApprovalDecided>, ApiError> {
    if let Some(decided) = app.computers.decide(&id, body.decision).await {
        let (computer_id, step) = decided?;
        return Ok(Json(ApprovalDecided {
            id,
            execution_id: None,
            computer_id: Some(computer_id),
            decision: body.decision,
            step: Some(step),
        }));
    }
    let execution_id = app.sandboxes.decide(&id, body.decision).await?;
    Ok(Json(ApprovalDecided {
        id,
        execution_id: Some(execution_id),
        computer_id: None,
        decision: body.decision,
        step: None,
    }))
}
