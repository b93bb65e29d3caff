//! OpenAI Responses (`POST /responses`): requests, responses and stream events.
//!
//! Items map onto canonical messages: `message` items by role, `function_call` and
//! `reasoning` items into the assistant message, `function_call_output` items into the user
//! message. Item-level fields (`id`, `status`) ride in the first block's `extra` under
//! `item`, so a same-vendor round trip restores the item boundaries. Like Chat, Responses has
//! no tool-error flag (`is_error` results start with [`chat::ERROR_PREFIX`]).

use serde_json::{Map, Value, json};

use super::chat::{self, arguments_string, parse_arguments};
use super::json::{extend, obj, take_bool, take_str, take_u64, to_object};
use super::openai::{add_system_text, decode_usage, hosted_tool, put_tool_settings};
use super::request_fields::{
    decode_function_tool, encode_function_tool, encode_tools, finish_request, request_with_settings,
};
use super::{
    CODE_TOOL, ContentBlock, ConversionError, Extra, ImageSource, Message, PROGRAM_TOOL, Request,
    Role, StopReason, System, ToolCall, ToolCaller, ToolChoice, ToolDefinition, ToolResult,
    ToolResultContent, Turn, Vendor, is_code_tool_type,
};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

const ITEM: &str = "item";

/// Decode a `/responses` request body.
pub fn decode_request(body: &Value) -> Result<Request> {
    let mut map = to_object(body, "request")?;
    let model = take_str(&mut map, "model").unwrap_or_default();
    let mut system = take_str(&mut map, "instructions").map(System::Text);
    let messages = match map.remove("input") {
        Some(Value::String(s)) => {
            vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text(s)],
                content_was_string: true,
                extra: Extra::new(),
            }]
        }
        Some(Value::Array(items)) => decode_items(&items, &mut system)?,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("input")),
    };
    let tools = match map.remove("tools") {
        Some(Value::Array(items)) => items.iter().map(decode_tool).collect::<Result<_>>()?,
        _ => Vec::new(),
    };
    let tool_choice = match map.get("tool_choice").cloned() {
        Some(v) => match decode_tool_choice(&v) {
            Some(choice) => {
                map.remove("tool_choice");
                Some(choice)
            }
            // Other forms (`allowed_tools`, hosted tools) stay in `extra`.
            None => None,
        },
        None => None,
    };
    let parallel_tool_calls = take_bool(&mut map, "parallel_tool_calls");
    let max_tokens = take_u64(&mut map, "max_output_tokens");
    Ok(Request {
        origin: Some(Vendor::OpenaiResponses),
        model,
        system,
        messages,
        tools,
        tool_choice,
        parallel_tool_calls,
        max_tokens,
        stop_sequences: Vec::new(),
        ..request_with_settings(map)
    })
}

/// Encode a request as a `/responses` body. Stop sequences have no Responses field and are
/// dropped.
pub fn encode_request(request: &Request) -> Value {
    let same = request.origin == Some(Vendor::OpenaiResponses);
    let mut map = obj(json!({"model": request.model}));
    if let Some(system) = &request.system {
        map.insert("instructions".into(), json!(system.text()));
    }
    let input = match &request.messages[..] {
        [m] if m.role == Role::User && m.content_was_string && same => match &m.content[..] {
            [ContentBlock::Text { text, .. }] => json!(text),
            _ => Value::Array(encode_items(&request.messages, same, false)),
        },
        _ => Value::Array(encode_items(&request.messages, same, false)),
    };
    map.insert("input".into(), input);
    let tools = encode_tools(&request.tools, Vendor::OpenaiResponses, |t| {
        encode_function_tool(
            obj(json!({"type": "function", "name": t.name})),
            t,
            "parameters",
            same,
        )
    });
    let tool_choice = request.tool_choice.as_ref().map(encode_tool_choice);
    put_tool_settings(&mut map, request, tools, tool_choice, "max_output_tokens");
    finish_request(map, request, None, same)
}

fn push_block(messages: &mut Vec<Message>, role: Role, block: ContentBlock) {
    match messages.last_mut() {
        Some(last) if last.role == role => last.content.push(block),
        _ => messages.push(Message::new(role, vec![block])),
    }
}

fn decode_items(items: &[Value], system: &mut Option<System>) -> Result<Vec<Message>> {
    let mut messages: Vec<Message> = Vec::new();
    for item in items {
        let mut m = to_object(item, "input[]")?;
        let kind = m
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned();
        match kind.as_str() {
            "message" => {
                let role = take_str(&mut m, "role")
                    .ok_or_else(|| ConversionError::field("input[].role"))?;
                let role = match role.as_str() {
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "system" | "developer" => {
                        add_system_text(system, m.get("content"));
                        continue;
                    }
                    other => {
                        return Err(ConversionError::UnknownValue {
                            field: "input[].role".into(),
                            value: other.into(),
                        });
                    }
                };
                let (mut blocks, was_string) = match m.remove("content") {
                    Some(Value::String(s)) => (vec![ContentBlock::text(s)], true),
                    Some(Value::Array(parts)) => (decode_parts(&parts)?, false),
                    _ => return Err(ConversionError::field("input[].content")),
                };
                if was_string {
                    m.insert("content_was_string".into(), json!(true));
                }
                if let Some(first) = blocks.first_mut() {
                    set_item(first, m);
                }
                for block in blocks {
                    push_block(&mut messages, role, block);
                }
            }
            "function_call" => {
                m.remove("type");
                let call_id = take_str(&mut m, "call_id")
                    .ok_or_else(|| ConversionError::field("function_call.call_id"))?;
                let name = take_str(&mut m, "name")
                    .ok_or_else(|| ConversionError::field("function_call.name"))?;
                let arguments = take_str(&mut m, "arguments").unwrap_or_default();
                let caller = match m.remove("caller") {
                    Some(Value::Object(mut c)) => Some(ToolCaller {
                        kind: take_str(&mut c, "type").unwrap_or_default(),
                        tool_id: take_str(&mut c, "caller_id"),
                    }),
                    _ => None,
                };
                let call = ToolCall {
                    id: call_id,
                    name,
                    input: parse_arguments(&arguments),
                    caller,
                    extra: m,
                };
                push_block(&mut messages, Role::Assistant, ContentBlock::ToolCall(call));
            }
            "code_interpreter_call" => {
                // Code Cordon ran for the model: its call, and its result once it ended.
                let id = take_str(&mut m, "id")
                    .ok_or_else(|| ConversionError::field("code_interpreter_call.id"))?;
                let code = m.get("code").cloned().unwrap_or(Value::Null);
                // A program that waited for the client shows up twice: running, then done.
                let known = messages.iter().flat_map(|m| &m.content).any(
                    |b| matches!(b, ContentBlock::ServerToolCall { id: known, .. } if *known == id),
                );
                if !known {
                    push_block(
                        &mut messages,
                        Role::Assistant,
                        ContentBlock::ServerToolCall {
                            id: id.clone(),
                            name: CODE_TOOL.to_owned(),
                            input: json!({"code": code}),
                            extra: Map::new(),
                        },
                    );
                }
                let status = m.get("status").and_then(Value::as_str).unwrap_or_default();
                if matches!(status, "completed" | "failed") {
                    let logs: Vec<&str> = m
                        .get("outputs")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|o| o.get("logs").and_then(Value::as_str))
                        .collect();
                    push_block(
                        &mut messages,
                        Role::Assistant,
                        ContentBlock::ServerToolResult {
                            kind: "code_execution_tool_result".into(),
                            tool_use_id: id,
                            content: json!({
                                "type": "code_execution_result",
                                "stdout": logs.concat(),
                                "stderr": "",
                                "return_code": i32::from(status == "failed"),
                                "content": [],
                            }),
                            extra: Map::new(),
                        },
                    );
                }
            }
            "program" => {
                // A JavaScript program Cordon ran for the model (`programmatic_tool_calling`).
                let call_id = take_str(&mut m, "call_id")
                    .ok_or_else(|| ConversionError::field("program.call_id"))?;
                let known = messages.iter().flat_map(|m| &m.content).any(
                    |b| matches!(b, ContentBlock::ServerToolCall { id: known, .. } if *known == call_id),
                );
                if !known {
                    let code = m.get("code").cloned().unwrap_or(Value::Null);
                    push_block(
                        &mut messages,
                        Role::Assistant,
                        ContentBlock::ServerToolCall {
                            id: call_id,
                            name: PROGRAM_TOOL.to_owned(),
                            input: json!({"code": code}),
                            extra: Map::new(),
                        },
                    );
                }
            }
            "program_output" => {
                let call_id = take_str(&mut m, "call_id")
                    .ok_or_else(|| ConversionError::field("program_output.call_id"))?;
                let result = take_str(&mut m, "result").unwrap_or_default();
                let incomplete = m.get("status").and_then(Value::as_str) == Some("incomplete");
                push_block(
                    &mut messages,
                    Role::Assistant,
                    ContentBlock::ServerToolResult {
                        kind: "program_output".into(),
                        tool_use_id: call_id,
                        content: json!({
                            "type": "code_execution_result",
                            "stdout": result,
                            "stderr": "",
                            "return_code": i32::from(incomplete),
                            "content": [],
                        }),
                        extra: Map::new(),
                    },
                );
            }
            "function_call_output" => {
                m.remove("type");
                let call_id = take_str(&mut m, "call_id")
                    .ok_or_else(|| ConversionError::field("function_call_output.call_id"))?;
                let content = match m.remove("output") {
                    Some(Value::String(s)) => ToolResultContent::Text(s),
                    Some(Value::Array(parts)) => ToolResultContent::Blocks(decode_parts(&parts)?),
                    _ => ToolResultContent::Text(String::new()),
                };
                let result = ToolResult {
                    call_id,
                    content,
                    is_error: false,
                    extra: m,
                };
                push_block(&mut messages, Role::User, ContentBlock::ToolResult(result));
            }
            "reasoning" => push_block(
                &mut messages,
                Role::Assistant,
                ContentBlock::Reasoning {
                    vendor: Vendor::OpenaiResponses,
                    data: item.clone(),
                },
            ),
            other => {
                let role = if other.ends_with("_output") {
                    Role::User
                } else {
                    Role::Assistant
                };
                push_block(
                    &mut messages,
                    role,
                    ContentBlock::Opaque {
                        vendor: Vendor::OpenaiResponses,
                        data: item.clone(),
                    },
                );
            }
        }
    }
    Ok(messages)
}

fn set_item(block: &mut ContentBlock, item: Map<String, Value>) {
    if let ContentBlock::Text { extra, .. } | ContentBlock::Image { extra, .. } = block {
        extra.insert(ITEM.into(), Value::Object(item));
    }
}

fn decode_parts(parts: &[Value]) -> Result<Vec<ContentBlock>> {
    parts
        .iter()
        .map(|part| {
            let mut p = to_object(part, "content[]")?;
            match p.get("type").and_then(Value::as_str) {
                Some("input_text" | "output_text") => {
                    // The part type follows the role on the way out; other fields stay.
                    p.remove("type");
                    let text = take_str(&mut p, "text")
                        .ok_or_else(|| ConversionError::field("content[].text"))?;
                    Ok(ContentBlock::Text { text, extra: p })
                }
                Some("input_image") if p.get("image_url").is_some_and(Value::is_string) => {
                    p.remove("type");
                    let url = take_str(&mut p, "image_url").unwrap_or_default();
                    Ok(ContentBlock::Image {
                        source: ImageSource::from_url(&url),
                        extra: p,
                    })
                }
                _ => Ok(ContentBlock::Opaque {
                    vendor: Vendor::OpenaiResponses,
                    data: part.clone(),
                }),
            }
        })
        .collect()
}

fn encode_part(block: &ContentBlock, role: Role, same: bool) -> Option<Value> {
    let text_type = if role == Role::Assistant {
        "output_text"
    } else {
        "input_text"
    };
    let mut value = match block {
        ContentBlock::Text { text, extra } => {
            let mut m = obj(json!({"type": text_type, "text": text}));
            if role == Role::Assistant && !(same && extra.contains_key("annotations")) {
                m.insert("annotations".into(), json!([]));
            }
            extend(&mut m, extra, same);
            m
        }
        ContentBlock::Image { source, extra } => {
            let mut m = obj(json!({"type": "input_image", "image_url": source.to_url()}));
            if !same {
                m.insert("detail".into(), json!("auto"));
            }
            extend(&mut m, extra, same);
            m
        }
        ContentBlock::Opaque {
            vendor: Vendor::OpenaiResponses,
            data,
        } => return Some(data.clone()),
        _ => return None,
    };
    value.remove(ITEM);
    Some(Value::Object(value))
}

/// Encode canonical messages as `input` items, or as `output` items when `output`.
fn encode_items(messages: &[Message], same: bool, output: bool) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        // The message item being filled with parts, if any.
        let mut open: Option<Map<String, Value>> = None;
        let flush = |open: &mut Option<Map<String, Value>>, items: &mut Vec<Value>| {
            if let Some(item) = open.take() {
                items.push(Value::Object(item));
            }
        };
        for block in &message.content {
            match block {
                ContentBlock::Text { extra, .. } | ContentBlock::Image { extra, .. } => {
                    let item_fields = extra.get(ITEM).and_then(Value::as_object).filter(|_| same);
                    if item_fields.is_some() || open.is_none() {
                        flush(&mut open, &mut items);
                        let role = if message.role == Role::Assistant {
                            "assistant"
                        } else {
                            "user"
                        };
                        let mut item = obj(json!({"role": role, "content": []}));
                        if let Some(fields) = item_fields {
                            extend(&mut item, fields, true);
                        } else if message.role == Role::Assistant {
                            // An easy input message: output messages need an id and a status.
                            item = if output {
                                obj(json!({"type": "message", "role": "assistant", "content": []}))
                            } else {
                                obj(
                                    json!({"role": "assistant", "content": [], "content_was_string": true}),
                                )
                            };
                        }
                        open = Some(item);
                    }
                    if let (Some(item), Some(part)) =
                        (open.as_mut(), encode_part(block, message.role, same))
                        && let Some(Value::Array(parts)) = item.get_mut("content")
                    {
                        parts.push(part);
                    }
                }
                ContentBlock::ToolCall(call) => {
                    flush(&mut open, &mut items);
                    let mut item = obj(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments_string(&call.input),
                    }));
                    if let Some(caller) = &call.caller {
                        // Anthropic's `code_execution_*` caller is Responses' `program`.
                        let kind = if is_code_tool_type(&caller.kind) || caller.kind == PROGRAM_TOOL
                        {
                            "program"
                        } else {
                            &caller.kind
                        };
                        let mut c = obj(json!({"type": kind}));
                        if let Some(id) = &caller.tool_id {
                            c.insert("caller_id".into(), json!(id));
                        }
                        item.insert("caller".into(), Value::Object(c));
                    }
                    extend(&mut item, &call.extra, same);
                    items.push(Value::Object(item));
                }
                ContentBlock::ToolResult(result) => {
                    flush(&mut open, &mut items);
                    let output = match (&result.content, result.is_error) {
                        (ToolResultContent::Text(t), false) if same || !t.is_empty() => json!(t),
                        (content, true) => {
                            json!(format!("{}{}", chat::ERROR_PREFIX, content.text()))
                        }
                        (ToolResultContent::Blocks(b), false)
                            if b.iter().any(|b| matches!(b, ContentBlock::Image { .. })) =>
                        {
                            Value::Array(
                                b.iter()
                                    .filter_map(|b| encode_part(b, Role::User, same))
                                    .collect(),
                            )
                        }
                        (content, false) => json!(content.text()),
                    };
                    let mut item = obj(
                        json!({"type": "function_call_output", "call_id": result.call_id, "output": output}),
                    );
                    extend(&mut item, &result.extra, same);
                    items.push(Value::Object(item));
                }
                ContentBlock::Reasoning {
                    vendor: Vendor::OpenaiResponses,
                    data,
                }
                | ContentBlock::Opaque {
                    vendor: Vendor::OpenaiResponses,
                    data,
                } => {
                    flush(&mut open, &mut items);
                    items.push(data.clone());
                }
                // A JavaScript program run by the server: a `program` item (its
                // `fingerprint` names the container), then a `program_output` item.
                ContentBlock::ServerToolCall {
                    id, name, input, ..
                } if name == PROGRAM_TOOL => {
                    flush(&mut open, &mut items);
                    items.push(json!({
                        "type": "program", "id": format!("prog_{id}"), "call_id": id,
                        "code": input.get("code").and_then(Value::as_str).unwrap_or_default(),
                        "fingerprint": "",
                    }));
                }
                ContentBlock::ServerToolResult {
                    kind,
                    tool_use_id,
                    content,
                    ..
                } if kind == "program_output" => {
                    flush(&mut open, &mut items);
                    let mut result = String::new();
                    for key in ["stdout", "stderr"] {
                        result.push_str(content[key].as_str().unwrap_or_default());
                    }
                    if let Some(code) = content["error_code"].as_str() {
                        result.push_str(&format!("error: {code}"));
                    }
                    let incomplete = content["return_code"].as_i64().unwrap_or(0) != 0
                        || content["type"] == "code_execution_tool_result_error";
                    items.push(json!({
                        "type": "program_output", "id": format!("pout_{tool_use_id}"),
                        "call_id": tool_use_id, "result": result,
                        "status": if incomplete { "incomplete" } else { "completed" },
                    }));
                }
                // Code run by the server: one `code_interpreter_call` item, completed by
                // its result.
                ContentBlock::ServerToolCall { id, input, .. } => {
                    flush(&mut open, &mut items);
                    items.push(json!({
                        "type": "code_interpreter_call", "id": id,
                        "code": input.get("code").cloned().unwrap_or(Value::Null),
                        "container_id": "", "outputs": null, "status": "in_progress",
                    }));
                }
                ContentBlock::ServerToolResult {
                    tool_use_id,
                    content,
                    ..
                } => {
                    flush(&mut open, &mut items);
                    let found = items.iter().rposition(|item| {
                        item["type"] == "code_interpreter_call" && item["id"] == *tool_use_id
                    });
                    // The call went out in an earlier response (the program waited for the
                    // client): the result is an item of its own, with the call's id.
                    let at = found.unwrap_or_else(|| {
                        items.push(json!({
                            "type": "code_interpreter_call", "id": tool_use_id, "code": null,
                            "container_id": "", "outputs": null, "status": "in_progress",
                        }));
                        items.len() - 1
                    });
                    if let Some(item) = items.get_mut(at) {
                        let mut logs = String::new();
                        for key in ["stdout", "stderr"] {
                            logs.push_str(content[key].as_str().unwrap_or_default());
                        }
                        if let Some(code) = content["error_code"].as_str() {
                            logs.push_str(&format!("error: {code}"));
                        }
                        let failed = content["return_code"].as_i64().unwrap_or(0) != 0
                            || content["type"] == "code_execution_tool_result_error";
                        item["outputs"] = json!([{"type": "logs", "logs": logs}]);
                        item["status"] = json!(if failed { "failed" } else { "completed" });
                    }
                }
                _ => {}
            }
        }
        flush(&mut open, &mut items);
    }
    // A message item that was a bare string goes back as one.
    for item in &mut items {
        if let Value::Object(m) = item
            && m.remove("content_was_string").is_some()
            && let Some(Value::Array(parts)) = m.get("content")
            && let [part] = &parts[..]
            && let Some(text) = part.get("text").cloned()
        {
            m.insert("content".into(), text);
        }
    }
    items
}

fn decode_tool(value: &Value) -> Result<ToolDefinition> {
    let mut m = to_object(value, "tools[]")?;
    if let Some(hosted) = hosted_tool(value, Vendor::OpenaiResponses) {
        return Ok(hosted);
    }
    m.remove("type");
    decode_function_tool(m, "parameters")
}

fn decode_tool_choice(value: &Value) -> Option<ToolChoice> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Some(ToolChoice::Auto),
            "required" => Some(ToolChoice::Any),
            "none" => Some(ToolChoice::None),
            _ => None,
        },
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("function") => m
            .get("name")
            .and_then(Value::as_str)
            .map(|name| ToolChoice::Tool {
                name: name.to_owned(),
            }),
        _ => None,
    }
}

fn encode_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::Any => json!("required"),
        ToolChoice::None => json!("none"),
        ToolChoice::Tool { name } => json!({"type": "function", "name": name}),
    }
}

/// Decode a `response` object.
pub fn decode_response(body: &Value) -> Result<Turn> {
    let mut map = to_object(body, "response")?;
    let id = take_str(&mut map, "id").unwrap_or_default();
    let model = take_str(&mut map, "model").unwrap_or_default();
    let output = match map.remove("output") {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    };
    let mut ignored_system = None;
    let content: Vec<ContentBlock> = decode_items(&output, &mut ignored_system)?
        .into_iter()
        .flat_map(|m| m.content)
        .collect();
    let incomplete = map
        .get("incomplete_details")
        .and_then(|d| d.get("reason"))
        .and_then(Value::as_str);
    let stop_reason = match incomplete {
        Some("max_output_tokens") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        Some(other) => StopReason::Other(other.to_owned()),
        None if content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_))) =>
        {
            StopReason::ToolUse
        }
        None => StopReason::EndTurn,
    };
    let usage = decode_usage(
        map.remove("usage"),
        "input_tokens",
        "output_tokens",
        "input_tokens_details",
    );
    Ok(Turn {
        origin: Some(Vendor::OpenaiResponses),
        id,
        model,
        content,
        stop_reason: Some(stop_reason),
        stop_sequence: None,
        usage,
        container: None,
        extra: map,
    })
}

/// Encode a turn as a `response` object.
pub fn encode_response(turn: &Turn) -> Value {
    let same = turn.origin == Some(Vendor::OpenaiResponses);
    let message = Message::new(Role::Assistant, turn.content.clone());
    let mut output = encode_items(std::slice::from_ref(&message), same, true);
    // Code calls name the container they ran in.
    if let Some(container) = &turn.container {
        for item in &mut output {
            if item["type"] == "code_interpreter_call" {
                item["container_id"] = json!(container.id);
            }
            if item["type"] == "program" {
                item["fingerprint"] = json!(container.id);
            }
        }
    }
    // Output items always carry an id and a status (input items need not).
    for (n, item) in output.iter_mut().enumerate() {
        if let Value::Object(item) = item {
            let prefix = match item.get("type").and_then(Value::as_str) {
                Some("function_call") => "fc",
                Some("message") => "msg",
                _ => continue,
            };
            item.entry("id")
                .or_insert_with(|| json!(format!("{prefix}_{}_{n}", turn.id)));
            item.entry("status").or_insert_with(|| json!("completed"));
        }
    }
    let (status, incomplete) = match &turn.stop_reason {
        Some(StopReason::MaxTokens) => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some(StopReason::Refusal) => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    };
    let mut map = obj(json!({
        "id": turn.id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "incomplete_details": incomplete,
        "model": turn.model,
        "output": output,
        // The request's settings echoed; a gateway overwrites them with the client's.
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
    }));
    let mut usage = obj(json!({
        "input_tokens": turn.usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": turn.usage.cache_read_input_tokens.unwrap_or(0),
            "cache_write_tokens": turn.usage.cache_creation_input_tokens.unwrap_or(0),
        },
        "output_tokens": turn.usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.usage.input_tokens + turn.usage.output_tokens,
    }));
    extend(&mut usage, &turn.usage.extra, same);
    map.insert("usage".into(), Value::Object(usage));
    extend(&mut map, &turn.extra, same);
    Value::Object(map)
}
