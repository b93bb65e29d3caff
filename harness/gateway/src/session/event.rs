//! The events of a session turn, as the session stream sends them.

use serde_json::{Value, json};

use super::state::CallKind;

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
