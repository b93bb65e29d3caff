//! What OpenAI's two APIs, Chat Completions and Responses, spell alike: system text taken
//! from system and developer messages, hosted tools, a request's tool and length settings,
//! usage counts.

use serde_json::{Map, Value, json};

use super::json::take_u64;
use super::{Request, System, ToolDefinition, Usage, Vendor};

/// Adds the text of a system or developer message's `content` to the system text, after a
/// blank line.
pub(crate) fn add_system_text(system: &mut Option<System>, content: Option<&Value>) {
    let text = content_text(content);
    *system = Some(match system.take() {
        None => System::Text(text),
        Some(s) => System::Text(format!("{}\n\n{text}", s.text())),
    });
}

/// The text of a message's `content`: the string, or its parts' `text` joined by blank
/// lines.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// A declared tool whose `type` is not `function`: one the vendor hosts, kept whole.
pub(crate) fn hosted_tool(value: &Value, vendor: Vendor) -> Option<ToolDefinition> {
    let kind = value.get("type").and_then(Value::as_str);
    if kind == Some("function") {
        return None;
    }
    Some(ToolDefinition::BuiltIn {
        vendor,
        kind: kind.unwrap_or_default().to_owned(),
        data: value.clone(),
    })
}

/// Writes a request's tool and length settings: `tools` when any is left after encoding,
/// `tool_choice`, `parallel_tool_calls`, and the token limit under `max_tokens_key`.
pub(crate) fn put_tool_settings(
    map: &mut Map<String, Value>,
    request: &Request,
    tools: Vec<Value>,
    tool_choice: Option<Value>,
    max_tokens_key: &str,
) {
    if !tools.is_empty() {
        map.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = tool_choice {
        map.insert("tool_choice".into(), choice);
    }
    if let Some(p) = request.parallel_tool_calls {
        map.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(max) = request.max_tokens {
        map.insert(max_tokens_key.into(), json!(max));
    }
}

/// A response's `usage`: input and output tokens under the names given,
/// `total_tokens` dropped (the encoders write it as their sum), cached input tokens under
/// `{input_details}.cached_tokens`; the other fields stay in `extra`.
pub(crate) fn decode_usage(
    usage: Option<Value>,
    input: &str,
    output: &str,
    input_details: &str,
) -> Usage {
    match usage {
        Some(Value::Object(mut u)) => {
            let input_tokens = take_u64(&mut u, input).unwrap_or(0);
            let output_tokens = take_u64(&mut u, output).unwrap_or(0);
            u.remove("total_tokens");
            let cache_read_input_tokens = u
                .get(input_details)
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64);
            Usage {
                input_tokens,
                output_tokens,
                cache_creation_input_tokens: None,
                cache_read_input_tokens,
                extra: u,
            }
        }
        _ => Usage::default(),
    }
}
