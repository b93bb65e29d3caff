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

/// One file of a sandbox's workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FileInfo {
    /// Relative path (`out/chart.png`); the guest sees it under `/workspace/`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification (RFC 3339, UTC).
    pub modified: String,
}

/// `GET /v1/sandboxes/{id}/files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FileList {
    /// Every file, in path order.
    pub files: Vec<FileInfo>,
    /// Bytes stored.
    pub bytes: u64,
    /// Files and directories stored.
    pub entries: u64,
    /// The byte quota (`limits.workspace_bytes`).
    pub workspace_bytes: u64,
    /// The entry quota (`limits.workspace_files`).
    pub workspace_files: u64,
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
    /// `live`, `paused` (its state is stored; the next execution resumes it), `expired`,
    /// or `interrupted` (the server stopped before pausing it).
    pub state: String,
    /// Why it is no longer live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes its paused state takes in the object store, while `paused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_bytes: Option<u64>,
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
    /// The execution it belongs to (approvals of tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// The computer it belongs to (approvals of computer steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_id: Option<String>,
    /// The decision.
    pub decision: Decision,
    /// Computer steps only: the step the decision produced — the approved actions ran
    /// (status `ok`, with the screenshot, or `approval_required` again if a later action
    /// of the same call asks too), or the step was refused (`denied`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<ComputerStep>,
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
    /// The server stopped before it ended (results stored before replicas).
    Expired,
    /// The replica running it stopped before it ended.
    Interrupted,
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
            "interrupted" => ExecutionState::Interrupted,
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

fn quiet() -> String {
    "quiet".to_owned()
}

/// `POST /v1/computers` (and the MCP tool `computer_open`): an isolated browser session.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateComputer {
    /// The page the session starts on (it must pass the origin policy).
    pub url: String,
    /// Viewport in CSS pixels: `"1280x800"` or `{"width", "height"}` (default 1280×800).
    #[serde(default)]
    pub viewport: Option<Value>,
    /// Device pixel ratio: 1 (default) or 2.
    #[serde(default)]
    pub dpr: Option<f64>,
    /// Keep the page's `devicePixelRatio` exactly `dpr` (default false). Otherwise a DPR-1
    /// session whose display is its viewport scaled down (the default 1024×640 of
    /// 1280×800) is drawn at the display's scale where frames are drawn on demand — one
    /// drawn frame is the screenshot, about half the step time — and its page reads that
    /// scale (0.8) as `devicePixelRatio`; CSS pixels, layout and input are unchanged.
    #[serde(default)]
    pub exact_dpr: Option<bool>,
    /// What the model sees: `"1024x640"`, `{"width", "height"}`, a preset (`xga`, `wxga`,
    /// `fwxga`) or `budget` (default: the viewport scaled to a long edge ≤ 1568 px and
    /// ≤ 1.15 MP).
    #[serde(default)]
    pub display: Option<Value>,
    /// Origins the session may reach (`http://127.0.0.1:8000`, `https://*.example.com`);
    /// empty: every origin not blocked.
    #[serde(default)]
    pub allow_origins: Vec<String>,
    /// Origins the session may never reach.
    #[serde(default)]
    pub block_origins: Vec<String>,
    /// Approval rules: a list of rules or `{"rules": [...]}` (as `cordon computer --rules`);
    /// omitted: ask before passwords, payment fields, submit/buy/delete-like buttons,
    /// uploads and new origins. `[]` allows everything.
    #[serde(default)]
    pub rules: Option<Value>,
    /// Screenshot encoding: `png` (default), `jpeg` or `jpeg:QUALITY`.
    #[serde(default)]
    pub image_format: Option<String>,
    /// Idle seconds after which the session is closed (default 900).
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
    /// The longest a step waits for the page to settle — its network to go quiet, then
    /// its screen to stop moving — before capturing it as it is (1–30000; default 2000).
    #[serde(default)]
    pub settle_timeout_ms: Option<u64>,
}

/// A size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SizeBody {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// A screenshot as the model should see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScreenshotBody {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    /// The image, base64 (standard alphabet, padded).
    pub data: String,
    /// Width in pixels (the model display's).
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

/// A computer session was opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ComputerCreated {
    /// The computer id.
    pub id: String,
    /// When it is closed if unused (RFC 3339, UTC); each step moves it.
    pub expires_at: String,
    /// The model display: coordinates in actions are in this space.
    pub display: SizeBody,
    /// The page's viewport in CSS pixels.
    pub viewport: SizeBody,
    /// The page it is on.
    pub current_url: Option<String>,
    /// The first screenshot (step 1 of the trajectory); `null` only if a rule asked or
    /// denied taking it.
    pub screenshot: Option<ScreenshotBody>,
}

/// `POST /v1/computers/{id}/actions`: one model call, in its vendor's shape.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputerActions {
    /// `anthropic` (default), `openai`, `gemini` or `native`.
    #[serde(default)]
    pub format: Option<String>,
    /// The actions, run in order, then one screenshot. Each is the vendor's action object
    /// (Anthropic tool input, OpenAI action, Gemini `function_call`, native `Action`) or
    /// its envelope (`tool_use` block, `computer_call` item).
    #[schema(value_type = Vec<Object>)]
    pub actions: Vec<Value>,
    /// The vendor's call id (`tool_use.id`, `call_id`), echoed in the result.
    #[serde(default)]
    pub call_id: Option<String>,
}

/// How a computer step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Every action ran; `screenshot` shows the result.
    Ok,
    /// An action the model can correct (it did not decode, a coordinate was off screen,
    /// a URL was blocked); nothing after it ran. Give `error` to the model.
    Error,
    /// A rule asks a human first: decide `pending_approval.approval_id` with
    /// `POST /v1/approvals/{id}`; actions before it in the call already ran.
    ApprovalRequired,
    /// A rule or a human refused the action; give `error` to the model.
    Denied,
}

/// A computer step waiting for a human.
// Mirrors `cordon_computer::engine::PendingApproval` on purpose: this is the wire shape,
// with the server's own `approval_id` (unguessable, decided at `/v1/approvals/{id}` and
// kept in the store) in place of the engine's per-session id, and it needs `ToSchema` for
// the OpenAPI document, which cordon-computer (no utoipa) cannot derive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ComputerApproval {
    /// Decide it with `POST /v1/approvals/{approval_id}`.
    pub approval_id: String,
    /// The rule that asked.
    pub rule: String,
    /// Why it asked.
    pub reason: String,
    /// The element the action touches (`button "Buy now"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// Which action of the call waits (earlier ones already ran).
    pub action_index: usize,
    /// That action's kind (`click`, `type`, …).
    pub action: String,
}

/// The result of one computer step (`cordon computer` prints the same fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ComputerStep {
    /// The step's number in the trajectory; `null` when the call did not decode (nothing
    /// ran, nothing was recorded).
    pub step: Option<u64>,
    /// How it ended.
    pub status: StepStatus,
    /// The vendor's call id, echoed.
    pub call_id: Option<String>,
    /// For the model, when status is not `ok`.
    pub error: Option<String>,
    /// The page's URL after the step.
    pub current_url: Option<String>,
    /// The screen after the step, in the model display's size (`ok` steps).
    pub screenshot: Option<ScreenshotBody>,
    /// Text some actions answer with (`cursor_position`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Set when status is `approval_required`.
    pub pending_approval: Option<ComputerApproval>,
    /// The approval this step resolved (approved or denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolves: Option<String>,
    /// The gate verdict for each action that reached the gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub gates: Vec<Value>,
    /// False when the page was still changing when the screenshot was taken.
    pub settled: bool,
    /// How settling ended: `quiet` (nothing moved once the network was idle), `stable`
    /// (the screen moved; the step waited until it stopped), `timeout` (the session's
    /// `settle_timeout_ms` was reached; captured as it was) or `moving` (the page's own
    /// script motion, running since the previous step, was waited for only briefly).
    #[serde(default = "quiet")]
    pub settle: String,
    /// Milliseconds per phase: `gate`, `act`, `settle`, `capture`, `total`.
    #[schema(value_type = Object)]
    pub timings_ms: Value,
}

/// `live`, or why a computer session is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComputerState {
    /// Open: it takes actions.
    Live,
    /// Closed by the server: idle beyond its ttl, or its browser was lost (see `reason`).
    Expired,
    /// Closed by `DELETE`.
    Closed,
    /// Its server stopped while it was open, and its browser went with it (see `reason`).
    Interrupted,
}

/// `GET /v1/computers/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ComputerInfo {
    /// The computer id.
    pub id: String,
    /// `live`, `expired`, `closed` or `interrupted` (its server stopped while it was open).
    pub state: ComputerState,
    /// Why it is no longer live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The page it started on.
    pub url: String,
    /// The page it was on after its last step.
    pub current_url: Option<String>,
    /// The model display.
    pub display: SizeBody,
    /// The viewport in CSS pixels.
    pub viewport: SizeBody,
    /// Device pixel ratio.
    pub dpr: f64,
    /// Steps recorded so far.
    pub steps: u64,
    /// The step waiting for a decision, if any.
    pub pending_approval: Option<ComputerApproval>,
    /// Creation time (RFC 3339, UTC).
    pub created_at: String,
    /// When it is closed if unused (RFC 3339, UTC); for a session that is over, when it
    /// ended.
    pub expires_at: String,
}

/// Where a recorded screenshot is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScreenshotRef {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Its address (`/v1/computers/{id}/trajectory/{step}/screenshot`).
    pub url: String,
}

/// One recorded step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TrajectoryStep {
    /// Step number, from 1.
    pub step: u64,
    /// When it was recorded (RFC 3339, UTC).
    pub at: String,
    /// How it ended.
    pub status: StepStatus,
    /// The vendor's call id.
    pub call_id: Option<String>,
    /// The model-visible error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The URL after the step.
    pub current_url: Option<String>,
    /// The call as decoded (canonical actions, coordinate space, safety checks); text typed
    /// into a password field shows as `[redacted]`.
    #[schema(value_type = Object)]
    pub call: Value,
    /// Indices of the call's `type` actions whose text was redacted (the gate saw them go
    /// into a password field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted_actions: Vec<usize>,
    /// What ran, in screen (CSS pixel) coordinates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub screen_ops: Vec<Value>,
    /// Gate verdicts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub gates: Vec<Value>,
    /// The approval it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<ComputerApproval>,
    /// The approval it resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolves: Option<String>,
    /// Text output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The screenshot the model saw after it.
    pub screenshot: Option<ScreenshotRef>,
    /// Whether the page had settled.
    pub settled: bool,
    /// How settling ended: `quiet`, `stable`, `timeout` or `moving`.
    #[serde(default = "quiet")]
    pub settle: String,
    /// Milliseconds per phase.
    #[schema(value_type = Object)]
    pub timings_ms: Value,
}

/// `GET /v1/computers/{id}/trajectory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ComputerTrajectory {
    /// The computer id.
    pub id: String,
    /// Its state now.
    pub state: ComputerState,
    /// Steps after `?after=` (default: all), in order.
    pub steps: Vec<TrajectoryStep>,
}
