//! OpenAI Chat Completions (`POST /chat/completions`): requests, responses and chunks.
//!
//! Chat has no tool-error flag: an `is_error` result is sent as a `tool` message whose text
//! starts with [`ERROR_PREFIX`]. Tool messages carry text only, so images of a tool result
//! travel in the user message that follows them. System and developer messages become the
//! request's system text.

use serde_json::{Map, Value, json};

use super::json::{extend, obj, strings, take_bool, take_str, take_u64, to_object};
use super::openai::{add_system_text, decode_usage, hosted_tool, put_tool_settings};
use super::request_fields::{encode_tools, finish_request, request_with_settings};
use super::{
    ContentBlock, ConversionError, FunctionTool, ImageSource, Message, Request, Role, StopReason,
    System, ToolCall, ToolChoice, ToolDefinition, ToolResult, ToolResultContent, Turn, Vendor,
};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// Text put before an `is_error` tool result's content, since Chat has no flag for it.
pub const ERROR_PREFIX: &str = "Error: ";

/// Decode a `/chat/completions` request body.
pub fn decode_request(body: &Value) -> Result<Request> {
    let mut map = to_object(body, "request")?;
    let model = take_str(&mut map, "model").unwrap_or_default();
    let mut system: Option<System> = None;
    let mut messages: Vec<Message> = Vec::new();
    // True while the last canonical message was built from `tool` messages.
    let mut in_tool_group = false;
    let items = match map.remove("messages") {
        Some(Value::Array(items)) => items,
        _ => return Err(ConversionError::field("messages")),
    };
    for item in &items {
        let mut m = to_object(item, "messages[]")?;
        let role =
            take_str(&mut m, "role").ok_or_else(|| ConversionError::field("messages[].role"))?;
        match role.as_str() {
            "system" | "developer" => {
                add_system_text(&mut system, m.get("content"));
                in_tool_group = false;
            }
            "tool" => {
                let call_id = take_str(&mut m, "tool_call_id")
                    .ok_or_else(|| ConversionError::field("messages[].tool_call_id"))?;
                let content = match m.remove("content") {
                    Some(Value::String(s)) => ToolResultContent::Text(s),
                    Some(Value::Array(parts)) => ToolResultContent::Blocks(decode_parts(&parts)?),
                    _ => ToolResultContent::Text(String::new()),
                };
                let result = ContentBlock::ToolResult(ToolResult {
                    call_id,
                    content,
                    is_error: false,
                    extra: m,
                });
                match messages.last_mut() {
                    Some(last) if in_tool_group => last.content.push(result),
                    _ => messages.push(Message::new(Role::User, vec![result])),
                }
                in_tool_group = true;
            }
            "user" => {
                let (content, was_string) = match m.remove("content") {
                    Some(Value::String(s)) => (vec![ContentBlock::text(s)], true),
                    Some(Value::Array(parts)) => (decode_parts(&parts)?, false),
                    _ => return Err(ConversionError::field("messages[].content")),
                };
                match messages.last_mut() {
                    Some(last) if in_tool_group => {
                        last.content.extend(content);
                        last.content_was_string = was_string;
                        last.extra = m;
                    }
                    _ => messages.push(Message {
                        role: Role::User,
                        content,
                        content_was_string: was_string,
                        extra: m,
                    }),
                }
                in_tool_group = false;
            }
            "assistant" => {
                let mut content = Vec::new();
                if let Some(Value::String(r)) = m.remove("reasoning_content") {
                    content.push(ContentBlock::Reasoning {
                        vendor: Vendor::OpenaiChat,
                        data: json!(r),
                    });
                }
                let mut was_string = false;
                match m.remove("content") {
                    Some(Value::String(s)) => {
                        was_string = true;
                        content.push(ContentBlock::text(s));
                    }
                    Some(Value::Array(parts)) => content.extend(decode_parts(&parts)?),
                    _ => {}
                }
                if let Some(Value::Array(calls)) = m.remove("tool_calls") {
                    for call in &calls {
                        content.push(ContentBlock::ToolCall(decode_tool_call(call)?));
                    }
                }
                messages.push(Message {
                    role: Role::Assistant,
                    content,
                    content_was_string: was_string,
                    extra: m,
                });
                in_tool_group = false;
            }
            other => {
                return Err(ConversionError::UnknownValue {
                    field: "messages[].role".into(),
                    value: other.into(),
                });
            }
        }
    }
    let tools = match map.remove("tools") {
        Some(Value::Array(items)) => items.iter().map(decode_tool).collect::<Result<_>>()?,
        _ => Vec::new(),
    };
    let tool_choice = match map.remove("tool_choice") {
        None => None,
        Some(v) => Some(decode_tool_choice(&v)?),
    };
    let parallel_tool_calls = take_bool(&mut map, "parallel_tool_calls");
    // The legacy `max_tokens` counts only without `max_completion_tokens`: taking it
    // beside one that is not a count (kept in `extra`) would re-encode as that one.
    let max_tokens = if map.contains_key("max_completion_tokens") {
        take_u64(&mut map, "max_completion_tokens")
    } else {
        take_u64(&mut map, "max_tokens")
    };
    let stop_sequences = match map.remove("stop") {
        Some(Value::String(s)) => vec![s],
        other => strings(other),
    };
    Ok(Request {
        origin: Some(Vendor::OpenaiChat),
        model,
        system,
        messages,
        tools,
        tool_choice,
        parallel_tool_calls,
        max_tokens,
        stop_sequences,
        ..request_with_settings(map)
    })
}

/// Encode a request as a `/chat/completions` body.
pub fn encode_request(request: &Request) -> Value {
    let same = request.origin == Some(Vendor::OpenaiChat);
    let mut map = Map::new();
    map.insert("model".into(), json!(request.model));
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system.text()}));
    }
    for message in &request.messages {
        encode_message(message, same, &mut messages);
    }
    map.insert("messages".into(), Value::Array(messages));
    let tools = encode_tools(&request.tools, Vendor::OpenaiChat, |t| {
        encode_function(t, same)
    });
    let tool_choice = request.tool_choice.as_ref().map(encode_tool_choice);
    put_tool_settings(
        &mut map,
        request,
        tools,
        tool_choice,
        "max_completion_tokens",
    );
    finish_request(map, request, Some("stop"), same)
}

fn encode_message(message: &Message, same: bool, out: &mut Vec<Value>) {
    match message.role {
        Role::User => {
            let mut rest: Vec<&ContentBlock> = Vec::new();
            let mut result_images: Vec<&ContentBlock> = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::ToolResult(result) => {
                        let mut text = result.content.text();
                        if result.is_error {
                            text = format!("{ERROR_PREFIX}{text}");
                        }
                        if let ToolResultContent::Blocks(blocks) = &result.content {
                            result_images.extend(
                                blocks
                                    .iter()
                                    .filter(|b| matches!(b, ContentBlock::Image { .. })),
                            );
                        }
                        let mut m = obj(
                            json!({"role": "tool", "tool_call_id": result.call_id, "content": text}),
                        );
                        extend(&mut m, &result.extra, same);
                        out.push(Value::Object(m));
                    }
                    other => rest.push(other),
                }
            }
            rest.extend(result_images);
            // A message of tool results only became `tool` messages above; one that was
            // empty to begin with stays a (empty) user message.
            if rest.is_empty() && !message.content.is_empty() {
                return;
            }
            let content = match &rest[..] {
                [ContentBlock::Text { text, .. }] if message.content_was_string => json!(text),
                _ => Value::Array(rest.iter().filter_map(|b| encode_part(b, same)).collect()),
            };
            let mut m = obj(json!({"role": "user", "content": content}));
            extend(&mut m, &message.extra, same);
            out.push(Value::Object(m));
        }
        Role::Assistant => {
            let mut m = obj(json!({"role": "assistant"}));
            let texts: Vec<&ContentBlock> = message
                .content
                .iter()
                .filter(|b| matches!(b, ContentBlock::Text { .. }))
                .collect();
            let content = match &texts[..] {
                [] => Value::Null,
                [ContentBlock::Text { text, .. }] if message.content_was_string || !same => {
                    json!(text)
                }
                _ => Value::Array(texts.iter().filter_map(|b| encode_part(b, same)).collect()),
            };
            m.insert("content".into(), content);
            for block in &message.content {
                if let ContentBlock::Reasoning {
                    vendor: Vendor::OpenaiChat,
                    data,
                } = block
                {
                    m.insert("reasoning_content".into(), data.clone());
                }
            }
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some(encode_tool_call(c, same)),
                    _ => None,
                })
                .collect();
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            extend(&mut m, &message.extra, same);
            out.push(Value::Object(m));
        }
    }
}

fn decode_parts(parts: &[Value]) -> Result<Vec<ContentBlock>> {
    parts
        .iter()
        .map(|part| {
            let mut p = to_object(part, "content[]")?;
            match take_str(&mut p, "type").as_deref() {
                Some("text") => {
                    let text = take_str(&mut p, "text")
                        .ok_or_else(|| ConversionError::field("content[].text"))?;
                    Ok(ContentBlock::Text { text, extra: p })
                }
                Some("image_url") => {
                    let mut image = p
                        .remove("image_url")
                        .and_then(|v| v.as_object().cloned())
                        .ok_or_else(|| ConversionError::field("content[].image_url"))?;
                    let url = take_str(&mut image, "url")
                        .ok_or_else(|| ConversionError::field("content[].image_url.url"))?;
                    // `detail` and friends stay with the block.
                    if !image.is_empty() {
                        p.insert("image_url".into(), Value::Object(image));
                    }
                    Ok(ContentBlock::Image {
                        source: ImageSource::from_url(&url),
                        extra: p,
                    })
                }
                _ => Ok(ContentBlock::Opaque {
                    vendor: Vendor::OpenaiChat,
                    data: part.clone(),
                }),
            }
        })
        .collect()
}

fn encode_part(block: &ContentBlock, same: bool) -> Option<Value> {
    match block {
        ContentBlock::Text { text, extra } => {
            let mut m = obj(json!({"type": "text", "text": text}));
            extend(&mut m, extra, same);
            Some(Value::Object(m))
        }
        ContentBlock::Image { source, extra } => {
            let mut image = obj(json!({"url": source.to_url()}));
            if same && let Some(Value::Object(more)) = extra.get("image_url") {
                extend(&mut image, more, true);
            }
            let mut m = obj(json!({"type": "image_url"}));
            let rest: Map<String, Value> = extra
                .iter()
                .filter(|(k, _)| *k != "image_url")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            extend(&mut m, &rest, same);
            m.insert("image_url".into(), Value::Object(image));
            Some(Value::Object(m))
        }
        ContentBlock::Opaque {
            vendor: Vendor::OpenaiChat,
            data,
        } => Some(data.clone()),
        _ => None,
    }
}

/// Parse tool-call arguments; text that is not JSON is kept as a string input.
pub(crate) fn parse_arguments(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// Tool-call arguments as a string: a string input is sent as is.
pub(crate) fn arguments_string(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn decode_tool_call(value: &Value) -> Result<ToolCall> {
    let mut m = to_object(value, "tool_calls[]")?;
    let id = take_str(&mut m, "id").ok_or_else(|| ConversionError::field("tool_calls[].id"))?;
    if m.get("type").and_then(Value::as_str) == Some("function") {
        m.remove("type");
    }
    let mut function = m
        .remove("function")
        .and_then(|f| f.as_object().cloned())
        .ok_or_else(|| ConversionError::field("tool_calls[].function"))?;
    let name = take_str(&mut function, "name")
        .ok_or_else(|| ConversionError::field("tool_calls[].function.name"))?;
    let arguments = take_str(&mut function, "arguments").unwrap_or_default();
    Ok(ToolCall {
        id,
        name,
        input: parse_arguments(&arguments),
        caller: None,
        extra: m,
    })
}

fn encode_tool_call(call: &ToolCall, same: bool) -> Value {
    let mut m = obj(json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments_string(&call.input)},
    }));
    extend(&mut m, &call.extra, same);
    Value::Object(m)
}

fn decode_tool(value: &Value) -> Result<ToolDefinition> {
    let mut m = to_object(value, "tools[]")?;
    if let Some(hosted) = hosted_tool(value, Vendor::OpenaiChat) {
        return Ok(hosted);
    }
    m.remove("type");
    let mut f = m
        .remove("function")
        .and_then(|f| f.as_object().cloned())
        .ok_or_else(|| ConversionError::field("tools[].function"))?;
    let name =
        take_str(&mut f, "name").ok_or_else(|| ConversionError::field("tools[].function.name"))?;
    let description = take_str(&mut f, "description");
    let input_schema = f
        .remove("parameters")
        .unwrap_or_else(|| json!({"type": "object"}));
    // Fields beside `function` (rare) and inside it (`strict`) both stay with the tool.
    extend(&mut f, &m, true);
    Ok(ToolDefinition::Function(FunctionTool {
        name,
        description,
        input_schema,
        allowed_callers: Vec::new(),
        extra: f,
    }))
}

/// A function tool as Chat declares it: `{"type": "function", "function": {...}}`.
fn encode_function(t: &FunctionTool, same: bool) -> Value {
    let mut f = obj(json!({"name": t.name}));
    if let Some(d) = &t.description {
        f.insert("description".into(), json!(d));
    }
    f.insert("parameters".into(), t.input_schema.clone());
    extend(&mut f, &t.extra, same);
    json!({"type": "function", "function": f})
}

fn decode_tool_choice(value: &Value) -> Result<ToolChoice> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Any),
            "none" => Ok(ToolChoice::None),
            other => Err(ConversionError::UnknownValue {
                field: "tool_choice".into(),
                value: other.into(),
            }),
        },
        Value::Object(m) => {
            let name = m
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| ConversionError::field("tool_choice.function.name"))?;
            Ok(ToolChoice::Tool {
                name: name.to_owned(),
            })
        }
        _ => Err(ConversionError::field("tool_choice")),
    }
}

fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Any => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool { name } => json!({"type": "function", "function": {"name": name}}),
    }
}

pub(crate) fn decode_finish_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

pub(crate) fn encode_finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        StopReason::Other(s) => s,
    }
}

/// Decode a `chat.completion` response (its first choice).
pub fn decode_response(body: &Value) -> Result<Turn> {
    let mut map = to_object(body, "response")?;
    let id = take_str(&mut map, "id").unwrap_or_default();
    let model = take_str(&mut map, "model").unwrap_or_default();
    let mut choices = match map.remove("choices") {
        Some(Value::Array(c)) => c,
        _ => return Err(ConversionError::field("choices")),
    };
    if choices.is_empty() {
        return Err(ConversionError::field("choices[0]"));
    }
    let mut choice = to_object(&choices.swap_remove(0), "choices[0]")?;
    let stop_reason = take_str(&mut choice, "finish_reason").map(|r| decode_finish_reason(&r));
    let message = choice
        .remove("message")
        .ok_or_else(|| ConversionError::field("choices[0].message"))?;
    let mut message = to_object(&message, "choices[0].message")?;
    message.insert("role".into(), json!("assistant"));
    let request = decode_request(&json!({"messages": [Value::Object(message)]}))?;
    let (content, message_extra) = match request.messages.into_iter().next() {
        Some(m) => (m.content, m.extra),
        None => (Vec::new(), Map::new()),
    };
    let usage = decode_usage(
        map.remove("usage"),
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
    );
    // The choice's other fields (index, logprobs) and the message's (refusal, annotations).
    if !choice.is_empty() {
        map.insert("choice".into(), Value::Object(choice));
    }
    if !message_extra.is_empty() {
        map.insert("message".into(), Value::Object(message_extra));
    }
    Ok(Turn {
        origin: Some(Vendor::OpenaiChat),
        id,
        model,
        content,
        stop_reason,
        stop_sequence: None,
        usage,
        container: None,
        extra: map,
    })
}

/// Encode a turn as a `chat.completion` response.
pub fn encode_response(turn: &Turn) -> Value {
    let same = turn.origin == Some(Vendor::OpenaiChat);
    let mut extra = if same { turn.extra.clone() } else { Map::new() };
    let mut choice = match extra.remove("choice") {
        Some(Value::Object(c)) => c,
        _ => obj(json!({"index": 0, "logprobs": null})),
    };
    let message_extra = match extra.remove("message") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut out = Vec::new();
    let message = Message {
        role: Role::Assistant,
        content: turn.content.clone(),
        content_was_string: true,
        extra: message_extra,
    };
    encode_message(&message, same, &mut out);
    let message = out
        .into_iter()
        .next()
        .unwrap_or_else(|| json!({"role": "assistant", "content": null}));
    choice.insert("message".into(), message);
    choice.insert(
        "finish_reason".into(),
        turn.stop_reason
            .as_ref()
            .map_or(Value::Null, |r| json!(encode_finish_reason(r))),
    );
    let mut map = obj(json!({"id": turn.id, "object": "chat.completion"}));
    if !extra.contains_key("created") {
        map.insert("created".into(), json!(0));
    }
    map.insert("model".into(), json!(turn.model));
    map.insert("choices".into(), json!([choice]));
    let mut usage = obj(json!({
        "prompt_tokens": turn.usage.input_tokens,
        "completion_tokens": turn.usage.output_tokens,
        "total_tokens": turn.usage.input_tokens + turn.usage.output_tokens,
    }));
    extend(&mut usage, &turn.usage.extra, same);
    map.insert("usage".into(), Value::Object(usage));
    extend(&mut map, &extra, true);
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// Found by the property tests: a user message with empty content vanished on
    /// re-encoding.
    #[test]
    fn an_empty_user_message_survives_a_round_trip() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": []}]});
        let request = decode_request(&body).unwrap();
        assert_eq!(request.messages.len(), 1);
        assert_eq!(decode_request(&encode_request(&request)).unwrap(), request);
    }

    /// Found by the property tests: `max_tokens` beside a `max_completion_tokens` that is
    /// not a count came back as that one.
    #[test]
    fn max_tokens_beside_an_invalid_max_completion_tokens_is_stable() {
        let body =
            json!({"model": "m", "messages": [], "max_completion_tokens": -1, "max_tokens": 16});
        let request = decode_request(&body).unwrap();
        assert_eq!(decode_request(&encode_request(&request)).unwrap(), request);
    }
}
