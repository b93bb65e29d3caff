//! The MCP server (`cordon mcp`): `execute_code`, and the computer tools `computer_open`,
//! `computer` and `computer_close` (see [`computer`]), over stdio or Streamable HTTP, built
//! on the official Rust SDK (`rmcp`).
//!
//! Protocol versions: 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25 (the `initialize`
//! handshake era). 2026-07-28 is not offered: it forbids server-to-client requests, and
//! approvals are elicitation requests sent while the tool call runs.
//!
//! - Guest exceptions and limits are tool results with `isError: true` (the model can
//!   read and fix them); only malformed calls (unknown tool, bad arguments) are JSON-RPC
//!   errors.
//! - `notifications/cancelled` for a running call cancels the execution (at the next
//!   epoch tick if the guest is running, at once if it waits).
//! - With a `progressToken`, a progress notification goes out every second of the run.
//! - Calls to tools with policy `ask` become a form elicitation when the client declared
//!   the `elicitation` capability, and are refused (the guest gets a `ToolError`, and the
//!   result says why) when it did not. Computer actions whose approval rule says `ask` go
//!   the same way.

mod ask;
mod computer;
mod files;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cordon_computer::browser::BrowserOptions;
use cordon_core::broker::ApprovalRequest;
use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{
    Decision, ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits, ResultEncoding,
};
use cordon_protocol::tool::Locus;
use cordon_sandbox::{ExecutionRequest, Quota, Sandbox, Session, SessionSpec, Workspace};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, Implementation, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::computer::ComputerPool;
use crate::guard::{HostGuard, guard_requests};
use crate::hub::budget::{Budget, BudgetError, Capacity, Reservation};
use computer::{ComputerTable, ComputerTools};

/// Sessions kept at once; the oldest is dropped beyond this (each holds an instance).
pub const MAX_SESSIONS: usize = 64;
/// Interval of progress notifications during a run.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// Longest a human may take to answer an approval elicitation.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);
/// Characters of stdout/stderr put into the text content (the whole output is in
/// `structuredContent`).
const TEXT_OUTPUT_CHARS: usize = 20_000;

/// The protocol versions this server speaks.
pub fn protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
}

/// A problem with the server's own configuration (not a guest's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpSetupError {
    /// A declared tool has a `client` handler: an MCP client cannot answer those.
    #[error(
        "tool `{0}` has a `client` handler, which an MCP client cannot answer; use `static`, \
         `command` or `http` (client tools need the HTTP API, `cordon serve`)"
    )]
    ClientTool(String),
    /// The computer approval rules do not parse.
    #[error("computer approval rules: {0}")]
    ComputerRules(String),
}

/// The first tool of `registry` that only an API caller can answer: a `client` handler
/// other than `user_ask`, which a person answers (through elicitation here, on the terminal
/// under `cordon run`). A front end with no such caller refuses it at start; otherwise its
/// calls would wait, unanswered, until the client-tool timeout.
pub fn unanswerable_client_tool(registry: &ToolRegistry) -> Option<&str> {
    registry
        .iter()
        .find(|tool| tool.declaration.handler.locus() == Locus::Client && tool.name() != "user_ask")
        .map(|tool| tool.name())
}

/// The MCP server. Cheap to clone: each Streamable HTTP session gets a clone, and all
/// share the sandbox and the REPL sessions.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
    /// REPL sessions by `session_id`: one table per MCP connection, so two clients of
    /// a Streamable HTTP server never see each other's variables.
    sessions: Arc<Mutex<SessionTable>>,
    /// Computer sessions, also one table per MCP connection.
    computers: Arc<ComputerTable>,
}

struct Inner {
    sandbox: Sandbox,
    dispatcher: Dispatcher,
    limits: Limits,
    /// `None`: the computer tools are not offered.
    pool: Option<Arc<ComputerPool>>,
    /// Approval rules of computer sessions (`None`: the default rules).
    computer_rules: Option<Value>,
    /// Where computer sessions record their trajectories (`None`: not recorded).
    trajectories: Option<PathBuf>,
    /// Host names Streamable HTTP serves besides loopback and the bound address.
    allowed_hosts: Vec<String>,
    /// REPL sessions live across all connections: each connection has its own table, so
    /// without this many connections would hold unbounded workspaces between them.
    budget: Arc<Budget>,
}

/// Options of the MCP server beyond the sandbox.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpOptions {
    /// How the computer tools start Chromium (on the first `computer_open`); `None` leaves
    /// the computer tools out.
    pub browser: Option<BrowserOptions>,
    /// Approval rules of computer sessions, as `{"rules": [...]}` or a list (`None`: ask
    /// before passwords, payment fields, buy/delete-like buttons, uploads, new origins).
    pub computer_rules: Option<Value>,
    /// Each computer session records its trajectory (JSONL + screenshots, replayable with
    /// `cordon replay`) in `<dir>/<id>`; `None`: not recorded.
    pub trajectories: Option<PathBuf>,
    /// Host names Streamable HTTP serves besides loopback and the bound address
    /// (`--allow-host`), as [`crate::guard::parse_allowed_host`] returns them.
    pub allowed_hosts: Vec<String>,
    /// REPL sessions (`session_id`) live at once across all connections; a new one beyond
    /// is refused with an error result. Each connection also keeps at most
    /// [`MAX_SESSIONS`], dropping its oldest. Every session declares the same
    /// `workspace_bytes`, so this also bounds their workspace memory.
    pub max_sessions_total: usize,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            browser: Some(BrowserOptions::default()),
            computer_rules: None,
            trajectories: None,
            allowed_hosts: Vec::new(),
            max_sessions_total: crate::hub::budget::DEFAULT_MAX_SANDBOXES,
        }
    }
}

impl McpOptions {
    crate::setters! {
        browser: Option<BrowserOptions>,
        computer_rules: Option<Value>,
        trajectories: Option<PathBuf>,
        allowed_hosts: Vec<String>,
        max_sessions_total: usize,
    }
}

#[derive(Default)]
struct SessionTable {
    /// Each session with its place in the server-wide budget, given back when it goes.
    by_id: HashMap<String, (Language, Session, Reservation)>,
    order: Vec<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server running code in `sandbox` with the tools of `registry` and `limits`, and
    /// the computer tools with the default [`McpOptions`].
    pub fn new(
        sandbox: Sandbox,
        registry: ToolRegistry,
        limits: Limits,
    ) -> Result<Self, McpSetupError> {
        McpServer::with_options(sandbox, registry, limits, McpOptions::default())
    }

    /// [`Self::new`] with [`McpOptions`].
    pub fn with_options(
        sandbox: Sandbox,
        registry: ToolRegistry,
        limits: Limits,
        options: McpOptions,
    ) -> Result<Self, McpSetupError> {
        if let Some(tool) = unanswerable_client_tool(&registry) {
            // `user_ask` is answered by the client's user (elicitation).
            return Err(McpSetupError::ClientTool(tool.to_owned()));
        }
        if let Some(rules) = &options.computer_rules {
            let body = json!({"url": "about:blank", "rules": rules});
            let checked = serde_json::from_value(body)
                .map_err(|error| McpSetupError::ComputerRules(error.to_string()))
                .and_then(|body| {
                    crate::computer::Setup::parse(&body)
                        .map_err(|error| McpSetupError::ComputerRules(error.to_string()))
                });
            checked?;
        }
        let pool = options
            .browser
            .map(|browser| Arc::new(ComputerPool::new(browser)));
        let computers = ComputerTable::new(
            pool.clone()
                .unwrap_or_else(|| Arc::new(ComputerPool::new(BrowserOptions::default()))),
            options.trajectories.clone(),
        );
        Ok(McpServer {
            inner: Arc::new(Inner {
                sandbox,
                dispatcher: Dispatcher::new(Arc::new(registry)),
                limits,
                pool,
                computer_rules: options.computer_rules,
                trajectories: options.trajectories,
                allowed_hosts: options.allowed_hosts,
                // All sessions declare the operator's one quota: the count bounds the bytes.
                budget: Budget::new(Capacity {
                    workspaces: options.max_sessions_total,
                    bytes: u64::MAX,
                }),
            }),
            sessions: Arc::default(),
            computers,
        })
    }

    /// The same server with empty session tables (for a new MCP connection).
    pub fn with_own_sessions(&self) -> McpServer {
        McpServer {
            inner: self.inner.clone(),
            sessions: Arc::default(),
            computers: ComputerTable::new(self.computer_pool(), self.inner.trajectories.clone()),
        }
    }

    fn computer_pool(&self) -> Arc<ComputerPool> {
        match &self.inner.pool {
            Some(pool) => pool.clone(),
            None => Arc::new(ComputerPool::new(BrowserOptions::default())),
        }
    }

    /// Stops Chromium if the computer tools started it (every computer session ends).
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.inner.pool {
            pool.shutdown().await;
        }
    }

    fn execute_code_tool(&self) -> Tool {
        let names = self.inner.dispatcher.registry().names();
        let tools = if names.is_empty() {
            "No tools are declared.".to_owned()
        } else {
            format!(
                "Tools callable from the code (as global async functions, e.g. `await {}(...)`): {}.",
                names[0],
                names.join(", ")
            )
        };
        let description = format!(
            "Run Python or JavaScript in an isolated WebAssembly sandbox (no network or \
             environment; files only in /workspace, the working directory) and return stdout, \
             stderr, the value of the last expression and the files the program wrote. Pass \
             `files` to put files in /workspace first, `session_id` to keep variables and files \
             between calls (a REPL). {tools}"
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "language": {
                    "type": "string", "enum": ["python", "python-lite", "javascript"], "default": "python",
                    "description": "Language of `code`: `python` (CPython 3.15 with numpy, pandas and matplotlib; numpy's default integer is 32-bit, pass dtype=np.int64 for large sums), `python-lite` (RustPython: faster start, standard library only) or `javascript`."
                },
                "code": {"type": "string", "description": "The program. Its last expression is the result."},
                "session_id": {
                    "type": "string",
                    "description": "Any id you choose: calls with the same id share variables, imports and files."
                },
                "files": {
                    "type": "object",
                    "description": "Files to put in /workspace before the code runs: relative path → its text, or {\"base64\": \"…\"} for bytes.",
                    "additionalProperties": {
                        "anyOf": [
                            {"type": "string"},
                            {"type": "object", "properties": {"base64": {"type": "string"}}, "required": ["base64"], "additionalProperties": false},
                            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}
                        ]
                    }
                }
            },
            "required": ["code"],
            "additionalProperties": false
        });
        let schema = match schema {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        Tool::new("execute_code", description, schema)
    }

    fn session(&self, id: &str, language: Language) -> Result<Session, String> {
        let mut table = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((existing, session, _)) = table.by_id.get(id) {
            if *existing != language {
                return Err(format!(
                    "session {id:?} runs {}, not {}; use another session_id",
                    existing.as_str(),
                    language.as_str()
                ));
            }
            return Ok(session.clone());
        }
        if table.order.len() >= MAX_SESSIONS {
            let oldest = table.order.remove(0);
            table.by_id.remove(&oldest);
        }
        let reservation = self
            .inner
            .budget
            .reserve(self.inner.limits.workspace_bytes)
            .map_err(|error| match error {
                BudgetError::TooMany { max } => format!(
                    "this server keeps at most {max} REPL sessions across all its connections, \
                     and they are all in use; reuse a session_id you already have, or run \
                     without session_id (a fresh workspace each call)"
                ),
                other => format!("cannot start session {id:?}: {other}"),
            })?;
        let spec = SessionSpec::new(language, self.inner.dispatcher.clone())
            .limits(self.inner.limits)
            .workspace(self.new_workspace());
        let session = self.inner.sandbox.session(spec);
        table
            .by_id
            .insert(id.to_owned(), (language, session.clone(), reservation));
        table.order.push(id.to_owned());
        Ok(session)
    }

    fn new_workspace(&self) -> Workspace {
        Workspace::new(Quota {
            bytes: self.inner.limits.workspace_bytes,
            files: self.inner.limits.workspace_files,
        })
    }

    async fn execute_code(
        &self,
        arguments: serde_json::Map<String, Value>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let code = match arguments.get("code") {
            Some(Value::String(code)) => code.clone(),
            _ => {
                return Err(McpError::invalid_params(
                    "`code` (a string) is required",
                    None,
                ));
            }
        };
        let language = match arguments.get("language") {
            None | Some(Value::Null) => Language::Python,
            Some(Value::String(name)) => Language::parse(name).ok_or_else(|| {
                McpError::invalid_params(
                    format!("unknown language {name:?}; use python, python-lite or javascript"),
                    None,
                )
            })?,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "`language` must be a string",
                    None,
                ));
            }
        };
        if let Some(key) = arguments
            .keys()
            .find(|key| !matches!(key.as_str(), "code" | "language" | "session_id" | "files"))
        {
            return Err(McpError::invalid_params(
                format!(
                    "unknown argument `{key}`; execute_code takes language, code, session_id, files"
                ),
                None,
            ));
        }
        let approver = Arc::new(ElicitingApprover {
            peer: context.peer.clone(),
            elicitation: context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form),
            refused_unasked: AtomicBool::new(false),
        });
        // No approver on the request: `ask` calls park on the execution's own broker and
        // are decided below (the same path for one-off runs and shared sessions, whose
        // approver would otherwise be fixed when the session is made).
        let session = match arguments.get("session_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => match self.session(id, language) {
                Ok(session) => Some(session),
                Err(message) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(message)]));
                }
            },
            Some(_) => {
                return Err(McpError::invalid_params(
                    "`session_id` must be a string",
                    None,
                ));
            }
        };
        let workspace = session
            .as_ref()
            .and_then(|session| session.workspace().cloned())
            .unwrap_or_else(|| self.new_workspace());
        if let Some(files) = arguments.get("files")
            && let Err(message) = files::write_inputs(&workspace, files)
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(message)]));
        }
        let before = files::snapshot(&workspace);
        let execution = match &session {
            Some(session) => session.execute(code),
            None => self.inner.sandbox.execute(
                ExecutionRequest::new(language, code, self.inner.dispatcher.clone())
                    .limits(self.inner.limits)
                    .workspace(workspace.clone()),
            ),
        };

        let (mut events, control, done) = execution.into_parts();
        let progress_token = context.meta.get_progress_token();
        let started = Instant::now();
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut cancelled = false;
        let mut output_bytes = 0usize;
        let result = loop {
            tokio::select! {
                () = context.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    control.cancel();
                }
                event = events.recv() => match event {
                    Some(ExecutionEvent::Completed(result)) => break result,
                    Some(ExecutionEvent::OutputDelta { text, .. }) => output_bytes += text.len(),
                    Some(ExecutionEvent::ToolCall { id, name, input, locus: Locus::Client, .. }) if name == "user_ask" => {
                        let peer = context.peer.clone();
                        let elicitation = approver.elicitation;
                        let control = control.clone();
                        tokio::spawn(async move {
                            let answer = ask::answer(&peer, elicitation, id, &input).await;
                            // Refused only when the call stopped waiting (timeout, cancel).
                            let _ = control.submit_tool_results(vec![answer]);
                        });
                    }
                    Some(ExecutionEvent::ApprovalRequired { approval_id, call_id, tool, input, reason }) => {
                        let request = ApprovalRequest { approval_id, call_id, tool, input, reason };
                        let approver = approver.clone();
                        let control = control.clone();
                        // Asked on the side: the run must stay cancellable while a human
                        // thinks, and several calls may wait at once.
                        tokio::spawn(async move {
                            let decision = approver.ask(&request).await;
                            // Unknown means the call stopped waiting (timeout, cancel).
                            let _ = control.decide(&request.approval_id, decision);
                        });
                    }
                    Some(_) => {}
                    None => break done.await,
                },
                _ = ticker.tick(), if progress_token.is_some() => {
                    if let Some(token) = &progress_token {
                        let seconds = started.elapsed().as_secs_f64();
                        let mut param = ProgressNotificationParam::new(token.clone(), seconds.floor());
                        param.message = Some(format!(
                            "running for {seconds:.0} s; {output_bytes} bytes of output so far"
                        ));
                        // A client that stopped listening does not stop the run.
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
            }
        };
        let mut answer = tool_result(&result, approver.refused_unasked.load(Ordering::SeqCst));
        files::attach(
            &mut answer,
            &workspace,
            &files::written(&workspace, &before),
        );
        Ok(answer)
    }
}

/// The tool result for an execution: text for the model, the whole result as
/// `structuredContent`, `isError` unless it completed.
fn tool_result(result: &ExecutionResult, refused_unasked: bool) -> CallToolResult {
    let mut text = String::new();
    if !result.stdout.is_empty() {
        text.push_str(&clip(&result.stdout));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !result.stderr.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&clip(&result.stderr));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    match result.result_encoding {
        Some(ResultEncoding::Json) => text.push_str(&format!("[result] {}\n", result.result)),
        Some(ResultEncoding::Repr) => text.push_str(&format!(
            "[result] {}\n",
            result.result.as_str().unwrap_or_default()
        )),
        None => {}
    }
    if let Some(error) = &result.error {
        match result.status {
            ExecutionStatus::LimitExceeded => text.push_str(&format!(
                "[limit exceeded: {}] {}\n",
                result.limit.map(|limit| limit.as_str()).unwrap_or("?"),
                error.message
            )),
            _ if !error.traceback.is_empty() => {
                text.push_str(&error.traceback);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            _ => text.push_str(&format!("{}: {}\n", error.error_type, error.message)),
        }
    }
    if result.truncated {
        text.push_str("[note] output was cut to fit max_output_bytes\n");
    }
    if refused_unasked {
        text.push_str(
            "[note] calls to tools that need approval were refused: this MCP client does not \
             support elicitation, so nobody could be asked\n",
        );
    }
    if text.is_empty() {
        text.push_str(&format!("[{}] no output\n", result.status.as_str()));
    }
    let structured = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut tool_result = if result.status == ExecutionStatus::Completed {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    tool_result.structured_content = Some(structured);
    tool_result
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(TEXT_OUTPUT_CHARS) {
        Some((at, _)) => format!(
            "{}… [{} more bytes in structuredContent]",
            &text[..at],
            text.len() - at
        ),
        None => text.to_owned(),
    }
}

/// Decides `ask` calls by asking the MCP client's user (elicitation), or refuses them
/// when the client cannot ask.
struct ElicitingApprover {
    peer: Peer<RoleServer>,
    elicitation: bool,
    refused_unasked: AtomicBool,
}

impl std::fmt::Debug for ElicitingApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitingApprover")
            .field("elicitation", &self.elicitation)
            .finish_non_exhaustive()
    }
}

impl ElicitingApprover {
    async fn ask(&self, request: &ApprovalRequest) -> Decision {
        {
            if !self.elicitation {
                self.refused_unasked.store(true, Ordering::SeqCst);
                return Decision::Deny;
            }
            let mut input = request.input.to_string();
            if input.len() > 2000 {
                let cut = input
                    .char_indices()
                    .nth(2000)
                    .map_or(input.len(), |(at, _)| at);
                input.truncate(cut);
                input.push('…');
            }
            let message = format!(
                "Code running in Cordon's sandbox wants to call `{}` ({}).\nInput: {input}\n\
                 Accept to allow this call; decline to refuse it.",
                request.tool, request.reason
            );
            elicit(&self.peer, message).await
        }
    }
}

/// Asks the client's user to approve (a form elicitation with one `approve` field).
/// Declined, cancelled, timed out or failed: deny wins when nobody said yes.
async fn elicit(peer: &Peer<RoleServer>, message: String) -> Decision {
    let schema = ElicitationSchema::builder()
        .bool_property("approve", |schema| {
            schema
                .description("Allow this (accepting with no value allows it too)")
                .with_default(true)
        })
        .build();
    let Ok(schema) = schema else {
        return Decision::Deny;
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    match peer
        .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
        .await
    {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            let refused = answer
                .content
                .as_ref()
                .and_then(|content| content.get("approve"))
                .and_then(Value::as_bool)
                == Some(false);
            if refused {
                Decision::Deny
            } else {
                Decision::Approve
            }
        }
        _ => Decision::Deny,
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.inner.pool.is_some() {
                "Cordon runs code in a WebAssembly sandbox and drives isolated browsers. Use \
                 execute_code to run Python or JavaScript; the last expression is the result; \
                 declared tools are async functions the code can await. Use computer_open to \
                 open a browser at a URL, computer to click, type, scroll and read the next \
                 screenshot, and computer_close when done."
            } else {
                "Cordon runs code in a WebAssembly sandbox. Use execute_code to run Python or \
                 JavaScript; the last expression is the result; declared tools are async \
                 functions the code can await."
            })
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(protocol_versions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = vec![self.execute_code_tool()];
        if self.inner.pool.is_some() {
            tools.extend(computer::tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let computers = ComputerTools {
            table: &self.computers,
            rules: &self.inner.computer_rules,
        };
        let computing = self.inner.pool.is_some();
        match request.name.as_ref() {
            "execute_code" => self
                .execute_code(arguments, context)
                .await
                .map(CallToolResponse::from),
            "computer_open" if computing => Ok(CallToolResponse::from(
                computers.open(arguments, &context).await,
            )),
            "computer" if computing => Ok(CallToolResponse::from(
                computers.act(arguments, &context).await,
            )),
            "computer_close" if computing => {
                Ok(CallToolResponse::from(computers.close(arguments).await))
            }
            other => Err(McpError::invalid_params(
                if computing {
                    format!(
                        "unknown tool `{other}`; this server has execute_code, computer_open, \
                         computer and computer_close"
                    )
                } else {
                    format!("unknown tool `{other}`; this server has execute_code")
                },
                None,
            )),
        }
    }
}

/// rmcp answers a session `DELETE` with `202 Accepted`; clients (the Python SDK among
/// them) expect `200` or `204` for a terminated session and log a failure otherwise.
async fn terminated_is_no_content(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    response
}

/// A failure serving MCP (the transport, not a tool call).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpServeError {
    /// The client's `initialize` failed or the connection broke during it.
    #[error("MCP session setup failed: {0}")]
    Initialize(String),
    /// The serving task failed.
    #[error("MCP server task failed: {0}")]
    Task(String),
    /// The HTTP listener failed.
    #[error("MCP HTTP server: {0}")]
    Io(#[from] std::io::Error),
}

impl McpServer {
    /// Serves one client on stdin/stdout until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        use rmcp::ServiceExt;
        let this = self.clone();
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|error| McpServeError::Initialize(error.to_string()))?;
        let waited = running
            .waiting()
            .await
            .map_err(|error| McpServeError::Task(error.to_string()));
        this.shutdown().await;
        waited?;
        Ok(())
    }

    /// The Streamable HTTP endpoint as an axum router serving `/mcp`. `guard` judges the
    /// `Host` and `Origin` of every request first (DNS-rebinding and cross-site
    /// protection, as the MCP transport spec requires); refusals are `403` with a JSON
    /// body `{"type", "message"}`.
    pub fn streamable_http_router(
        self,
        guard: HostGuard,
        cancel: tokio_util::sync::CancellationToken,
    ) -> axum::Router {
        use rmcp::transport::StreamableHttpServerConfig;
        use rmcp::transport::streamable_http_server::StreamableHttpService;
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        // `guard` is the one judge of Host and Origin (the same code as `cordon serve`'s):
        // rmcp's own, narrower host list would refuse the names `--allow-host` adds.
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(cancel)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        let service = StreamableHttpService::new(
            move || Ok(self.with_own_sessions()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(terminated_is_no_content))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(guard),
                guard_requests,
            ))
    }

    /// Serves Streamable HTTP at `/mcp` on `listener` until `shutdown` resolves.
    pub async fn serve_http(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpServeError> {
        let cancel = tokio_util::sync::CancellationToken::new();
        let this = self.clone();
        let guard = HostGuard::new(listener.local_addr()?, &self.inner.allowed_hosts);
        let router = self.streamable_http_router(guard, cancel.clone());
        use axum::serve::ListenerExt;
        // Small SSE writes must not wait for delayed ACKs (Nagle).
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                cancel.cancel();
            })
            .await;
        this.shutdown().await;
        served?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordon_protocol::execution::{ErrorInfo, Usage};

    #[test]
    fn errors_are_tool_results_with_is_error() {
        let result = ExecutionResult {
            status: ExecutionStatus::Error,
            limit: None,
            stdout: "before\n".into(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "ValueError".into(),
                message: "bad".into(),
                traceback: "Traceback …\nValueError: bad".into(),
            }),
            tool_calls: vec![],
            usage: Usage::default(),
            truncated: false,
        };
        let tool = tool_result(&result, false);
        assert_eq!(tool.is_error, Some(true));
        assert_eq!(
            tool.structured_content
                .as_ref()
                .map(|v| v["status"].clone()),
            Some(json!("error"))
        );
    }

    #[test]
    fn truncated_results_say_so() {
        let mut result = ExecutionResult {
            status: ExecutionStatus::Error,
            limit: None,
            stdout: String::new(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "ValueError".into(),
                message: "xxx… [29999000 bytes cut: max_output_bytes]".into(),
                traceback: String::new(),
            }),
            tool_calls: vec![],
            usage: Usage::default(),
            truncated: true,
        };
        let text = |result: &ExecutionResult| format!("{:?}", tool_result(result, false).content);
        assert!(text(&result).contains("cut to fit max_output_bytes"));
        result.truncated = false;
        assert!(!text(&result).contains("[note] output was cut"));
    }

    /// Each connection has its own session table: many connections together still cannot
    /// keep more sessions (and workspaces) than the server-wide cap, and a connection that
    /// goes gives its sessions' places back.
    #[tokio::test]
    async fn repl_sessions_are_capped_across_connections() -> Result<(), Box<dyn std::error::Error>>
    {
        let sandbox =
            Sandbox::new(cordon_sandbox::SandboxConfig::default().preload(Vec::new())).await?;
        let options = McpOptions::default().browser(None).max_sessions_total(2);
        let server = McpServer::with_options(
            sandbox,
            ToolRegistry::new(Vec::new())?,
            Limits::default(),
            options,
        )?;
        let (first, second, third) = (
            server.with_own_sessions(),
            server.with_own_sessions(),
            server.with_own_sessions(),
        );
        assert!(first.session("a", Language::Javascript).is_ok());
        assert!(second.session("b", Language::Javascript).is_ok());
        let refused = third
            .session("c", Language::Javascript)
            .err()
            .unwrap_or_default();
        assert!(refused.contains("at most 2 REPL sessions"), "{refused}");
        assert!(
            first.session("a", Language::Javascript).is_ok(),
            "its own session is kept"
        );
        drop(second);
        assert!(third.session("c", Language::Javascript).is_ok());
        Ok(())
    }

    #[test]
    fn offers_only_handshake_era_versions() {
        let versions: Vec<&str> = protocol_versions().iter().map(|v| v.as_str()).collect();
        assert_eq!(
            versions,
            ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
        );
    }
}
