//! Anthropic Messages (`POST /v1/messages`): requests, responses and stream events.

use serde_json::{Map, Value, json};

use super::json::{extend, obj, strings, take_bool, take_str, take_u64, to_object};
use super::request_fields::{
    decode_function_tool, encode_function_tool, encode_tools, finish_request, request_with_settings,
};
use super::{
    Container, ContentBlock, ConversionError, Extra, ImageSource, Message, Request, Role,
    StopReason, System, ToolCall, ToolCaller, ToolChoice, ToolDefinition, ToolResult,
    ToolResultContent, Turn, Usage, Vendor,
};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// Decode a `/v1/messages` request body.
pub fn decode_request(body: &Value) -> Result<Request> {
    let mut map = to_object(body, "request")?;
    let model = take_str(&mut map, "model").unwrap_or_default();
    let system = match map.remove("system") {
        None => None,
        Some(Value::String(s)) => Some(System::Text(s)),
        Some(Value::Array(items)) => Some(System::Blocks(decode_blocks(&items)?)),
        Some(_) => return Err(ConversionError::field("system")),
    };
    let messages = match map.remove("messages") {
        Some(Value::Array(items)) => items.iter().map(decode_message).collect::<Result<_>>()?,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("messages")),
    };
    let tools = match map.remove("tools") {
        Some(Value::Array(items)) => items.iter().map(decode_tool).collect::<Result<_>>()?,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("tools")),
    };
    let (tool_choice, parallel_tool_calls) = match map.remove("tool_choice") {
        None => (None, None),
        Some(v) => {
            let mut choice = to_object(&v, "tool_choice")?;
            let parallel = take_bool(&mut choice, "disable_parallel_tool_use").map(|d| !d);
            let kind = take_str(&mut choice, "type")
                .ok_or_else(|| ConversionError::field("tool_choice.type"))?;
            let choice = match kind.as_str() {
                "auto" => ToolChoice::Auto,
                "any" => ToolChoice::Any,
                "none" => ToolChoice::None,
                "tool" => ToolChoice::Tool {
                    name: take_str(&mut choice, "name")
                        .ok_or_else(|| ConversionError::field("tool_choice.name"))?,
                },
                other => {
                    return Err(ConversionError::UnknownValue {
                        field: "tool_choice.type".into(),
                        value: other.into(),
                    });
                }
            };
            (Some(choice), parallel)
        }
    };
    let max_tokens = take_u64(&mut map, "max_tokens");
    let stop_sequences = strings(map.remove("stop_sequences"));
    Ok(Request {
        origin: Some(Vendor::Anthropic),
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

/// Encode a request as a `/v1/messages` body.
pub fn encode_request(request: &Request) -> Value {
    let same = request.origin == Some(Vendor::Anthropic);
    let mut map = Map::new();
    map.insert("model".into(), json!(request.model));
    if let Some(max) = request.max_tokens {
        map.insert("max_tokens".into(), json!(max));
    }
    match &request.system {
        Some(System::Text(t)) => {
            map.insert("system".into(), json!(t));
        }
        Some(System::Blocks(b)) => {
            map.insert("system".into(), Value::Array(encode_blocks(b, same)));
        }
        None => {}
    }
    map.insert(
        "messages".into(),
        Value::Array(
            request
                .messages
                .iter()
                .map(|m| encode_message(m, same))
                .collect(),
        ),
    );
    if !request.tools.is_empty() {
        let tools = encode_tools(&request.tools, Vendor::Anthropic, |f| {
            encode_function_tool(obj(json!({"name": f.name})), f, "input_schema", same)
        });
        map.insert("tools".into(), Value::Array(tools));
    }
    if request.tool_choice.is_some() || request.parallel_tool_calls.is_some() {
        let mut choice = match request.tool_choice.as_ref().unwrap_or(&ToolChoice::Auto) {
            ToolChoice::Auto => obj(json!({"type": "auto"})),
            ToolChoice::Any => obj(json!({"type": "any"})),
            ToolChoice::None => obj(json!({"type": "none"})),
            ToolChoice::Tool { name } => obj(json!({"type": "tool", "name": name})),
        };
        if let Some(parallel) = request.parallel_tool_calls {
            choice.insert("disable_parallel_tool_use".into(), json!(!parallel));
        }
        map.insert("tool_choice".into(), Value::Object(choice));
    }
    finish_request(map, request, Some("stop_sequences"), same)
}

/// Decode a `/v1/messages` response body (a `message` object).
pub fn decode_response(body: &Value) -> Result<Turn> {
    let mut map = to_object(body, "response")?;
    map.remove("type");
    map.remove("role");
    let id = take_str(&mut map, "id").unwrap_or_default();
    let model = take_str(&mut map, "model").unwrap_or_default();
    let content = match map.remove("content") {
        Some(Value::Array(items)) => decode_blocks(&items)?,
        _ => Vec::new(),
    };
    // `null` is Anthropic's "none" (every message carries both keys); kept in `extra` it
    // would come back on a re-encode next to the value the encoder writes.
    for key in ["stop_reason", "stop_sequence"] {
        if map.get(key) == Some(&Value::Null) {
            map.remove(key);
        }
    }
    let stop_reason = match map.get("stop_reason") {
        Some(Value::String(s)) => {
            let reason = decode_stop_reason(s);
            map.remove("stop_reason");
            Some(reason)
        }
        _ => None,
    };
    let stop_sequence = take_str(&mut map, "stop_sequence");
    let usage = match map.remove("usage") {
        Some(u) => decode_usage(&u)?,
        None => Usage::default(),
    };
    let container = match map.get("container") {
        Some(Value::Object(c)) => {
            let container = Container {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                expires_at: c
                    .get("expires_at")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            };
            map.remove("container");
            Some(container)
        }
        _ => None,
    };
    Ok(Turn {
        origin: Some(Vendor::Anthropic),
        id,
        model,
        content,
        stop_reason,
        stop_sequence,
        usage,
        container,
        extra: map,
    })
}

/// Encode a turn as a `/v1/messages` response body.
pub fn encode_response(turn: &Turn) -> Value {
    let same = turn.origin == Some(Vendor::Anthropic);
    let mut map = Map::new();
    map.insert("id".into(), json!(turn.id));
    map.insert("type".into(), json!("message"));
    map.insert("role".into(), json!("assistant"));
    map.insert("model".into(), json!(turn.model));
    map.insert(
        "content".into(),
        Value::Array(encode_blocks(&turn.content, same)),
    );
    map.insert(
        "stop_reason".into(),
        turn.stop_reason
            .as_ref()
            .map_or(Value::Null, |r| json!(encode_stop_reason(r))),
    );
    map.insert(
        "stop_sequence".into(),
        turn.stop_sequence
            .as_ref()
            .map_or(Value::Null, |s| json!(s)),
    );
    map.insert("usage".into(), encode_usage(&turn.usage, same));
    if let Some(c) = &turn.container {
        map.insert(
            "container".into(),
            json!({"id": c.id, "expires_at": c.expires_at}),
        );
    }
    extend(&mut map, &turn.extra, same);
    Value::Object(map)
}

pub(crate) fn decode_stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

pub(crate) fn encode_stop_reason(r: &StopReason) -> &str {
    match r {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Refusal => "refusal",
        StopReason::Other(s) => s,
    }
}

fn decode_usage(value: &Value) -> Result<Usage> {
    let mut map = to_object(value, "usage")?;
    Ok(Usage {
        input_tokens: take_u64(&mut map, "input_tokens").unwrap_or(0),
        output_tokens: take_u64(&mut map, "output_tokens").unwrap_or(0),
        cache_creation_input_tokens: take_u64(&mut map, "cache_creation_input_tokens"),
        cache_read_input_tokens: take_u64(&mut map, "cache_read_input_tokens"),
        extra: map,
    })
}

fn encode_usage(usage: &Usage, same: bool) -> Value {
    let mut map = Map::new();
    map.insert("input_tokens".into(), json!(usage.input_tokens));
    if let Some(n) = usage.cache_creation_input_tokens {
        map.insert("cache_creation_input_tokens".into(), json!(n));
    }
    if let Some(n) = usage.cache_read_input_tokens {
        map.insert("cache_read_input_tokens".into(), json!(n));
    }
    map.insert("output_tokens".into(), json!(usage.output_tokens));
    extend(&mut map, &usage.extra, same);
    Value::Object(map)
}

fn decode_message(value: &Value) -> Result<Message> {
    let mut map = to_object(value, "messages[]")?;
    let role = match take_str(&mut map, "role").as_deref() {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some(other) => {
            return Err(ConversionError::UnknownValue {
                field: "messages[].role".into(),
                value: other.into(),
            });
        }
        None => return Err(ConversionError::field("messages[].role")),
    };
    let (content, content_was_string) = match map.remove("content") {
        Some(Value::String(s)) => (vec![ContentBlock::text(s)], true),
        Some(Value::Array(items)) => (decode_blocks(&items)?, false),
        _ => return Err(ConversionError::field("messages[].content")),
    };
    Ok(Message {
        role,
        content,
        content_was_string,
        extra: map,
    })
}

fn encode_message(message: &Message, same: bool) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content = match (&message.content[..], message.content_was_string) {
        ([ContentBlock::Text { text, extra }], true) if extra.is_empty() || !same => json!(text),
        _ => Value::Array(encode_blocks(&message.content, same)),
    };
    let mut map = obj(json!({"role": role, "content": content}));
    extend(&mut map, &message.extra, same);
    Value::Object(map)
}

/// Decode Anthropic content blocks.
pub fn decode_blocks(items: &[Value]) -> Result<Vec<ContentBlock>> {
    items.iter().map(decode_block).collect()
}

/// Encode content blocks; other vendors' reasoning and opaque blocks are dropped, and
/// `extra` fields are kept only when `same` (the blocks came from Anthropic).
pub fn encode_blocks(blocks: &[ContentBlock], same: bool) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|b| encode_block(b, same))
        .collect()
}

fn decode_block(value: &Value) -> Result<ContentBlock> {
    let mut map = to_object(value, "content[]")?;
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let block = match kind.as_str() {
        "text" => {
            map.remove("type");
            let text =
                take_str(&mut map, "text").ok_or_else(|| ConversionError::field("text.text"))?;
            ContentBlock::Text { text, extra: map }
        }
        "image" => {
            map.remove("type");
            let source = map
                .remove("source")
                .ok_or_else(|| ConversionError::field("image.source"))?;
            let source = decode_image_source(&source)?;
            ContentBlock::Image { source, extra: map }
        }
        "tool_use" => {
            map.remove("type");
            let id =
                take_str(&mut map, "id").ok_or_else(|| ConversionError::field("tool_use.id"))?;
            let name = take_str(&mut map, "name")
                .ok_or_else(|| ConversionError::field("tool_use.name"))?;
            let input = map.remove("input").unwrap_or_else(|| json!({}));
            let caller = match map.remove("caller") {
                Some(c) => {
                    let mut c = to_object(&c, "tool_use.caller")?;
                    Some(ToolCaller {
                        kind: take_str(&mut c, "type").unwrap_or_default(),
                        tool_id: take_str(&mut c, "tool_id"),
                    })
                }
                None => None,
            };
            ContentBlock::ToolCall(ToolCall {
                id,
                name,
                input,
                caller,
                extra: map,
            })
        }
        "tool_result" => {
            map.remove("type");
            let call_id = take_str(&mut map, "tool_use_id")
                .ok_or_else(|| ConversionError::field("tool_result.tool_use_id"))?;
            let content = match map.remove("content") {
                None => ToolResultContent::Blocks(Vec::new()),
                Some(Value::String(s)) => ToolResultContent::Text(s),
                Some(Value::Array(items)) => ToolResultContent::Blocks(decode_blocks(&items)?),
                Some(_) => return Err(ConversionError::field("tool_result.content")),
            };
            // An explicit `is_error: false` stays in `extra` so it is re-encoded as sent.
            let is_error = map.get("is_error") == Some(&Value::Bool(true));
            if is_error {
                map.remove("is_error");
            }
            ContentBlock::ToolResult(ToolResult {
                call_id,
                content,
                is_error,
                extra: map,
            })
        }
        "thinking" | "redacted_thinking" => ContentBlock::Reasoning {
            vendor: Vendor::Anthropic,
            data: value.clone(),
        },
        "server_tool_use" => {
            map.remove("type");
            let id = take_str(&mut map, "id")
                .ok_or_else(|| ConversionError::field("server_tool_use.id"))?;
            let name = take_str(&mut map, "name").unwrap_or_default();
            let input = map.remove("input").unwrap_or_else(|| json!({}));
            ContentBlock::ServerToolCall {
                id,
                name,
                input,
                extra: map,
            }
        }
        k if k.ends_with("_tool_result") && map.contains_key("tool_use_id") => {
            map.remove("type");
            let tool_use_id = take_str(&mut map, "tool_use_id").unwrap_or_default();
            let content = map.remove("content").unwrap_or(Value::Null);
            ContentBlock::ServerToolResult {
                kind,
                tool_use_id,
                content,
                extra: map,
            }
        }
        _ => ContentBlock::Opaque {
            vendor: Vendor::Anthropic,
            data: value.clone(),
        },
    };
    Ok(block)
}

fn decode_image_source(value: &Value) -> Result<ImageSource> {
    let map = to_object(value, "image.source")?;
    let get = |k: &str| map.get(k).and_then(Value::as_str).map(str::to_owned);
    match get("type").as_deref() {
        Some("base64") => Ok(ImageSource::Base64 {
            media_type: get("media_type")
                .ok_or_else(|| ConversionError::field("image.source.media_type"))?,
            data: get("data").ok_or_else(|| ConversionError::field("image.source.data"))?,
        }),
        Some("url") => Ok(ImageSource::Url {
            url: get("url").ok_or_else(|| ConversionError::field("image.source.url"))?,
        }),
        other => Err(ConversionError::UnknownValue {
            field: "image.source.type".into(),
            value: other.unwrap_or_default().into(),
        }),
    }
}

fn encode_image_source(source: &ImageSource) -> Value {
    match source {
        ImageSource::Base64 { media_type, data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        ImageSource::Url { url } => json!({"type": "url", "url": url}),
    }
}

fn encode_block(block: &ContentBlock, same: bool) -> Option<Value> {
    let value = match block {
        // Anthropic refuses empty text blocks, which other vendors send beside tool calls.
        ContentBlock::Text { text, .. } if text.is_empty() && !same => return None,
        ContentBlock::Text { text, extra } => {
            with_extra(json!({"type": "text", "text": text}), extra, same)
        }
        ContentBlock::Image { source, extra } => with_extra(
            json!({"type": "image", "source": encode_image_source(source)}),
            extra,
            same,
        ),
        ContentBlock::ToolCall(call) => {
            let mut v =
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input});
            if let Some(caller) = &call.caller {
                let mut c = obj(json!({"type": caller.kind}));
                if let Some(id) = &caller.tool_id {
                    c.insert("tool_id".into(), json!(id));
                }
                v["caller"] = Value::Object(c);
            }
            with_extra(v, &call.extra, same)
        }
        ContentBlock::ToolResult(result) => {
            let mut v = json!({"type": "tool_result", "tool_use_id": result.call_id});
            match &result.content {
                ToolResultContent::Text(t) => v["content"] = json!(t),
                ToolResultContent::Blocks(b) if b.is_empty() => {}
                ToolResultContent::Blocks(b) => v["content"] = Value::Array(encode_blocks(b, same)),
            }
            if result.is_error {
                v["is_error"] = json!(true);
            }
            with_extra(v, &result.extra, same)
        }
        ContentBlock::Reasoning {
            vendor: Vendor::Anthropic,
            data,
        } => data.clone(),
        ContentBlock::ServerToolCall {
            id,
            name,
            input,
            extra,
        } => with_extra(
            json!({"type": "server_tool_use", "id": id, "name": name, "input": input}),
            extra,
            same,
        ),
        ContentBlock::ServerToolResult {
            kind,
            tool_use_id,
            content,
            extra,
        } => with_extra(
            json!({"type": kind, "tool_use_id": tool_use_id, "content": content}),
            extra,
            same,
        ),
        ContentBlock::Opaque {
            vendor: Vendor::Anthropic,
            data,
        } => data.clone(),
        ContentBlock::Reasoning { .. } | ContentBlock::Opaque { .. } => return None,
    };
    Some(value)
}

fn decode_tool(value: &Value) -> Result<ToolDefinition> {
    let map = to_object(value, "tools[]")?;
    match map.get("type").and_then(Value::as_str) {
        None | Some("custom") => {}
        Some(kind) => {
            return Ok(ToolDefinition::BuiltIn {
                vendor: Vendor::Anthropic,
                kind: kind.to_owned(),
                data: value.clone(),
            });
        }
    }
    decode_function_tool(map, "input_schema")
}

fn with_extra(value: Value, extra: &Extra, same: bool) -> Value {
    let mut map = obj(value);
    extend(&mut map, extra, same);
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    /// Found by the property tests: `{}` decoded, re-encoded (with `"stop_reason": null`)
    /// and decoded again kept the nulls in `extra`.
    #[test]
    fn null_stop_fields_mean_none_and_do_not_reach_extra() {
        let turn = decode_response(&json!({})).unwrap();
        let again = decode_response(&encode_response(&turn)).unwrap();
        assert_eq!(again, turn);
        let turn = decode_response(&json!({"stop_reason": null, "stop_sequence": null})).unwrap();
        assert!(turn.extra.is_empty(), "{:?}", turn.extra);
    }
}
