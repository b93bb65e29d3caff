//! The request fields all three vendors spell alike (`temperature`, `top_p`, `stream`, stop
//! sequences, which tools go to which vendor) and function tools declared flat, as
//! Anthropic and Responses do. Each
//! converter reads and writes its own fields and leaves these to this module.

use serde_json::{Map, Value, json};

use super::json::{extend, strings, take_bool, take_f64, take_str};
use super::{ConversionError, FunctionTool, Request, ToolDefinition, Vendor};

/// A request holding the settings every vendor spells alike (`temperature`, `top_p`,
/// `stream`), taken from `map`, and what is left of `map` as its `extra`: the decoder's
/// last step, after it took its own fields, which it sets on the result.
pub(crate) fn request_with_settings(mut map: Map<String, Value>) -> Request {
    let temperature = take_f64(&mut map, "temperature");
    let top_p = take_f64(&mut map, "top_p");
    let stream = take_bool(&mut map, "stream").unwrap_or(false);
    Request {
        temperature,
        top_p,
        stream,
        extra: map,
        ..Request::default()
    }
}

/// The encoder's last step: writes the settings every vendor spells alike after the
/// vendor's own fields — `temperature`, `top_p`, the stop sequences under `stop_key`
/// (`None` where the vendor has no field for them), `stream` when set — then the request's
/// `extra` when `same`.
pub(crate) fn finish_request(
    mut map: Map<String, Value>,
    request: &Request,
    stop_key: Option<&str>,
    same: bool,
) -> Value {
    if let Some(t) = request.temperature {
        map.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.top_p {
        map.insert("top_p".into(), json!(p));
    }
    if let Some(key) = stop_key
        && !request.stop_sequences.is_empty()
    {
        map.insert(key.into(), json!(request.stop_sequences));
    }
    if request.stream {
        map.insert("stream".into(), json!(true));
    }
    extend(&mut map, &request.extra, same);
    Value::Object(map)
}

/// The request's tools in `vendor`'s shape: function tools as `encode_function` writes
/// them, the tools `vendor` hosts as they came; other vendors' hosted tools are left out
/// (those that do not [`ToolDefinition::reaches`] it: a caller that would rather refuse the
/// request checks that first).
pub(crate) fn encode_tools(
    tools: &[ToolDefinition],
    vendor: Vendor,
    encode_function: impl Fn(&FunctionTool) -> Value,
) -> Vec<Value> {
    tools
        .iter()
        .filter(|tool| tool.reaches(vendor))
        .map(|tool| match tool {
            ToolDefinition::Function(f) => encode_function(f),
            ToolDefinition::BuiltIn { data, .. } => data.clone(),
        })
        .collect()
}

/// A function tool declared flat: `name`, `description`, the input schema under
/// `schema_key` (an object schema when absent), `allowed_callers`; the other fields of `map`
/// stay in `extra`.
pub(crate) fn decode_function_tool(
    mut map: Map<String, Value>,
    schema_key: &str,
) -> Result<ToolDefinition, ConversionError> {
    let name = take_str(&mut map, "name").ok_or_else(|| ConversionError::field("tools[].name"))?;
    let description = take_str(&mut map, "description");
    let input_schema = map
        .remove(schema_key)
        .unwrap_or_else(|| json!({"type": "object"}));
    let allowed_callers = strings(map.remove("allowed_callers"));
    Ok(ToolDefinition::Function(FunctionTool {
        name,
        description,
        input_schema,
        allowed_callers,
        extra: map,
    }))
}

/// A function tool declared flat: after `map`'s fields (the name, and the type where the
/// vendor wants one), `description`, the input schema under `schema_key`,
/// `allowed_callers` when any, and the tool's `extra` when `same`.
pub(crate) fn encode_function_tool(
    mut map: Map<String, Value>,
    tool: &FunctionTool,
    schema_key: &str,
    same: bool,
) -> Value {
    if let Some(d) = &tool.description {
        map.insert("description".into(), json!(d));
    }
    map.insert(schema_key.into(), tool.input_schema.clone());
    if !tool.allowed_callers.is_empty() {
        map.insert("allowed_callers".into(), json!(tool.allowed_callers));
    }
    extend(&mut map, &tool.extra, same);
    Value::Object(map)
}
