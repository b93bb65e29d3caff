//! Gemini `generateContent` (`POST /v1beta/models/{model}:generateContent`): requests,
//! responses ([`decode_response`], [`encode_response`]) and, in [`super::stream`], its
//! `streamGenerateContent?alt=sse` chunks.
//!
//! `contents` map onto messages (`user` and `model`), `systemInstruction` onto the system
//! text, `tools[].functionDeclarations` onto function tools (`parameters` or
//! `parametersJsonSchema`; the REST API's `snake_case` spellings are read too), other tools
//! (`computerUse`, `googleSearch`, `codeExecution`, …) onto Gemini built-ins named by their
//! key, `toolConfig.functionCallingConfig` onto the tool choice and `generationConfig`'s
//! `maxOutputTokens`, `temperature`, `topP`, `stopSequences` onto the request's settings;
//! what else `generationConfig` and `toolConfig` hold (`thinkingConfig`, `topK`, …) goes
//! back to Gemini as it came. The model is the URL's: a gateway puts it in `model`, and
//! `stream` when the client called `streamGenerateContent`. See `gemini_parts.rs`
//! for parts, thought signatures and call ids.

use serde_json::{Map, Value, json};

use super::gemini_parts::{
    PartStyle, call_names, decode_contents, encode_content, encode_parts, take_field,
};
use super::json::{obj, strings, take_bool, take_f64, take_str, to_object};
use super::{
    ContentBlock, ConversionError, FunctionTool, Request, System, ToolChoice, ToolDefinition,
    Vendor,
};

pub use super::gemini_parts::{SYNTHESIZED_CALL_PREFIX, is_synthesized_call_id};
pub use super::gemini_response::{decode_response, decode_response_at, encode_response};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// The type Gemini's computer-use tool has in the canonical tool list.
pub const COMPUTER_USE: &str = "computerUse";

/// Set in a function tool's `extra` when it was declared with `parametersJsonSchema`.
const JSON_SCHEMA_KEY: &str = "parametersJsonSchema";

/// Decode a `generateContent` request body (with `model`, and `stream` when streamed).
pub fn decode_request(body: &Value) -> Result<Request> {
    let mut map = to_object(body, "request")?;
    let model = take_str(&mut map, "model")
        .map(|m| m.strip_prefix("models/").map(str::to_owned).unwrap_or(m))
        .unwrap_or_default();
    let stream = take_bool(&mut map, "stream").unwrap_or(false);
    let system = match take_field(&mut map, "systemInstruction") {
        None => None,
        Some(Value::String(text)) => Some(System::Text(text)),
        Some(value) => Some(decode_system(&value)?),
    };
    let messages = match take_field(&mut map, "contents") {
        Some(Value::Array(items)) => decode_contents(&items)?,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("contents")),
    };
    let tools = match take_field(&mut map, "tools") {
        Some(Value::Array(items)) => decode_tools(&items)?,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("tools")),
    };
    let mut tool_choice = None;
    if let Some(value) = take_field(&mut map, "toolConfig") {
        let mut config = to_object(&value, "toolConfig")?;
        if let Some(calling) = take_field(&mut config, "functionCallingConfig") {
            match decode_calling_config(&calling)? {
                Some(choice) => tool_choice = Some(choice),
                None => {
                    config.insert("functionCallingConfig".into(), calling);
                }
            }
        }
        if !config.is_empty() {
            map.insert("toolConfig".into(), Value::Object(config));
        }
    }
    let mut request = Request {
        origin: Some(Vendor::Gemini),
        model,
        system,
        messages,
        tools,
        tool_choice,
        stream,
        ..Request::default()
    };
    if let Some(value) = take_field(&mut map, "generationConfig") {
        let mut config = to_object(&value, "generationConfig")?;
        request.max_tokens = take_field(&mut config, "maxOutputTokens").and_then(|v| v.as_u64());
        request.temperature = take_f64(&mut config, "temperature");
        request.top_p = take_field(&mut config, "topP").and_then(|v| v.as_f64());
        request.stop_sequences = strings(take_field(&mut config, "stopSequences"));
        if !config.is_empty() {
            map.insert("generationConfig".into(), Value::Object(config));
        }
    }
    request.extra = map;
    Ok(request)
}

/// Encode a request as a `generateContent` body (the model and streaming go in the URL).
/// Call ids Cordon made for calls that had none are left out.
pub fn encode_request(request: &Request) -> Value {
    let same = request.origin == Some(Vendor::Gemini);
    let style = PartStyle {
        same,
        drop_synthesized_ids: true,
    };
    let names = call_names(&request.messages);
    let mut map = Map::new();
    // A message left without parts (another vendor's reasoning only) is left out: Gemini
    // refuses a content without parts.
    let contents: Vec<Value> = request
        .messages
        .iter()
        .map(|m| encode_content(m, &names, style))
        .filter(|c| c["parts"].as_array().is_some_and(|p| !p.is_empty()))
        .collect();
    map.insert("contents".into(), Value::Array(contents));
    if let Some(system) = &request.system {
        let parts = match system {
            System::Text(text) => vec![json!({"text": text})],
            System::Blocks(blocks) => encode_parts(blocks, &names, style),
        };
        map.insert("systemInstruction".into(), json!({"parts": parts}));
    }
    let tools = encode_tools(&request.tools, same);
    if !tools.is_empty() {
        map.insert("tools".into(), Value::Array(tools));
    }
    let mut tool_config = kept(request, "toolConfig", same);
    if let Some(choice) = &request.tool_choice {
        tool_config.insert("functionCallingConfig".into(), encode_choice(choice));
    }
    if !tool_config.is_empty() {
        map.insert("toolConfig".into(), Value::Object(tool_config));
    }
    let mut generation = kept(request, "generationConfig", same);
    if let Some(max) = request.max_tokens {
        generation.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(t) = request.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(p) = request.top_p {
        generation.insert("topP".into(), json!(p));
    }
    if !request.stop_sequences.is_empty() {
        generation.insert("stopSequences".into(), json!(request.stop_sequences));
    }
    if !generation.is_empty() {
        map.insert("generationConfig".into(), Value::Object(generation));
    }
    if same {
        for (k, v) in &request.extra {
            if k != "toolConfig" && k != "generationConfig" {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(map)
}

/// What `extra` holds under `key` (an object Gemini sent and the canonical request does
/// not name all of), when the request came from Gemini.
fn kept(request: &Request, key: &str, same: bool) -> Map<String, Value> {
    match request.extra.get(key) {
        Some(Value::Object(map)) if same => map.clone(),
        _ => Map::new(),
    }
}

fn decode_system(value: &Value) -> Result<System> {
    let mut map = to_object(value, "systemInstruction")?;
    let parts = match take_field(&mut map, "parts") {
        Some(Value::Array(parts)) => parts,
        _ => return Err(ConversionError::field("systemInstruction.parts")),
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for part in &parts {
        let text = part
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| ConversionError::field("systemInstruction.parts[].text"))?;
        blocks.push(ContentBlock::text(text));
    }
    Ok(match blocks.as_slice() {
        [ContentBlock::Text { text, .. }] => System::Text(text.clone()),
        _ => System::Blocks(blocks),
    })
}

/// Each Tool object's `functionDeclarations` as function tools, its other keys as Gemini
/// built-ins (a tool of its own each).
fn decode_tools(items: &[Value]) -> Result<Vec<ToolDefinition>> {
    let mut tools = Vec::new();
    for item in items {
        let mut map = to_object(item, "tools[]")?;
        if let Some(declarations) = take_field(&mut map, "functionDeclarations") {
            let Value::Array(declarations) = declarations else {
                return Err(ConversionError::field("tools[].functionDeclarations"));
            };
            for declaration in &declarations {
                tools.push(decode_function(declaration)?);
            }
        }
        for (key, value) in map {
            let kind = camel(&key);
            tools.push(ToolDefinition::BuiltIn {
                vendor: Vendor::Gemini,
                data: json!({ kind.clone(): value }),
                kind,
            });
        }
    }
    Ok(tools)
}

/// `snake_case` as `camelCase` (a built-in tool's key, named one way in the canonical list).
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn decode_function(value: &Value) -> Result<ToolDefinition> {
    let mut map = to_object(value, "functionDeclarations[]")?;
    let name = take_str(&mut map, "name")
        .ok_or_else(|| ConversionError::field("functionDeclarations[].name"))?;
    let description = take_str(&mut map, "description");
    let input_schema = if let Some(schema) = take_field(&mut map, JSON_SCHEMA_KEY) {
        map.insert(JSON_SCHEMA_KEY.into(), json!(true));
        schema
    } else {
        match take_field(&mut map, "parameters") {
            Some(schema) => lowercase_types(schema),
            None => json!({"type": "object", "properties": {}}),
        }
    };
    Ok(ToolDefinition::Function(FunctionTool {
        name,
        description,
        input_schema,
        allowed_callers: Vec::new(),
        extra: map,
    }))
}

/// An OpenAPI schema as Gemini's SDKs write it (`"type": "OBJECT"`) with JSON Schema's
/// lowercase type names, which every vendor takes. Iterative: a deep schema from a client
/// cannot overflow the stack.
fn lowercase_types(mut schema: Value) -> Value {
    let mut pending: Vec<&mut Value> = vec![&mut schema];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if key == "type"
                        && let Value::String(kind) = child
                    {
                        *kind = kind.to_ascii_lowercase();
                    } else {
                        pending.push(child);
                    }
                }
            }
            Value::Array(items) => pending.extend(items.iter_mut()),
            _ => {}
        }
    }
    schema
}

fn encode_tools(tools: &[ToolDefinition], same: bool) -> Vec<Value> {
    let mut declarations = Vec::new();
    let mut built_ins = Vec::new();
    for tool in tools.iter().filter(|t| t.reaches(Vendor::Gemini)) {
        match tool {
            ToolDefinition::Function(f) => declarations.push(encode_function(f, same)),
            ToolDefinition::BuiltIn { data, .. } => built_ins.push(data.clone()),
        }
    }
    let mut out = Vec::new();
    if !declarations.is_empty() {
        out.push(json!({"functionDeclarations": declarations}));
    }
    out.extend(built_ins);
    out
}

/// A function declaration. Its schema goes as `parametersJsonSchema` (full JSON Schema)
/// unless it came from Gemini as `parameters`.
fn encode_function(tool: &FunctionTool, same: bool) -> Value {
    let mut map = obj(json!({"name": tool.name}));
    if let Some(d) = &tool.description {
        map.insert("description".into(), json!(d));
    }
    let key = if !same || tool.extra.contains_key(JSON_SCHEMA_KEY) {
        JSON_SCHEMA_KEY
    } else {
        "parameters"
    };
    map.insert(key.into(), tool.input_schema.clone());
    if same {
        for (k, v) in &tool.extra {
            if k != JSON_SCHEMA_KEY {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(map)
}

/// `functionCallingConfig` as a tool choice; `None` for what the choice cannot say
/// (`VALIDATED`, several allowed names), which stays in `extra`.
fn decode_calling_config(value: &Value) -> Result<Option<ToolChoice>> {
    let mut map = to_object(value, "toolConfig.functionCallingConfig")?;
    let mode = take_str(&mut map, "mode").unwrap_or_else(|| "AUTO".into());
    let names = strings(take_field(&mut map, "allowedFunctionNames"));
    if !map.is_empty() {
        return Ok(None);
    }
    Ok(
        match (mode.to_ascii_uppercase().as_str(), names.as_slice()) {
            ("AUTO" | "MODE_UNSPECIFIED", []) => Some(ToolChoice::Auto),
            ("NONE", []) => Some(ToolChoice::None),
            ("ANY", []) => Some(ToolChoice::Any),
            ("ANY", [name]) => Some(ToolChoice::Tool { name: name.clone() }),
            _ => None,
        },
    )
}

fn encode_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::Any => json!({"mode": "ANY"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Tool { name } => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }
}
