//! The session protocol: a conversation Cordon keeps, for clients that keep no history (a
//! UI, an agent that restarts).
//!
//! A client creates a session with its first messages and its own tools, then continues it
//! with new messages and the answers to the calls it was handed. Each turn is a stream of
//! [`SessionEvent`]s. Three kinds of tools meet in a turn:
//!
//! - *application-side* tools, declared by the client: the call goes to the client
//!   (`tool_call`, then `turn_stop tool_use`), which answers with a `tool` message;
//! - *trusted server-side* tools (operator tools with policy `allow`, code execution): run
//!   inline, their `tool_result` is emitted, the client does nothing;
//! - *permission-required* server-side tools (operator tools with policy `ask`): the call
//!   goes to the client like an application-side one, which answers with a
//!   `tool_permission` message; granted, Cordon runs the tool.
//!
//! The state ([`SessionState`]) is plain data: the caller keeps it (the server in its
//! store) between turns. [`SessionState::check`] decides whether a client message can be
//! applied at all before anything changes or runs.

use std::collections::HashSet;
use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::conversation::{
    ContentBlock, Extra, FunctionTool, Message, Request, Role, System, ToolCall, ToolDefinition,
    ToolResult, ToolResultContent, anthropic,
};
use cordon_protocol::tool::Policy;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::call_ids::check_turn;
use crate::run::{call_operator, error_result, operator_function};
use cordon_core::ids::fresh_id;

use crate::{Credential, Gateway, Inner, ptc};

/// The code tool's name for the model in sessions.
use cordon_protocol::conversation::CODE_TOOL;
/// Output tokens per model turn when the session does not say.
pub const DEFAULT_SESSION_MAX_TOKENS: u64 = 4096;
/// Client tools one session may declare.
const MAX_SESSION_TOOLS: usize = 128;

/// How a call the client must act on is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A client tool: answered by a `tool` message with its result.
    Application,
    /// An operator tool with policy `ask`: answered by a `tool_permission` message.
    Permission,
    /// A trusted server-side tool: Cordon runs it (never pending).
    Server,
}

impl CallKind {
    fn as_str(self) -> &'static str {
        match self {
            CallKind::Application => "application",
            CallKind::Permission => "permission",
            CallKind::Server => "server",
        }
    }
}

/// A call waiting for the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The model's call id (`toolCallId`).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// How the client answers it.
    pub kind: CallKind,
}

/// Everything a session is between two turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// `sess_…`.
    pub id: String,
    /// The model asked.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// Output tokens per model turn.
    pub max_tokens: u64,
    /// The client's (application-side) tools.
    pub tools: Vec<FunctionTool>,
    /// The conversation as the model sees it.
    pub messages: Vec<Message>,
    /// Calls of the last model turn waiting for the client, in the model's order.
    pub pending: Vec<PendingCall>,
    /// Results of that turn's calls that ran inline, held until the client answers the rest
    /// (the model then reads every result of its turn at once).
    pub held: Vec<ToolResult>,
    /// The code-execution container (REPL state) while it lives.
    pub container: Option<String>,
}

/// One event of a turn, as the session stream sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// The session's id (first event of every stream).
    Session(String),
    /// Text the model wrote.
    TextDelta(String),
    /// A call the model made.
    ToolCall {
        /// `toolCallId`.
        id: String,
        /// Tool name.
        name: String,
        /// Its input.
        input: Value,
        /// Who answers it.
        kind: CallKind,
    },
    /// The result of a call Cordon ran (a trusted tool, or a granted or denied one).
    ToolResult {
        /// `toolCallId`.
        id: String,
        /// The result text.
        content: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// The turn ended.
    TurnStop {
        /// `tool_use`, `end_turn`, `max_turns` or `error`.
        reason: &'static str,
        /// Why, for `error` and `max_turns`.
        message: Option<String>,
    },
}

impl SessionEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            SessionEvent::Session(_) => "session",
            SessionEvent::TextDelta(_) => "text_delta",
            SessionEvent::ToolCall { .. } => "tool_call",
            SessionEvent::ToolResult { .. } => "tool_result",
            SessionEvent::TurnStop { .. } => "turn_stop",
        }
    }

    /// The SSE event data.
    pub fn data(&self) -> Value {
        match self {
            SessionEvent::Session(id) => json!({"sessionId": id}),
            SessionEvent::TextDelta(text) => json!({"text": text}),
            SessionEvent::ToolCall {
                id,
                name,
                input,
                kind,
            } => {
                json!({"toolCallId": id, "name": name, "input": input, "kind": kind.as_str()})
            }
            SessionEvent::ToolResult {
                id,
                content,
                is_error,
            } => json!({"toolCallId": id, "content": content, "isError": is_error}),
            SessionEvent::TurnStop { reason, message } => {
                let mut data = json!({"stopReason": reason});
                if let Some(message) = message {
                    data["message"] = json!(message);
                }
                data
            }
        }
    }
}

/// Why a client message cannot be applied (nothing of it was).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The message is malformed, or does not fit the pending calls.
    #[error("{0}")]
    BadRequest(String),
    /// It answers a call twice.
    #[error("{0}")]
    Conflict(String),
}

impl SessionError {
    /// The HTTP status for it.
    pub fn status(&self) -> u16 {
        match self {
            SessionError::BadRequest(_) => 400,
            SessionError::Conflict(_) => 409,
        }
    }
}

fn bad(message: impl Into<String>) -> SessionError {
    SessionError::BadRequest(message.into())
}

/// One message of a client's request.
#[derive(Debug, Clone, PartialEq)]
enum InputMessage {
    User(Vec<ContentBlock>),
    Tool {
        id: String,
        content: String,
        is_error: bool,
    },
    Permission {
        id: String,
        granted: bool,
        reason: Option<String>,
    },
}

/// What a client sent: its messages, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInput {
    messages: Vec<InputMessage>,
}

impl SessionInput {
    /// Parses `{"messages": [...]}` (the body of `POST /session/{id}`, and that part of
    /// `PUT /session`).
    pub fn parse(body: &Value) -> Result<SessionInput, SessionError> {
        let Some(items) = body.get("messages").and_then(Value::as_array) else {
            return Err(bad("`messages` must be an array of messages"));
        };
        let mut messages = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            let at = format!("messages[{n}]");
            let text = |key: &str| item.get(key).and_then(Value::as_str);
            let message = match text("role") {
                Some("user") => {
                    let content = match item.get("content") {
                        Some(Value::String(text)) => vec![ContentBlock::text(text.clone())],
                        Some(Value::Array(blocks)) => anthropic::decode_blocks(blocks)
                            .map_err(|e| bad(format!("{at}.content: {e}")))?,
                        _ => {
                            return Err(bad(format!(
                                "{at}: a user message needs `content` (text or content blocks)"
                            )));
                        }
                    };
                    if content
                        .iter()
                        .any(|b| matches!(b, ContentBlock::ToolResult(_)))
                    {
                        return Err(bad(format!(
                            "{at}: tool results are `{{\"role\": \"tool\", \"toolCallId\", \
                             \"content\"}}` messages, not user content"
                        )));
                    }
                    InputMessage::User(content)
                }
                Some("tool") => InputMessage::Tool {
                    id: text("toolCallId")
                        .ok_or_else(|| bad(format!("{at}: a tool message needs `toolCallId`")))?
                        .to_owned(),
                    content: match item.get("content") {
                        Some(Value::String(text)) => text.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    },
                    is_error: item
                        .get("isError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
                Some("tool_permission") => InputMessage::Permission {
                    id: text("toolCallId")
                        .ok_or_else(|| {
                            bad(format!(
                                "{at}: a tool_permission message needs `toolCallId`"
                            ))
                        })?
                        .to_owned(),
                    granted: item
                        .get("granted")
                        .and_then(Value::as_bool)
                        .ok_or_else(|| {
                            bad(format!(
                                "{at}: a tool_permission message needs `granted` (true or false)"
                            ))
                        })?,
                    reason: text("reason").map(str::to_owned),
                },
                Some(other) => {
                    return Err(bad(format!(
                        "{at}: unknown role `{other}` (user, tool or tool_permission)"
                    )));
                }
                None => return Err(bad(format!("{at}: `role` is missing"))),
            };
            messages.push(message);
        }
        Ok(SessionInput { messages })
    }
}

impl SessionState {
    /// A new session from the body of `PUT /session` (`messages`, `tools`, `system`,
    /// `model`, `max_tokens`); `default_model` when the body names none.
    pub fn create(
        body: &Value,
        default_model: Option<&str>,
    ) -> Result<(SessionState, SessionInput), SessionError> {
        if !body.is_object() {
            return Err(bad("the body must be a JSON object"));
        }
        let model = match body.get("model") {
            Some(Value::String(model)) if !model.is_empty() => model.clone(),
            None | Some(Value::Null) => default_model
                .map(str::to_owned)
                .ok_or_else(|| bad("`model` is required (this server has no default model)"))?,
            Some(_) => return Err(bad("`model` must be a string")),
        };
        let system = match body.get("system") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => return Err(bad("`system` must be a string")),
        };
        let max_tokens = match body.get("max_tokens") {
            None | Some(Value::Null) => DEFAULT_SESSION_MAX_TOKENS,
            Some(value) => value
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| bad("`max_tokens` must be a positive integer"))?,
        };
        let tools = parse_tools(body.get("tools"))?;
        let input = SessionInput::parse(body)?;
        let state = SessionState {
            id: fresh_id("sess"),
            model,
            system,
            max_tokens,
            tools,
            messages: Vec::new(),
            pending: Vec::new(),
            held: Vec::new(),
            container: None,
        };
        state.check(&input)?;
        Ok((state, input))
    }

    /// Whether `input` can be applied: every pending call answered once, in the way its
    /// kind is answered, no answer to anything else, and something to do.
    pub fn check(&self, input: &SessionInput) -> Result<(), SessionError> {
        let mut answered: HashSet<&str> = HashSet::new();
        let mut new_text = false;
        for message in &input.messages {
            let (id, kind) = match message {
                InputMessage::User(_) => {
                    new_text = true;
                    continue;
                }
                InputMessage::Tool { id, .. } => (id, CallKind::Application),
                InputMessage::Permission { id, .. } => (id, CallKind::Permission),
            };
            let Some(call) = self.pending.iter().find(|c| &c.id == id) else {
                return Err(bad(format!(
                    "`{id}` is not a call waiting for an answer{}",
                    self.waiting()
                )));
            };
            if call.kind != kind {
                let wanted = match call.kind {
                    CallKind::Permission => "a `tool_permission` message (granted: true or false)",
                    _ => "a `tool` message with its result",
                };
                return Err(bad(format!(
                    "`{id}` ({}) is answered with {wanted}",
                    call.name
                )));
            }
            if !answered.insert(id) {
                return Err(SessionError::Conflict(format!(
                    "`{id}` is answered more than once"
                )));
            }
        }
        let unanswered: Vec<&str> = self
            .pending
            .iter()
            .filter(|c| !answered.contains(c.id.as_str()))
            .map(|c| c.id.as_str())
            .collect();
        if !unanswered.is_empty() {
            return Err(bad(format!(
                "every pending call must be answered in the same request; unanswered: {}",
                unanswered.join(", ")
            )));
        }
        let retry = self.messages.last().is_some_and(|m| m.role == Role::User);
        if self.pending.is_empty() && !new_text && !retry {
            return Err(bad(
                "nothing to do: send a user message (no call waits for an answer)",
            ));
        }
        Ok(())
    }

    fn waiting(&self) -> String {
        if self.pending.is_empty() {
            " (none is)".to_owned()
        } else {
            let ids: Vec<&str> = self.pending.iter().map(|c| c.id.as_str()).collect();
            format!(" (waiting: {})", ids.join(", "))
        }
    }

    /// The history for `GET /session/{id}`: messages with their tool calls and results,
    /// and the pending calls.
    pub fn to_json(&self) -> Value {
        let mut history = Vec::new();
        for message in &self.messages {
            match message.role {
                Role::Assistant => {
                    let content: Vec<Value> = message
                        .content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::Text { text, .. } => {
                                Some(json!({"type": "text", "text": text}))
                            }
                            ContentBlock::ToolCall(c) => Some(json!({
                                "type": "tool_call", "toolCallId": c.id, "name": c.name,
                                "input": c.input,
                            })),
                            _ => None,
                        })
                        .collect();
                    history.push(json!({"role": "assistant", "content": content}));
                }
                Role::User => {
                    let mut user = Vec::new();
                    for block in &message.content {
                        match block {
                            ContentBlock::ToolResult(r) => history.push(json!({
                                "role": "tool", "toolCallId": r.call_id,
                                "content": r.content.text(), "isError": r.is_error,
                            })),
                            other => user.push(other.clone()),
                        }
                    }
                    if !user.is_empty() {
                        let content = match user.as_slice() {
                            [ContentBlock::Text { text, .. }] => json!(text),
                            blocks => Value::Array(anthropic::encode_blocks(blocks, false)),
                        };
                        history.push(json!({"role": "user", "content": content}));
                    }
                }
            }
        }
        let pending: Vec<Value> = self
            .pending
            .iter()
            .map(|c| {
                json!({"toolCallId": c.id, "name": c.name, "input": c.input,
                       "kind": c.kind.as_str()})
            })
            .collect();
        json!({
            "id": self.id,
            "model": self.model,
            "messages": history,
            "pending": pending,
            "tools": self.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
        })
    }
}

fn parse_tools(value: Option<&Value>) -> Result<Vec<FunctionTool>, SessionError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(bad("`tools` must be an array of tool declarations")),
    };
    if items.len() > MAX_SESSION_TOOLS {
        return Err(bad(format!(
            "at most {MAX_SESSION_TOOLS} tools per session"
        )));
    }
    let mut names = HashSet::new();
    let mut tools = Vec::new();
    for (n, item) in items.iter().enumerate() {
        let name = item
            .get("name")
            .and_then(Value::as_str)
            .filter(|name| {
                !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            })
            .ok_or_else(|| {
                bad(format!(
                    "tools[{n}]: `name` must be 1-64 letters, digits, `_` or `-`"
                ))
            })?;
        if name == CODE_TOOL {
            return Err(bad(format!(
                "tools[{n}]: `{CODE_TOOL}` is the server's own code tool"
            )));
        }
        if !names.insert(name) {
            return Err(bad(format!("tools[{n}]: `{name}` is declared twice")));
        }
        let schema = item
            .get("input_schema")
            .or_else(|| item.get("parameters"))
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        if !schema.is_object() {
            return Err(bad(format!(
                "tools[{n}]: `input_schema` must be a JSON Schema object"
            )));
        }
        tools.push(FunctionTool {
            name: name.to_owned(),
            description: item
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            input_schema: schema,
            allowed_callers: Vec::new(),
            extra: Extra::new(),
        });
    }
    Ok(tools)
}

fn send(events: &UnboundedSender<SessionEvent>, event: SessionEvent) {
    // A client that went away does not stop the turn: its state is still kept.
    let _ = events.send(event);
}

impl Gateway {
    /// Runs one turn of a session: applies `input` (checked with
    /// [`SessionState::check`] first), then asks the model, runs trusted tools, until the
    /// model ends its turn, a call needs the client, or the round cap. Emits the events
    /// of the turn (not the `session` event) and leaves `state` ready to be kept.
    pub async fn session_turn(
        &self,
        state: &mut SessionState,
        input: SessionInput,
        credential: Option<Credential>,
        events: &UnboundedSender<SessionEvent>,
    ) {
        let credential = credential.filter(|_| self.inner.options.forward_client_key);
        session_turn(&self.inner, state, input, credential.as_ref(), events).await;
    }
}

async fn session_turn(
    gw: &Inner,
    state: &mut SessionState,
    input: SessionInput,
    credential: Option<&Credential>,
    events: &UnboundedSender<SessionEvent>,
) {
    // 1. The client's answers, in the model's order, after the results that ran inline.
    let mut results: Vec<ContentBlock> = std::mem::take(&mut state.held)
        .into_iter()
        .map(ContentBlock::ToolResult)
        .collect();
    let mut user = Vec::new();
    let pending = std::mem::take(&mut state.pending);
    for call in &pending {
        let answer = input.messages.iter().find(|m| match m {
            InputMessage::Tool { id, .. } | InputMessage::Permission { id, .. } => *id == call.id,
            InputMessage::User(_) => false,
        });
        let result = match answer {
            Some(InputMessage::Tool {
                content, is_error, ..
            }) => ToolResult {
                call_id: call.id.clone(),
                content: ToolResultContent::Text(content.clone()),
                is_error: *is_error,
                extra: Extra::new(),
            },
            Some(InputMessage::Permission { granted: true, .. }) => {
                let tool_call = ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    caller: None,
                    extra: Extra::new(),
                };
                let result = call_operator(gw, &state.id, &tool_call, true).await;
                emit_result(events, &result);
                result
            }
            Some(InputMessage::Permission { reason, .. }) => {
                let mut text = "the user denied this call".to_owned();
                if let Some(reason) = reason.as_deref().filter(|r| !r.is_empty()) {
                    text.push_str(&format!(": {reason}"));
                }
                let result = error_result(&call.id, text);
                emit_result(events, &result);
                result
            }
            // `check` makes every pending call answered.
            Some(InputMessage::User(_)) | None => {
                error_result(&call.id, "the client gave no answer".to_owned())
            }
        };
        results.push(ContentBlock::ToolResult(result));
    }
    for message in input.messages {
        if let InputMessage::User(content) = message {
            user.extend(content);
        }
    }
    results.extend(user);
    if !results.is_empty() {
        push_user(&mut state.messages, results);
    }

    // 2. Model turns.
    let offered = offered_tools(gw, state);
    let max = gw.options.max_tool_rounds;
    for _round in 1..=max {
        let request = Request {
            model: state.model.clone(),
            system: state.system.clone().map(System::Text),
            messages: state.messages.clone(),
            tools: offered.clone(),
            max_tokens: Some(state.max_tokens),
            ..Request::default()
        };
        // A turn reusing a call id would let one answer stand for two calls: nothing of it
        // runs or is kept, and the client may send a message to try again.
        let checked = gw
            .upstream
            .call(&request, credential)
            .await
            .and_then(|turn| {
                check_turn(&state.messages, &turn)?;
                Ok(turn)
            });
        let turn = match checked {
            Ok(turn) => turn,
            Err(error) => {
                send(
                    events,
                    SessionEvent::TurnStop {
                        reason: "error",
                        message: Some(error.to_string()),
                    },
                );
                return;
            }
        };
        for block in &turn.content {
            if let ContentBlock::Text { text, .. } = block
                && !text.is_empty()
            {
                send(events, SessionEvent::TextDelta(text.clone()));
            }
        }
        state
            .messages
            .push(Message::new(Role::Assistant, turn.content.clone()));
        let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();
        if calls.is_empty() {
            send(
                events,
                SessionEvent::TurnStop {
                    reason: "end_turn",
                    message: None,
                },
            );
            return;
        }
        let mut ran = Vec::new();
        for call in &calls {
            let kind = kind_of(gw, state, call);
            send(
                events,
                SessionEvent::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    kind,
                },
            );
            match kind {
                CallKind::Server => {
                    let result = run_trusted(gw, state, call).await;
                    emit_result(events, &result);
                    ran.push(result);
                }
                CallKind::Permission | CallKind::Application => {
                    state.pending.push(PendingCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: call.input.clone(),
                        kind,
                    });
                }
            }
        }
        if !state.pending.is_empty() {
            state.held = ran;
            send(
                events,
                SessionEvent::TurnStop {
                    reason: "tool_use",
                    message: None,
                },
            );
            return;
        }
        push_user(
            &mut state.messages,
            ran.into_iter().map(ContentBlock::ToolResult).collect(),
        );
    }
    send(
        events,
        SessionEvent::TurnStop {
            reason: "max_turns",
            message: Some(format!(
                "the tool-round limit ({max} model turns per request) was reached; send a \
                 message to go on"
            )),
        },
    );
}

fn emit_result(events: &UnboundedSender<SessionEvent>, result: &ToolResult) {
    send(
        events,
        SessionEvent::ToolResult {
            id: result.call_id.clone(),
            content: result.content.text(),
            is_error: result.is_error,
        },
    );
}

fn push_user(messages: &mut Vec<Message>, blocks: Vec<ContentBlock>) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message::new(Role::User, blocks)),
    }
}

/// The operator tool of that name, unless a client tool shadows it.
fn operator_policy(gw: &Inner, state: &SessionState, name: &str) -> Option<Policy> {
    if state.tools.iter().any(|t| t.name == name) {
        return None;
    }
    let operator = gw.operator.as_ref()?;
    operator
        .registry()
        .get(name)
        .map(|tool| tool.declaration.policy)
}

fn kind_of(gw: &Inner, state: &SessionState, call: &ToolCall) -> CallKind {
    if call.name == CODE_TOOL && gw.containers.available() {
        return CallKind::Server;
    }
    match operator_policy(gw, state, &call.name) {
        // Input that fails the schema goes back to the model without asking anyone.
        Some(Policy::Ask) if valid_operator_input(gw, call) => CallKind::Permission,
        Some(_) => CallKind::Server,
        None if state.tools.iter().any(|t| t.name == call.name) => CallKind::Application,
        // A tool nobody declared: the model reads the error.
        None => CallKind::Server,
    }
}

fn valid_operator_input(gw: &Inner, call: &ToolCall) -> bool {
    gw.operator
        .as_ref()
        .and_then(|o| o.registry().get(&call.name))
        .is_some_and(|tool| tool.validate_input(&call.input).is_ok())
}

/// Runs a call Cordon runs itself: code, an `allow` operator tool, or an error for a call
/// that cannot run (unknown tool, invalid input, a `deny` tool).
async fn run_trusted(gw: &Inner, state: &mut SessionState, call: &ToolCall) -> ToolResult {
    if call.name == CODE_TOOL && gw.containers.available() {
        return run_code(gw, state, call).await;
    }
    let Some(policy) = operator_policy(gw, state, &call.name) else {
        return error_result(
            &call.id,
            format!("unknown tool `{}`: use one of the tools offered", call.name),
        );
    };
    let tool = gw
        .operator
        .as_ref()
        .and_then(|o| o.registry().get(&call.name));
    if let Some(tool) = tool
        && let Err(failure) = tool.validate_input(&call.input)
    {
        return error_result(&call.id, format!("invalid input: {}", failure.message));
    }
    if policy == Policy::Deny {
        return error_result(&call.id, format!("policy denies tool `{}`", call.name));
    }
    call_operator(gw, &state.id, call, false).await
}

async fn run_code(gw: &Inner, state: &mut SessionState, call: &ToolCall) -> ToolResult {
    let Some(code) = call.input.get("code").and_then(Value::as_str) else {
        return error_result(
            &call.id,
            "the input needs `code` (a string of Python)".to_owned(),
        );
    };
    let container = match state.container.as_deref().map(|id| gw.containers.get(id)) {
        Some(Ok(container)) => container,
        // No container yet, or it expired: a fresh interpreter.
        _ => match gw.containers.create() {
            Ok(container) => container,
            Err(error) => return error_result(&call.id, error.to_string()),
        },
    };
    state.container = Some(container.id.clone());
    let mut slot = container.running.lock().await;
    let no_tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
    let (outcome, running) = container
        .run(code, no_tools, &call.id, "code_execution")
        .await;
    *slot = running;
    match outcome {
        ptc::Outcome::Done(result) => ToolResult {
            call_id: call.id.clone(),
            content: ToolResultContent::Text(ptc::model_text(&result)),
            is_error: result.error.is_some(),
            extra: Extra::new(),
        },
        // Programs in sessions get no client tools, so they never suspend.
        ptc::Outcome::Suspended(_) => {
            error_result(&call.id, "the program waited for a tool".to_owned())
        }
    }
}

/// The tools the model is offered in a session: the client's, the code tool (with a
/// sandbox), and the operator's `allow` and `ask` tools.
fn offered_tools(gw: &Inner, state: &SessionState) -> Vec<ToolDefinition> {
    let mut offered: Vec<ToolDefinition> = state
        .tools
        .iter()
        .cloned()
        .map(ToolDefinition::Function)
        .collect();
    if gw.containers.available() {
        offered.push(ToolDefinition::Function(FunctionTool {
            name: CODE_TOOL.to_owned(),
            description: Some(
                "Run Python code in a sandbox (no network, no files). The final expression's \
                 value and everything printed are returned to you. Variables persist between \
                 calls in this session."
                    .to_owned(),
            ),
            input_schema: json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "Python code to run"}},
                "required": ["code"],
            }),
            allowed_callers: Vec::new(),
            extra: Extra::new(),
        }));
    }
    if let Some(operator) = &gw.operator {
        for tool in operator.registry().iter() {
            let d = &tool.declaration;
            if d.policy == Policy::Deny || state.tools.iter().any(|t| t.name == d.name) {
                continue;
            }
            offered.push(operator_function(d));
        }
    }
    offered
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn waiting(kinds: &[(&str, CallKind)]) -> SessionState {
        let (mut state, _) = SessionState::create(
            &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            None,
        )
        .unwrap();
        state.pending = kinds
            .iter()
            .map(|(id, kind)| PendingCall {
                id: (*id).to_owned(),
                name: "t".into(),
                input: json!({}),
                kind: *kind,
            })
            .collect();
        state
    }

    fn input(messages: Value) -> SessionInput {
        SessionInput::parse(&json!({ "messages": messages })).unwrap()
    }

    #[test]
    fn answers_must_cover_every_pending_call_once_in_its_own_way() {
        let state = waiting(&[("a", CallKind::Application), ("p", CallKind::Permission)]);
        let both = input(json!([
            {"role": "tool", "toolCallId": "a", "content": "1"},
            {"role": "tool_permission", "toolCallId": "p", "granted": false}
        ]));
        assert_eq!(state.check(&both), Ok(()));
        let partial = input(json!([{"role": "tool", "toolCallId": "a", "content": "1"}]));
        assert!(
            matches!(state.check(&partial), Err(SessionError::BadRequest(m)) if m.contains("unanswered: p"))
        );
        let unknown = input(json!([
            {"role": "tool", "toolCallId": "a", "content": "1"},
            {"role": "tool_permission", "toolCallId": "p", "granted": true},
            {"role": "tool", "toolCallId": "zzz", "content": "1"}
        ]));
        assert!(
            matches!(state.check(&unknown), Err(SessionError::BadRequest(m)) if m.contains("zzz"))
        );
        let twice = input(json!([
            {"role": "tool", "toolCallId": "a", "content": "1"},
            {"role": "tool", "toolCallId": "a", "content": "2"},
            {"role": "tool_permission", "toolCallId": "p", "granted": true}
        ]));
        assert_eq!(twice.messages.len(), 3);
        assert_eq!(state.check(&twice).unwrap_err().status(), 409);
        let wrong_way = input(json!([
            {"role": "tool", "toolCallId": "a", "content": "1"},
            {"role": "tool", "toolCallId": "p", "content": "I approve"}
        ]));
        assert!(
            matches!(state.check(&wrong_way), Err(SessionError::BadRequest(m)) if m.contains("tool_permission"))
        );
    }

    #[test]
    fn bad_bodies_are_refused_with_the_field_named() {
        let refused = |body: Value, needle: &str| {
            let error = SessionState::create(&body, Some("m")).unwrap_err();
            assert!(error.to_string().contains(needle), "{error}");
        };
        refused(json!({"messages": "hi"}), "`messages`");
        refused(
            json!({"messages": [{"role": "system", "content": "x"}]}),
            "unknown role",
        );
        refused(json!({"messages": []}), "nothing to do");
        refused(
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "a b"}]}),
            "tools[0]",
        );
        refused(
            json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}, {"name": "f"}]}),
            "twice",
        );
        let error = SessionState::create(
            &json!({"messages": [{"role": "user", "content": "x"}]}),
            None,
        )
        .unwrap_err();
        assert!(error.to_string().contains("`model`"), "{error}");
    }

    #[test]
    fn the_state_survives_a_json_round_trip_and_renders_its_history() {
        let mut state = waiting(&[("call_1", CallKind::Application)]);
        state.messages = vec![
            Message::new(Role::User, vec![ContentBlock::text("hi")]),
            Message::new(
                Role::Assistant,
                vec![ContentBlock::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "t".into(),
                    input: json!({"x": 1}),
                    caller: None,
                    extra: Extra::new(),
                })],
            ),
        ];
        let text = serde_json::to_string(&state).unwrap();
        let back: SessionState = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
        let shown = state.to_json();
        assert_eq!(
            shown["messages"][0],
            json!({"role": "user", "content": "hi"})
        );
        assert_eq!(shown["messages"][1]["content"][0]["toolCallId"], "call_1");
        assert_eq!(shown["pending"][0]["kind"], "application");
    }
}
