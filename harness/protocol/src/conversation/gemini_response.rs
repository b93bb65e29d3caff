//! Gemini `GenerateContentResponse` ↔ a canonical turn: the first candidate's content,
//! its `finishReason` as a stop reason, `usageMetadata` as usage, `responseId` and
//! `modelVersion` as the turn's id and model.
//!
//! Gemini ends a turn with function calls by `STOP`: the turn's stop reason is `tool_use`
//! when it holds calls. `SAFETY` and the other blocking reasons are a refusal (the exact
//! reason goes back to a Gemini client as it came). Output tokens count the thoughts too
//! (`candidatesTokenCount + thoughtsTokenCount`), as the other vendors count reasoning.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::gemini_parts::{
    OpenCalls, PartStyle, RESPONSE_POSITION, decode_parts, encode_parts, take_field,
};
use super::json::{obj, take_str, to_object};
use super::{ContentBlock, ConversionError, StopReason, Turn, Usage, Vendor};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// Where the first candidate's fields Cordon does not name are kept in a turn's `extra`.
const CANDIDATE: &str = "candidate";

/// Decode a `generateContent` response body (or the chunks of a stream merged into one).
/// Calls without an id get `gcall_t{n}` (`n` the part's place in the candidate).
pub fn decode_response(body: &Value) -> Result<Turn> {
    decode_response_at(body, RESPONSE_POSITION)
}

/// [`decode_response`], calls without an id getting `gcall_{position}{n}`: a gateway gives
/// each turn a position of its own, so their ids are unique in the conversation.
pub fn decode_response_at(body: &Value, position: &str) -> Result<Turn> {
    let mut map = to_object(body, "response")?;
    let id = take_field(&mut map, "responseId")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let model = take_field(&mut map, "modelVersion")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let usage = match take_field(&mut map, "usageMetadata") {
        Some(value) => decode_usage(&value)?,
        None => Usage::default(),
    };
    let candidates = match take_field(&mut map, "candidates") {
        Some(Value::Array(items)) => items,
        None => Vec::new(),
        Some(_) => return Err(ConversionError::field("candidates")),
    };
    let mut content = Vec::new();
    let mut stop_reason = None;
    if let Some(first) = candidates.first() {
        let mut candidate = to_object(first, "candidates[]")?;
        if let Some(value) = take_field(&mut candidate, "content") {
            let mut inner = to_object(&value, "candidates[].content")?;
            inner.remove("role");
            if let Some(Value::Array(parts)) = take_field(&mut inner, "parts") {
                content = decode_parts(&parts, position, &mut OpenCalls::default())?;
            }
        }
        if let Some(reason) = take_str(&mut candidate, "finishReason") {
            let has_calls = content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolCall(_)));
            let decoded = decode_finish_reason(&reason, has_calls);
            // Kept when the canonical reason would not write it back as it came.
            if encode_finish_reason(&decoded) != reason {
                candidate.insert("finishReason".into(), json!(reason));
            }
            stop_reason = Some(decoded);
        }
        candidate.remove("index");
        if !candidate.is_empty() {
            map.insert(CANDIDATE.into(), Value::Object(candidate));
        }
    } else if map
        .get("promptFeedback")
        .and_then(|f| f.get("blockReason"))
        .is_some()
    {
        // The prompt itself was blocked: no candidate at all.
        stop_reason = Some(StopReason::Refusal);
    }
    Ok(Turn {
        origin: Some(Vendor::Gemini),
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

/// Encode a turn as a `generateContent` response body.
pub fn encode_response(turn: &Turn) -> Value {
    let same = turn.origin == Some(Vendor::Gemini);
    let style = PartStyle {
        same,
        drop_synthesized_ids: false,
    };
    let parts = encode_parts(&turn.content, &HashMap::new(), style);
    let mut candidate = match turn.extra.get(CANDIDATE) {
        Some(Value::Object(kept)) if same => kept.clone(),
        _ => Map::new(),
    };
    candidate.insert("content".into(), json!({"role": "model", "parts": parts}));
    if let Some(reason) = &turn.stop_reason {
        candidate
            .entry("finishReason")
            .or_insert_with(|| json!(encode_finish_reason(reason)));
    }
    candidate.insert("index".into(), json!(0));
    let mut map = obj(json!({
        "candidates": [candidate],
        "usageMetadata": encode_usage(&turn.usage, same),
        "modelVersion": turn.model,
        "responseId": turn.id,
    }));
    if same {
        for (k, v) in &turn.extra {
            if k != CANDIDATE {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(map)
}

/// Gemini's finish reasons that mean the answer was blocked.
const BLOCKED: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

pub(crate) fn decode_finish_reason(reason: &str, has_calls: bool) -> StopReason {
    match reason {
        "STOP" if has_calls => StopReason::ToolUse,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        r if BLOCKED.contains(&r) => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

pub(crate) fn encode_finish_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn
        | StopReason::ToolUse
        | StopReason::StopSequence
        | StopReason::PauseTurn => "STOP",
        StopReason::MaxTokens => "MAX_TOKENS",
        StopReason::Refusal => "SAFETY",
        // Another vendor's reason Gemini has no word for.
        StopReason::Other(other) if other.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
            other
        }
        StopReason::Other(_) => "OTHER",
    }
}

fn count(map: &mut Map<String, Value>, key: &str) -> Option<u64> {
    match take_field(map, key) {
        Some(Value::Number(n)) => n.as_u64(),
        Some(other) => {
            map.insert(key.to_owned(), other);
            None
        }
        None => None,
    }
}

fn decode_usage(value: &Value) -> Result<Usage> {
    let mut map = to_object(value, "usageMetadata")?;
    let input_tokens = count(&mut map, "promptTokenCount").unwrap_or(0);
    let candidates = count(&mut map, "candidatesTokenCount").unwrap_or(0);
    // Kept in `extra`: the encoder splits the output count back with it.
    let thoughts = map
        .get("thoughtsTokenCount")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    map.remove("totalTokenCount");
    map.remove("total_token_count");
    let cache_read_input_tokens = count(&mut map, "cachedContentTokenCount");
    Ok(Usage {
        input_tokens,
        output_tokens: candidates.saturating_add(thoughts),
        cache_creation_input_tokens: None,
        cache_read_input_tokens,
        extra: map,
    })
}

fn encode_usage(usage: &Usage, same: bool) -> Value {
    let thoughts = if same {
        usage
            .extra
            .get("thoughtsTokenCount")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    } else {
        0
    };
    let mut map = obj(json!({
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": usage.output_tokens.saturating_sub(thoughts),
        "totalTokenCount": usage.input_tokens.saturating_add(usage.output_tokens),
    }));
    if let Some(n) = usage.cache_read_input_tokens {
        map.insert("cachedContentTokenCount".into(), json!(n));
    }
    if same {
        for (k, v) in &usage.extra {
            map.insert(k.clone(), v.clone());
        }
    }
    Value::Object(map)
}
