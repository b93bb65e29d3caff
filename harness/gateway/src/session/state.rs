//! A session between two turns ([`SessionState`]): its conversation, its tools, the calls
//! waiting for the client; created from `PUT /session`, checked against what the client
//! sends next.

use std::collections::HashSet;

use cordon_core::ids::fresh_id;
use cordon_protocol::conversation::{
    ContentBlock, Extra, FunctionTool, Message, Role, ToolResult, anthropic,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::{SessionError, bad};
use super::input::{InputMessage, SessionInput};

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
    pub(super) fn as_str(self) -> &'static str {
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

    /// The history for `GET /session/{id}`: messages with their tool calls and every result
    /// already produced (those [`held`](Self::held) for the rest of the turn too), and the
    /// pending calls.
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
                            ContentBlock::ToolResult(r) => history.push(tool_entry(r)),
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
        // Results of the last turn's calls that ran inline are kept apart until the client
        // answers the rest, but they were produced (and streamed): a restarted client sees
        // them too, after the turn that made their calls.
        history.extend(self.held.iter().map(tool_entry));
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

/// A result in the history, as `{"role": "tool", ...}`.
fn tool_entry(result: &ToolResult) -> Value {
    json!({
        "role": "tool", "toolCallId": result.call_id,
        "content": result.content.text(), "isError": result.is_error,
    })
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use cordon_protocol::conversation::ToolCall;

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
