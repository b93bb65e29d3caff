//! The OpenAPI document of the HTTP API ([`ApiDoc`], served at `/openapi.json`): every
//! route family's paths and the shared schemas.

use axum::Json;
use utoipa::OpenApi;

use super::{
    approvals, computers, envs, executions, files, gateway, gateway_gemini, health, sandboxes,
    session,
};
use crate::api::{
    ComputerApproval, ComputerState, ComputerStep, ErrorBody, LoggedEvent, ScreenshotBody,
    ScreenshotRef, SizeBody, StepStatus, TrajectoryStep,
};
use cordon_protocol::execution::ExecutionEvent;

/// The OpenAPI document of this API.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Cordon HTTP API",
        description = "Run model-written Python and JavaScript in WebAssembly sandboxes; stream \
                       events over SSE; answer client tool calls and approvals; drive isolated \
                       browser sessions with any vendor's computer-use actions."
    ),
    paths(
        openapi, health::health, sandboxes::create_sandbox, sandboxes::get_sandbox,
        sandboxes::delete_sandbox, sandboxes::pause_sandbox, sandboxes::resume_sandbox, executions::create_execution, executions::get_execution,
        executions::delete_execution, executions::execution_events,
        executions::post_tool_results, executions::cancel_execution,
        approvals::decide_approval, computers::create_computer, computers::get_computer,
        computers::delete_computer, computers::computer_actions,
        computers::computer_trajectory, computers::computer_screenshot, files::put_file, files::get_file, files::list_files,
        files::delete_file, gateway::messages, gateway::chat_completions, gateway::responses,
        gateway_gemini::generate_content, gateway_gemini::generate_content_v1,
        gateway::list_conversations, gateway::conversation, session::create,
        session::continue_session, session::history, session::remove, envs::create_env,
        envs::list_tasks, envs::get_env, envs::reset_env, envs::step_env, envs::evaluate_env,
        envs::finish_env, envs::delete_env
    ),
    components(schemas(
        ErrorBody, ExecutionEvent, LoggedEvent, ComputerStep, ComputerApproval, ScreenshotBody,
        ScreenshotRef, SizeBody, StepStatus, ComputerState, TrajectoryStep
    )),
    modifiers(&BearerAuth)
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// This document.
#[utoipa::path(
    get, path = "/openapi.json",
    responses((status = 200, description = "The OpenAPI 3.1 document of every route", body = Object))
)]
pub(super) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path a router of the HTTP API declares is in the OpenAPI
    /// document: the routes are read from the sources, so a new route cannot be forgotten.
    #[test]
    fn openapi_documents_every_routed_path() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        let sources = [
            include_str!("server.rs"),
            include_str!("sandboxes.rs"),
            include_str!("executions.rs"),
            include_str!("approvals.rs"),
            include_str!("computers.rs"),
            include_str!("gateway.rs"),
            include_str!("gateway_gemini.rs"),
            include_str!("session.rs"),
            include_str!("files.rs"),
            include_str!("envs.rs"),
        ];
        let mut routed = Vec::new();
        for source in sources {
            for piece in source.split(".route(").skip(1) {
                let Some(path) = piece.trim_start().strip_prefix('"') else {
                    continue;
                };
                let Some((path, _)) = path.split_once('"') else {
                    continue;
                };
                if path.starts_with('/') {
                    routed.push(path.replace("{*", "{"));
                }
            }
        }
        assert!(routed.len() >= 25, "read too few routes: {routed:?}");
        for path in &routed {
            assert!(
                doc["paths"].get(path).is_some(),
                "{path} is routed but missing from /openapi.json"
            );
        }
    }

    #[test]
    fn openapi_names_every_route() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        for path in [
            "/v1/sandboxes",
            "/v1/sandboxes/{id}",
            "/v1/sandboxes/{id}/executions",
            "/v1/executions/{id}",
            "/v1/executions/{id}/events",
            "/v1/executions/{id}/tool_results",
            "/v1/approvals/{id}",
            "/v1/computers",
            "/v1/computers/{id}",
            "/v1/computers/{id}/actions",
            "/v1/computers/{id}/trajectory",
            "/v1/computers/{id}/trajectory/{step}/screenshot",
            "/v1/sandboxes/{id}/files",
            "/v1/sandboxes/{id}/files/{path}",
        ] {
            assert!(doc["paths"].get(path).is_some(), "missing {path}");
        }
        assert!(doc["components"]["schemas"].get("ExecutionEvent").is_some());
        assert!(doc["components"]["schemas"].get("ComputerStep").is_some());
    }
}
