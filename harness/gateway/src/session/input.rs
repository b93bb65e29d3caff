//! What a client sends to a session: user messages, tool results, permission answers.

use cordon_protocol::conversation::{ContentBlock, anthropic};
use serde_json::Value;

use super::error::{SessionError, bad};

/// One message of a client's request.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum InputMessage {
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
    pub(super) messages: Vec<InputMessage>,
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
