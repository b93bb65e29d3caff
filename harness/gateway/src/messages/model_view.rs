//! The conversation as the model saw it, rebuilt from what the client sends back: server
//! tool blocks become the model's function calls, program-made calls disappear.

use std::collections::HashSet;

use cordon_protocol::conversation::{
    ContentBlock, Extra, Message, PROGRAM_TOOL, Role, ToolCall, ToolResult, ToolResultContent,
    is_code_tool_type,
};
use serde_json::Value;

use crate::tool_search::model_text_of_shown;

/// Ids of tool calls made by programs (their `caller` is a code-execution tool).
pub(super) fn program_call_ids(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if is_program_call(c) => Some(c.id.clone()),
            _ => None,
        })
        .collect()
}

fn is_program_call(call: &ToolCall) -> bool {
    call.caller.as_ref().is_some_and(|c| {
        is_code_tool_type(&c.kind) || c.kind == "program" || c.kind == PROGRAM_TOOL
    })
}

/// The conversation as the model saw it: `server_tool_use` blocks are the model's function
/// calls, `*_tool_result` blocks their results (in the user message after the call), and
/// calls made by programs, with their results, are not there at all.
pub(super) fn model_view(messages: &[Message], program_ids: &HashSet<String>) -> Vec<Message> {
    let mut flat: Vec<(Role, ContentBlock)> = Vec::new();
    let mut pending: Vec<ContentBlock> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                let mut calls_here: HashSet<String> = HashSet::new();
                for block in &message.content {
                    match block {
                        ContentBlock::ServerToolCall {
                            id, name, input, ..
                        } => {
                            calls_here.insert(id.clone());
                            flat.push((
                                Role::Assistant,
                                ContentBlock::ToolCall(ToolCall {
                                    id: id.clone(),
                                    name: name.clone(),
                                    input: input.clone(),
                                    caller: None,
                                    extra: Extra::new(),
                                }),
                            ));
                        }
                        ContentBlock::ServerToolResult {
                            tool_use_id,
                            content,
                            ..
                        } => {
                            let result = ContentBlock::ToolResult(ToolResult {
                                call_id: tool_use_id.clone(),
                                content: ToolResultContent::Text(server_result_text(content)),
                                is_error: false,
                                extra: Extra::new(),
                            });
                            if calls_here.contains(tool_use_id) {
                                pending.push(result);
                            } else {
                                // The result of a call in an earlier message: that turn ends.
                                flat.extend(pending.drain(..).map(|b| (Role::User, b)));
                                flat.push((Role::User, result));
                            }
                        }
                        ContentBlock::ToolCall(c) if program_ids.contains(&c.id) => {}
                        other => flat.push((Role::Assistant, other.clone())),
                    }
                }
            }
            Role::User => {
                flat.extend(pending.drain(..).map(|b| (Role::User, b)));
                for block in &message.content {
                    match block {
                        ContentBlock::ToolResult(r) if program_ids.contains(&r.call_id) => {}
                        other => flat.push((Role::User, other.clone())),
                    }
                }
            }
        }
    }
    flat.extend(pending.drain(..).map(|b| (Role::User, b)));
    let mut out: Vec<Message> = Vec::new();
    for (role, block) in flat {
        match out.last_mut() {
            Some(last) if last.role == role => last.content.push(block),
            _ => out.push(Message::new(role, vec![block])),
        }
    }
    // Keep the client's string form of a lone text message (vendors render it the same).
    for (message, original) in out.iter_mut().zip(messages) {
        if original.content_was_string && message.content == original.content {
            message.content_was_string = true;
        }
    }
    out
}

/// The text a model reads for a server tool's result block shown to the client (code
/// execution, tool search).
fn server_result_text(content: &Value) -> String {
    if let Some(text) = model_text_of_shown(content) {
        return text;
    }
    match content.get("type").and_then(Value::as_str) {
        Some("code_execution_result") => {
            let mut out = String::new();
            for key in ["stdout", "stderr"] {
                if let Some(text) = content[key].as_str().filter(|t| !t.is_empty()) {
                    out.push_str(&format!("{key}:\n{text}\n"));
                }
            }
            if content["return_code"].as_i64().unwrap_or(0) != 0 {
                out.push_str(&format!("return_code: {}\n", content["return_code"]));
            }
            if out.is_empty() {
                "(no output)".to_owned()
            } else {
                out.trim_end().to_owned()
            }
        }
        Some("code_execution_tool_result_error") => format!(
            "error: {}",
            content["error_code"].as_str().unwrap_or("unavailable")
        ),
        _ => content.to_string(),
    }
}
