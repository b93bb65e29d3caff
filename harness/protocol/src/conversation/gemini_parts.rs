//! Gemini `Content`s and their parts ↔ canonical messages and blocks.
//!
//! Parts map one to one onto blocks: `text`, `inlineData`/`fileData` images, `functionCall`,
//! `functionResponse`; a `thought: true` part is Gemini reasoning kept whole. A
//! `thoughtSignature` on any other part becomes a Gemini reasoning block of its own just
//! after that part's block, `{"thoughtSignature", "signs": <part kind>}`: other encoders
//! drop it like any reasoning of another vendor (and the gateway keeps it aside for the
//! model), and Gemini's encoder puts it back on the part before it, or, when that part is
//! not of its kind (reasoning a gateway put back first), on the next part of its kind.
//!
//! Gemini call ids are optional. A call without one gets an id of Cordon's own starting
//! with [`SYNTHESIZED_CALL_PREFIX`] (by position in a request; the gateway renames those of
//! an upstream's turn), a `functionResponse` without one answers the first unanswered call
//! of that name in the model content before it, and ids of Cordon's own never go to a
//! Gemini upstream.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::json::{obj, take_str, to_object};
use super::{
    ContentBlock, ConversionError, Extra, ImageSource, Message, Role, ToolCall, ToolResult,
    ToolResultContent, Vendor,
};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// How call ids Cordon made for Gemini calls without one begin.
pub const SYNTHESIZED_CALL_PREFIX: &str = "gcall_";

/// Whether `id` is one Cordon made for a Gemini call that had none.
pub fn is_synthesized_call_id(id: &str) -> bool {
    id.starts_with(SYNTHESIZED_CALL_PREFIX)
}

/// `camelCase` as `snake_case` (Gemini's REST API takes both spellings of every field).
fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Removes and returns the field `camel`, or its `snake_case` spelling; `null` is absent.
pub(crate) fn take_field(map: &mut Map<String, Value>, camel: &str) -> Option<Value> {
    let value = map.remove(camel).or_else(|| map.remove(&snake(camel)));
    value.filter(|v| !v.is_null())
}

/// The string field `camel` (either spelling), removed.
fn take_text(map: &mut Map<String, Value>, camel: &str) -> Option<String> {
    match take_field(map, camel) {
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            map.insert(camel.to_owned(), other);
            None
        }
        None => None,
    }
}

/// The part kinds Cordon reads (its key), else `None`.
const KINDS: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
];

fn kind_of(map: &Map<String, Value>) -> Option<&'static str> {
    KINDS
        .iter()
        .copied()
        .find(|k| map.contains_key(*k) || map.contains_key(&snake(k)))
}

/// Calls of the model content before a user content, for pairing responses without ids.
#[derive(Default)]
pub(crate) struct OpenCalls {
    calls: Vec<(String, String, bool)>,
}

impl OpenCalls {
    /// The first unanswered call named `name`, marked answered.
    fn answer(&mut self, name: &str) -> Option<String> {
        let call = self
            .calls
            .iter_mut()
            .find(|(_, n, answered)| n == name && !answered)?;
        call.2 = true;
        Some(call.0.clone())
    }

    fn of(content: &[ContentBlock]) -> Self {
        OpenCalls {
            calls: content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(c) => Some((c.id.clone(), c.name.clone(), false)),
                    _ => None,
                })
                .collect(),
        }
    }
}

/// Decodes `contents` (a request's conversation).
pub(crate) fn decode_contents(items: &[Value]) -> Result<Vec<Message>> {
    let mut messages = Vec::with_capacity(items.len());
    let mut open = OpenCalls::default();
    for (index, item) in items.iter().enumerate() {
        let mut map = to_object(item, "contents[]")?;
        let role = match take_str(&mut map, "role").as_deref() {
            // A content without a role is the user's; `function` is the older name of the
            // role holding function responses.
            None | Some("user") | Some("function") => Role::User,
            Some("model") => Role::Assistant,
            Some(other) => {
                return Err(ConversionError::UnknownValue {
                    field: "contents[].role".into(),
                    value: other.into(),
                });
            }
        };
        let parts = match take_field(&mut map, "parts") {
            Some(Value::Array(parts)) => parts,
            None => Vec::new(),
            Some(_) => return Err(ConversionError::field("contents[].parts")),
        };
        let content = decode_parts(&parts, &format!("m{index}p"), &mut open)?;
        open = if role == Role::Assistant {
            OpenCalls::of(&content)
        } else {
            OpenCalls::default()
        };
        messages.push(Message {
            role,
            content,
            content_was_string: false,
            extra: map,
        });
    }
    Ok(messages)
}

/// Decodes the parts of one content; calls without an id get `gcall_{position}{index}`.
pub(crate) fn decode_parts(
    parts: &[Value],
    position: &str,
    open: &mut OpenCalls,
) -> Result<Vec<ContentBlock>> {
    let mut blocks = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        let synthesized = format!("{SYNTHESIZED_CALL_PREFIX}{position}{index}");
        decode_part(part, &synthesized, open, &mut blocks)?;
    }
    Ok(blocks)
}

fn decode_part(
    value: &Value,
    synthesized_id: &str,
    open: &mut OpenCalls,
    out: &mut Vec<ContentBlock>,
) -> Result<()> {
    let mut map = to_object(value, "parts[]")?;
    let opaque = ContentBlock::Opaque {
        vendor: Vendor::Gemini,
        data: value.clone(),
    };
    if map.get("thought") == Some(&Value::Bool(true)) {
        out.push(ContentBlock::Reasoning {
            vendor: Vendor::Gemini,
            data: value.clone(),
        });
        return Ok(());
    }
    let Some(kind) = kind_of(&map) else {
        out.push(opaque);
        return Ok(());
    };
    let signature = take_text(&mut map, "thoughtSignature");
    let block = match kind {
        "text" => match take_text(&mut map, "text") {
            Some(text) => ContentBlock::Text { text, extra: map },
            None => return Err(ConversionError::field("parts[].text")),
        },
        "inlineData" | "fileData" => {
            let data = take_field(&mut map, kind).unwrap_or(Value::Null);
            match decode_media(kind, &data)? {
                Some(source) => ContentBlock::Image { source, extra: map },
                // Audio, video, documents: kept whole for Gemini.
                None => {
                    out.push(opaque);
                    return Ok(());
                }
            }
        }
        "functionCall" => {
            let mut call = take_field(&mut map, "functionCall")
                .as_ref()
                .map(|v| to_object(v, "parts[].functionCall"))
                .transpose()?
                .unwrap_or_default();
            let name = take_str(&mut call, "name")
                .ok_or_else(|| ConversionError::field("parts[].functionCall.name"))?;
            let id = take_str(&mut call, "id").unwrap_or_else(|| synthesized_id.to_owned());
            let input = take_field(&mut call, "args").unwrap_or_else(|| json!({}));
            if !call.is_empty() {
                map.insert("functionCall".into(), Value::Object(call));
            }
            ContentBlock::ToolCall(ToolCall {
                id,
                name,
                input,
                caller: None,
                extra: map,
            })
        }
        _ => {
            let mut response = take_field(&mut map, "functionResponse")
                .as_ref()
                .map(|v| to_object(v, "parts[].functionResponse"))
                .transpose()?
                .unwrap_or_default();
            let name = take_str(&mut response, "name")
                .ok_or_else(|| ConversionError::field("parts[].functionResponse.name"))?;
            let call_id = take_str(&mut response, "id")
                .or_else(|| open.answer(&name))
                .unwrap_or_else(|| synthesized_id.to_owned());
            let body = take_field(&mut response, "response").unwrap_or_else(|| json!({}));
            let (text, is_error) = response_text(&body);
            let mut blocks = Vec::new();
            if let Some(Value::Array(parts)) = take_field(&mut response, "parts") {
                for part in &parts {
                    let mut part = to_object(part, "functionResponse.parts[]")?;
                    let media = kind_of(&part)
                        .filter(|k| *k == "inlineData" || *k == "fileData")
                        .and_then(|k| Some((k, take_field(&mut part, k)?)));
                    match media {
                        Some((k, data)) => match decode_media(k, &data)? {
                            Some(source) => blocks.push(ContentBlock::Image {
                                source,
                                extra: part,
                            }),
                            None => {
                                return Err(ConversionError::field(
                                    "functionResponse.parts[] (only images are taken)",
                                ));
                            }
                        },
                        None => {
                            return Err(ConversionError::field(
                                "functionResponse.parts[].inlineData",
                            ));
                        }
                    }
                }
            }
            let content = if blocks.is_empty() {
                ToolResultContent::Text(text)
            } else {
                blocks.insert(0, ContentBlock::text(text));
                ToolResultContent::Blocks(blocks)
            };
            // The name stays with the result: the encoder needs it when the call is not in
            // the same request.
            response.insert("name".into(), json!(name));
            map.insert("functionResponse".into(), Value::Object(response));
            ContentBlock::ToolResult(ToolResult {
                call_id,
                content,
                is_error,
                extra: map,
            })
        }
    };
    out.push(block);
    if let Some(signature) = signature {
        out.push(ContentBlock::Reasoning {
            vendor: Vendor::Gemini,
            data: json!({"thoughtSignature": signature, "signs": kind}),
        });
    }
    Ok(())
}

/// The blocks of part `index` of a response's candidate, as [`decode_parts`] gives them
/// for the whole candidate with the same `position` (a stream decodes its parts one at a
/// time).
pub(crate) fn decode_response_part(
    part: &Value,
    position: &str,
    index: usize,
) -> Result<Vec<ContentBlock>> {
    let mut blocks = Vec::with_capacity(2);
    let synthesized = format!("{SYNTHESIZED_CALL_PREFIX}{position}{index}");
    decode_part(part, &synthesized, &mut OpenCalls::default(), &mut blocks)?;
    Ok(blocks)
}

/// The position a response's calls without ids are numbered under unless the caller names
/// one (a gateway names one per turn, so ids stay unique in a conversation).
pub(crate) const RESPONSE_POSITION: &str = "t";

/// A function response's `response` as tool-result text: `{"result": text}` and
/// `{"error": text}` as their text (the second an error), anything else as its JSON.
fn response_text(response: &Value) -> (String, bool) {
    if let Some(map) = response.as_object()
        && map.len() == 1
        && let Some((key, Value::String(text))) = map.iter().next()
        && (key == "result" || key == "error")
        && !parses_as_object(text)
    {
        return (text.clone(), key == "error");
    }
    (response.to_string(), false)
}

fn parses_as_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(text).is_ok_and(|v| v.is_object())
}

/// An image's source from `inlineData {mimeType, data}` or `fileData {mimeType, fileUri}`;
/// `None` for media other than images.
fn decode_media(kind: &str, data: &Value) -> Result<Option<ImageSource>> {
    let mut map = to_object(data, kind)?;
    let media_type = take_text(&mut map, "mimeType").unwrap_or_default();
    if !media_type.starts_with("image/") {
        return Ok(None);
    }
    if kind == "inlineData" {
        let data =
            take_text(&mut map, "data").ok_or_else(|| ConversionError::field("inlineData.data"))?;
        Ok(Some(ImageSource::Base64 { media_type, data }))
    } else {
        let url = take_text(&mut map, "fileUri")
            .ok_or_else(|| ConversionError::field("fileData.fileUri"))?;
        Ok(Some(ImageSource::Url { url }))
    }
}

/// How parts are written: for an upstream (ids Cordon made left out) or for a client.
#[derive(Clone, Copy)]
pub(crate) struct PartStyle {
    /// The blocks came from Gemini: their `extra` fields go back.
    pub(crate) same: bool,
    /// Leave out call ids Cordon made (the upstream never saw them).
    pub(crate) drop_synthesized_ids: bool,
}

/// The call names by id over `messages`, for writing function responses.
pub(crate) fn call_names(messages: &[Message]) -> HashMap<String, String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some((c.id.clone(), c.name.clone())),
            _ => None,
        })
        .collect()
}

/// A message as a Gemini `Content`.
pub(crate) fn encode_content(
    message: &Message,
    names: &HashMap<String, String>,
    style: PartStyle,
) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "model",
    };
    let mut map = obj(json!({"role": role, "parts": encode_parts(&message.content, names, style)}));
    extend_part(&mut map, &message.extra, style.same);
    Value::Object(map)
}

/// Blocks as Gemini parts: other vendors' reasoning and opaque blocks are left out, and a
/// thought signature goes back on the next part of the kind it came with.
pub(crate) fn encode_parts(
    blocks: &[ContentBlock],
    names: &HashMap<String, String>,
    style: PartStyle,
) -> Vec<Value> {
    let mut parts: Vec<Value> = Vec::with_capacity(blocks.len());
    let mut pending: Vec<(String, String)> = Vec::new();
    for block in blocks {
        let (kind, mut part) = match block {
            ContentBlock::Reasoning {
                vendor: Vendor::Gemini,
                data,
            } => {
                if let (Some(signature), None) = (
                    data.get("thoughtSignature").and_then(Value::as_str),
                    data.get("thought"),
                ) {
                    let signs = data["signs"].as_str().unwrap_or("text");
                    let last = parts.last_mut().and_then(Value::as_object_mut);
                    match last {
                        Some(last) if signable(last, signs) => {
                            last.insert("thoughtSignature".into(), json!(signature));
                        }
                        _ => pending.push((signature.to_owned(), signs.to_owned())),
                    }
                } else {
                    parts.push(data.clone());
                }
                continue;
            }
            ContentBlock::Opaque {
                vendor: Vendor::Gemini,
                data,
            } => {
                parts.push(data.clone());
                continue;
            }
            // Other vendors send empty text beside calls; Gemini has no use for it.
            ContentBlock::Text { text, .. } if text.is_empty() && !style.same => continue,
            ContentBlock::Text { text, extra } => {
                let mut part = obj(json!({"text": text}));
                extend_part(&mut part, extra, style.same);
                ("text", part)
            }
            ContentBlock::Image { source, extra } => {
                let mut part = encode_media(source);
                extend_part(&mut part, extra, style.same);
                (
                    if part.contains_key("inlineData") {
                        "inlineData"
                    } else {
                        "fileData"
                    },
                    part,
                )
            }
            ContentBlock::ToolCall(call) => ("functionCall", encode_call(call, style)),
            ContentBlock::ToolResult(result) => {
                ("functionResponse", encode_result(result, names, style))
            }
            ContentBlock::Reasoning { .. }
            | ContentBlock::Opaque { .. }
            | ContentBlock::ServerToolCall { .. }
            | ContentBlock::ServerToolResult { .. } => continue,
        };
        if let Some(at) = pending.iter().position(|(_, signs)| signs == kind) {
            let (signature, _) = pending.remove(at);
            part.insert("thoughtSignature".into(), json!(signature));
        }
        parts.push(Value::Object(part));
    }
    // A text signature whose text was left out (another encoder's empty text) still goes
    // back, on an empty text part as Gemini itself sends it.
    for (signature, signs) in pending {
        if signs == "text" {
            parts.push(json!({"text": "", "thoughtSignature": signature}));
        }
    }
    parts
}

/// Whether a written part is of kind `signs` and carries no signature yet.
fn signable(part: &Map<String, Value>, signs: &str) -> bool {
    part.contains_key(signs)
        && !part.contains_key("thoughtSignature")
        && !part.contains_key("thought")
}

fn encode_call(call: &ToolCall, style: PartStyle) -> Map<String, Value> {
    let mut inner = match call.extra.get("functionCall") {
        Some(Value::Object(kept)) if style.same => kept.clone(),
        _ => Map::new(),
    };
    inner.insert("name".into(), json!(call.name));
    inner.insert("args".into(), call.input.clone());
    if !(style.drop_synthesized_ids && is_synthesized_call_id(&call.id)) {
        inner.insert("id".into(), json!(call.id));
    }
    let mut part = obj(json!({"functionCall": inner}));
    extend_part(&mut part, &call.extra, style.same);
    part
}

fn encode_result(
    result: &ToolResult,
    names: &HashMap<String, String>,
    style: PartStyle,
) -> Map<String, Value> {
    let kept = match result.extra.get("functionResponse") {
        Some(Value::Object(kept)) => kept.clone(),
        _ => Map::new(),
    };
    let name = names
        .get(&result.call_id)
        .cloned()
        .or_else(|| kept.get("name").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| result.call_id.clone());
    let mut inner = if style.same { kept } else { Map::new() };
    inner.insert("name".into(), json!(name));
    let (text, images): (Vec<&ContentBlock>, Vec<&ContentBlock>) = match &result.content {
        ToolResultContent::Text(_) => (Vec::new(), Vec::new()),
        ToolResultContent::Blocks(blocks) => blocks
            .iter()
            .filter(|b| matches!(b, ContentBlock::Text { .. } | ContentBlock::Image { .. }))
            .partition(|b| matches!(b, ContentBlock::Text { .. })),
    };
    let text = match &result.content {
        ToolResultContent::Text(t) => t.clone(),
        ToolResultContent::Blocks(_) => text
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    let response = match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) if parses_as_object(&text) && !result.is_error => object,
        _ if result.is_error => json!({"error": text}),
        _ => json!({"result": text}),
    };
    inner.insert("response".into(), response);
    if !images.is_empty() {
        let parts: Vec<Value> = images
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Image { source, .. } => Some(Value::Object(encode_media(source))),
                _ => None,
            })
            .collect();
        inner.insert("parts".into(), Value::Array(parts));
    }
    if !(style.drop_synthesized_ids && is_synthesized_call_id(&result.call_id)) {
        inner.insert("id".into(), json!(result.call_id));
    }
    let mut part = obj(json!({"functionResponse": inner}));
    extend_part(&mut part, &result.extra, style.same);
    part
}

/// An image as `inlineData` or `fileData`.
fn encode_media(source: &ImageSource) -> Map<String, Value> {
    match source {
        ImageSource::Base64 { media_type, data } => {
            obj(json!({"inlineData": {"mimeType": media_type, "data": data}}))
        }
        ImageSource::Url { url } => {
            obj(json!({"fileData": {"mimeType": media_type_of(url), "fileUri": url}}))
        }
    }
}

/// An image URL's media type from its extension (Gemini's `fileData` wants one).
fn media_type_of(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("heic") => "image/heic",
        _ => "image/jpeg",
    }
}

/// Copies the part-level `extra` fields back when the block came from Gemini; the inner
/// `functionCall`/`functionResponse` leftovers were merged by their writers.
fn extend_part(map: &mut Map<String, Value>, extra: &Extra, same: bool) {
    if !same {
        return;
    }
    for (k, v) in extra {
        if k != "functionCall" && k != "functionResponse" {
            map.insert(k.clone(), v.clone());
        }
    }
}
