//! The HTTP API's request and response bodies. Field names are the contract clients code
//! against (`docs/http-api.md`); the OpenAPI document is generated from these types.

use cordon_protocol::execution::{
    ClientToolResult, Decision, ExecutionEvent, ExecutionResult, Language, Limits,
};
use cordon_protocol::tool::{Locus, ToolDeclaration};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// Every error: a machine-readable `type` and a message for humans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What kind of error (`invalid_json`, `invalid_request`, `not_found`, …).
    #[serde(rename = "type")]
    pub error_type: String,
    /// What was wrong and what to do.
    pub message: String,
}

/// `POST /v1/sandboxes`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSandbox {
    /// Guest language: `python` or `javascript` (`js`).
    pub language: Language,
    /// Tool declarations, exactly as in a tools file (handler kinds included).
    #[serde(default)]
    pub tools: Vec<ToolDeclaration>,
    /// Limits of each execution; omitted fields take their defaults.
    #[serde(default)]
    pub limits: Limits,
    /// Keep one instance across executions, so variables persist (a REPL).
    #[serde(default)]
    pub stateful: bool,
    /// Idle seconds after which the sandbox expires (default 3600).
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
}

/// A sandbox was created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SandboxCreated {
    /// The sandbox id.
    pub id: String,
    /// When it expires if unused (RFC 3339, UTC); each execution moves it.
    pub expires_at: String,
}

/// `GET /v1/sandboxes/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SandboxInfo {
    /// The sandbox id.
    pub id: String,
    /// Guest language.
    pub language: Language,
    /// Whether executions share one instance.
    pub stateful: bool,
    /// Limits of each execution.
    pub limits: Limits,
    /// Names of the declared tools.
    pub tools: Vec<String>,
    /// When it expires if unused (RFC 3339, UTC).
    pub expires_at: String,
    /// `live` or `expired`.
    pub state: String,
    /// Why it is no longer live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `POST /v1/sandboxes/{id}/executions`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateExecution {
    /// Source code in the sandbox's language.
    pub code: String,
}

/// An execution was started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecutionCreated {
    /// The execution id.
    pub id: String,
}

/// `POST /v1/executions/{id}/tool_results`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResults {
    /// Results for pending client calls (any subset of them).
    pub results: Vec<ClientToolResult>,
}

/// Results were delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolResultsAccepted {
    /// Call ids delivered by this request.
    pub accepted: Vec<String>,
    /// Client calls of the execution still waiting.
    pub pending: Vec<String>,
}

/// `POST /v1/approvals/{id}`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideApproval {
    /// `approve` or `deny`.
    pub decision: Decision,
}

/// A decision was recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalDecided {
    /// The approval id.
    pub id: String,
    /// The execution it belongs to.
    pub execution_id: String,
    /// The decision.
    pub decision: Decision,
}

/// A client call waiting for its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PendingToolCall {
    /// Call id (post its result with this id).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Input object.
    pub input: Value,
    /// Always `client`.
    pub locus: Locus,
}

/// An approval waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PendingApproval {
    /// Approval id (`POST /v1/approvals/{id}`).
    pub approval_id: String,
    /// The call waiting for it.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// Input object.
    pub input: Value,
    /// Why approval is needed.
    pub reason: String,
}

/// One logged event: the event's own fields plus its position in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LoggedEvent {
    /// Position in the execution's log, from 1 (the SSE `id`).
    pub seq: u64,
    /// The event (`type` + its fields).
    #[serde(flatten)]
    pub event: ExecutionEvent,
}

/// Where an execution is: `running`, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// Still running (possibly suspended on client tools or approvals).
    Running,
    /// The code ran to its end.
    Completed,
    /// The code raised, or the guest faulted.
    Error,
    /// A limit stopped it.
    LimitExceeded,
    /// It was cancelled.
    Cancelled,
    /// The server stopped before it ended.
    Expired,
}

impl ExecutionState {
    /// Parses a stored status name.
    pub fn parse(name: &str) -> ExecutionState {
        match name {
            "running" => ExecutionState::Running,
            "completed" => ExecutionState::Completed,
            "error" => ExecutionState::Error,
            "limit_exceeded" => ExecutionState::LimitExceeded,
            "cancelled" => ExecutionState::Cancelled,
            _ => ExecutionState::Expired,
        }
    }
}

/// `GET /v1/executions/{id}`: everything a client needs to continue after it restarted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ExecutionInfo {
    /// The execution id.
    pub id: String,
    /// The sandbox it runs in.
    pub sandbox_id: String,
    /// Its language.
    pub language: Language,
    /// `running`, or how it ended.
    pub status: ExecutionState,
    /// Client calls waiting for results (only while running).
    pub pending_tool_calls: Vec<PendingToolCall>,
    /// Approvals waiting for a decision (only while running).
    pub pending_approvals: Vec<PendingApproval>,
    /// The event log (after `?after=N` when given), in order.
    pub events: Vec<LoggedEvent>,
    /// The final result once it ended (the JSON of `cordon run --json`), else `null`.
    pub result: Option<ExecutionResult>,
}
