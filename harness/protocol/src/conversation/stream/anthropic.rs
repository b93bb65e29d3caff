//! Anthropic Messages streams: a turn as `message_start` … `message_stop` events, and the
//! accumulator that rebuilds it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::delta::{BlockKind, Delta, arguments_text};
use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::json::obj;
use crate::conversation::{ConversionError, ToolCaller, Turn, Vendor, anthropic};

/// Anthropic Messages stream events for a turn.
pub fn anthropic_events(turn: &Turn) -> Vec<Event> {
    let message = anthropic::encode_response(turn);
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["stop_sequence"] = Value::Null;
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    )];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    for (index, block) in blocks.iter().enumerate() {
        let kind = block["type"].as_str().unwrap_or_default();
        let mut first = block.clone();
        let mut deltas = Vec::new();
        match kind {
            "text" => {
                first["text"] = json!("");
                deltas.push(json!({"type": "text_delta", "text": block["text"]}));
            }
            "tool_use" | "server_tool_use" => {
                first["input"] = json!({});
                deltas.push(
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                );
            }
            "thinking" => {
                first["thinking"] = json!("");
                first["signature"] = json!("");
                deltas.push(json!({"type": "thinking_delta", "thinking": block["thinking"]}));
                deltas.push(json!({"type": "signature_delta", "signature": block["signature"]}));
            }
            _ => {}
        }
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": first}),
        ));
        for delta in deltas {
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(event(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": message["usage"],
        }),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    events
}

/// Rebuilds an Anthropic turn from `message_start` … `message_stop`.
#[derive(Debug, Default)]
pub struct AnthropicAccumulator {
    message: Map<String, Value>,
    /// Blocks by index: a map, since the upstream picks the indices (each below the limit).
    blocks: BTreeMap<usize, Block>,
    budget: Budget,
    /// `message_start` arrived (deltas begin with one `TurnStart`).
    started: bool,
    /// Blocks started so far: the next block's canonical index.
    next_index: usize,
}

/// One content block as it streams in.
#[derive(Debug)]
struct Block {
    /// Its canonical index (start order), which the deltas carry.
    canonical: usize,
    /// Argument pieces went out as deltas (else the stop sends the whole input as one).
    sent_arguments: bool,
    value: Map<String, Value>,
    /// The partial JSON of a tool input, kept as text until the block stops.
    partial: String,
    /// `content_block_stop` arrived: nothing more may reach the block, and a second stop
    /// cannot decode (and report) a large tool call again.
    stopped: bool,
}

impl AnthropicAccumulator {
    /// An accumulator keeping to `limits` instead of the defaults.
    pub fn with_limits(limits: StreamLimits) -> Self {
        AnthropicAccumulator {
            budget: Budget::new(limits),
            ..Self::default()
        }
    }

    /// The started, not yet stopped block `data["index"]` names.
    fn open_block(&mut self, data: &Value, field: &str) -> Result<&mut Block> {
        self.budget
            .index(data.get("index"), field)?
            .and_then(|i| self.blocks.get_mut(&i))
            .filter(|block| !block.stopped)
            .ok_or_else(|| ConversionError::field(field))
    }
}

/// What a `content_block_start`'s block is, for its `BlockStart`.
fn start_kind(block: &Map<String, Value>) -> Result<BlockKind> {
    let text = |key: &str| {
        block
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(match block.get("type").and_then(Value::as_str) {
        Some("text") => BlockKind::Text,
        Some("thinking") => BlockKind::Thinking {
            vendor: Vendor::Anthropic,
        },
        Some("tool_use") => BlockKind::ToolCall {
            id: text("id"),
            name: text("name"),
            caller: block.get("caller").map(|c| ToolCaller {
                kind: c["type"].as_str().unwrap_or_default().to_owned(),
                tool_id: c["tool_id"].as_str().map(str::to_owned),
            }),
        },
        Some("server_tool_use") => BlockKind::ServerToolCall {
            id: text("id"),
            name: text("name"),
        },
        _ => BlockKind::Whole(one_block(block)?),
    })
}

/// A block's content decoded alone, as the whole turn's decode has it.
fn one_block(block: &Map<String, Value>) -> Result<crate::conversation::ContentBlock> {
    anthropic::decode_blocks(&[Value::Object(block.clone())])?
        .pop()
        .ok_or_else(|| ConversionError::field("content_block"))
}

/// The deltas a stopped block ends with: its text or arguments when the start carried
/// them and no delta did (so the pieces always join to the whole), then its `BlockStop`.
fn stop_deltas(block: &Block) -> Result<Vec<Delta>> {
    let index = block.canonical;
    let complete = one_block(&block.value)?;
    let mut deltas = Vec::with_capacity(2);
    if let Some(kind) = block.value.get("type").and_then(Value::as_str)
        && matches!(kind, "tool_use" | "server_tool_use")
        && !block.sent_arguments
    {
        deltas.push(Delta::ToolArguments {
            index,
            json: arguments_text(block.value.get("input").unwrap_or(&Value::Null)),
        });
    }
    deltas.push(Delta::BlockStop {
        index,
        block: complete,
    });
    Ok(deltas)
}

/// Appends to a block's text in place: rebuilding it on every delta made a long text
/// quadratic in its number of pieces.
fn append(block: &mut Map<String, Value>, key: &str, more: Option<&Value>) {
    let more = more.and_then(Value::as_str).unwrap_or_default();
    match block.get_mut(key) {
        Some(Value::String(text)) => text.push_str(more),
        _ => {
            block.insert(key.to_owned(), Value::String(more.to_owned()));
        }
    }
}

impl Accumulator for AnthropicAccumulator {
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress> {
        self.push_deltas(event, data, &mut Vec::new())
    }

    fn push_deltas(
        &mut self,
        event: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress> {
        self.budget.charge(data)?;
        match event {
            "message_start" => {
                self.message = obj(data.get("message").cloned().unwrap_or_default());
                if !self.started {
                    self.started = true;
                    let text = |key: &str| {
                        self.message
                            .get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    deltas.push(Delta::TurnStart {
                        id: text("id"),
                        model: text("model"),
                        origin: Some(Vendor::Anthropic),
                    });
                }
            }
            "content_block_start" => {
                let Some(Value::Object(block)) = data.get("content_block") else {
                    return Err(ConversionError::field("content_block"));
                };
                let i = self
                    .budget
                    .index(data.get("index"), "content_block_start.index")?
                    .ok_or_else(|| ConversionError::field("index"))?;
                // A second start of one index replaces the block: it keeps its number.
                let canonical = match self.blocks.get(&i) {
                    Some(old) => old.canonical,
                    None => {
                        self.next_index += 1;
                        self.next_index - 1
                    }
                };
                deltas.push(Delta::BlockStart {
                    index: canonical,
                    kind: start_kind(block)?,
                });
                // Text a start carries (real streams start empty) is a first piece.
                let first = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
                match block.get("type").and_then(Value::as_str) {
                    Some("text") if !first("text").is_empty() => deltas.push(Delta::Text {
                        index: canonical,
                        text: first("text").to_owned(),
                    }),
                    Some("thinking") if !first("thinking").is_empty() => {
                        deltas.push(Delta::Thinking {
                            index: canonical,
                            text: first("thinking").to_owned(),
                        })
                    }
                    _ => {}
                }
                let block = Block {
                    canonical,
                    sent_arguments: false,
                    value: block.clone(),
                    partial: String::new(),
                    stopped: false,
                };
                self.blocks.insert(i, block);
            }
            "content_block_delta" => {
                let block = self.open_block(data, "content_block_delta.index")?;
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let index = block.canonical;
                let value = &mut block.value;
                let piece = |key: &str| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        append(value, "text", delta.get("text"));
                        deltas.push(Delta::Text {
                            index,
                            text: piece("text"),
                        });
                    }
                    Some("thinking_delta") => {
                        append(value, "thinking", delta.get("thinking"));
                        deltas.push(Delta::Thinking {
                            index,
                            text: piece("thinking"),
                        });
                    }
                    Some("signature_delta") => {
                        append(value, "signature", delta.get("signature"));
                        deltas.push(Delta::Signature {
                            index,
                            signature: piece("signature"),
                        });
                    }
                    // An empty piece (sent first by some servers) says nothing yet.
                    Some("input_json_delta") if !piece("partial_json").is_empty() => {
                        let json = piece("partial_json");
                        block.partial.push_str(&json);
                        block.sent_arguments = true;
                        deltas.push(Delta::ToolArguments { index, json });
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let block = self.open_block(data, "content_block_stop.index")?;
                block.stopped = true;
                if !block.partial.is_empty() {
                    let partial = std::mem::take(&mut block.partial);
                    // `from_str` keeps serde_json's nesting limit (128), so a hostile input
                    // cannot build a value too deep to walk or drop.
                    let input = serde_json::from_str(&partial).map_err(|e| {
                        ConversionError::InvalidJson {
                            field: "input".into(),
                            reason: e.to_string(),
                        }
                    })?;
                    block.value.insert("input".into(), input);
                }
                deltas.extend(stop_deltas(block)?);
                if block.value.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let content = Value::Object(block.value.clone());
                    let turn = anthropic::decode_response(&json!({"content": [content]}))?;
                    if let Some(call) = turn.tool_calls().next() {
                        return Ok(Progress::ToolCallComplete(call.clone()));
                    }
                }
            }
            "message_delta" => {
                if let Some(Value::Object(delta)) = data.get("delta") {
                    for (k, v) in delta {
                        self.message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(usage)) = data.get("usage") {
                    let entry = self.message.entry("usage").or_insert_with(|| json!({}));
                    if entry.is_null() {
                        *entry = json!({});
                    }
                    // A `usage` that is not an object (from `message_start`) cannot be merged.
                    let Value::Object(entry) = entry else {
                        return Err(ConversionError::field("message.usage"));
                    };
                    for (k, v) in usage {
                        if !v.is_null() {
                            entry.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "message_stop" => {
                let mut head = self.message.clone();
                head.insert("content".into(), json!([]));
                let head = anthropic::decode_response(&Value::Object(head))?;
                deltas.push(Delta::TurnEnd {
                    stop_reason: head.stop_reason,
                    stop_sequence: head.stop_sequence,
                    usage: head.usage,
                    container: head.container,
                });
                return Ok(Progress::Done);
            }
            "error" => return Err(upstream_error(data)),
            _ => {}
        }
        Ok(Progress::Pending)
    }

    fn finish(mut self) -> Result<Turn> {
        let content: Vec<Value> = self
            .blocks
            .into_values()
            .map(|block| Value::Object(block.value))
            .collect();
        self.message.insert("content".into(), Value::Array(content));
        anthropic::decode_response(&Value::Object(self.message))
    }
}
