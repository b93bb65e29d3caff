//! Streams: a turn as each vendor's event sequence, and accumulators that rebuild the turn
//! from events one at a time.
//!
//! Events are `(event name, JSON data)` pairs; writing them as SSE is the caller's job.
//! Chat chunks have no event name (`""`), and Chat's terminator is `("", "[DONE]")`,
//! written as `data: [DONE]`. Accumulators keep partial tool arguments as strings and
//! report a tool call only once its block is complete.
//!
//! The events come from an upstream that is not trusted: every accumulator keeps to its
//! [`StreamLimits`] (block indices, blocks and bytes per turn) and refuses a stream past
//! them with a typed error, fatal to that turn only.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

mod feed;
mod limits;

pub use feed::feed_each_accumulator;
use limits::Budget;
pub use limits::{MAX_BLOCKS, MAX_TURN_BYTES, StreamLimits};

use super::json::obj;
use super::{ConversionError, ToolCall, Turn, anthropic, chat, responses};

type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// A stream event: the SSE `event:` name and its `data:` JSON.
pub type Event = (String, Value);

/// What one event completed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// Nothing complete yet.
    Pending,
    /// A tool-call block is complete: its arguments are final and may be validated and run.
    ToolCallComplete(ToolCall),
    /// The stream ended; [`Accumulator::finish`] gives the turn.
    Done,
}

/// Rebuilds a turn from a vendor's stream events.
pub trait Accumulator {
    /// Consume one event. An upstream `error` event is a [`ConversionError`].
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress>;
    /// The completed turn (also from a stream cut short: what arrived so far).
    fn finish(self) -> Result<Turn>;
}

fn event(name: &str, data: Value) -> Event {
    (name.to_owned(), data)
}

fn upstream_error(data: &Value) -> ConversionError {
    let message = data
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("upstream stream error");
    ConversionError::Upstream {
        message: message.to_owned(),
    }
}

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
}

/// One content block as it streams in.
#[derive(Debug)]
struct Block {
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
        self.budget.charge(data)?;
        match event {
            "message_start" => self.message = obj(data.get("message").cloned().unwrap_or_default()),
            "content_block_start" => {
                let Some(Value::Object(block)) = data.get("content_block") else {
                    return Err(ConversionError::field("content_block"));
                };
                let i = self
                    .budget
                    .index(data.get("index"), "content_block_start.index")?
                    .ok_or_else(|| ConversionError::field("index"))?;
                let block = Block {
                    value: block.clone(),
                    partial: String::new(),
                    stopped: false,
                };
                self.blocks.insert(i, block);
            }
            "content_block_delta" => {
                let block = self.open_block(data, "content_block_delta.index")?;
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let value = &mut block.value;
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => append(value, "text", delta.get("text")),
                    Some("thinking_delta") => append(value, "thinking", delta.get("thinking")),
                    Some("signature_delta") => append(value, "signature", delta.get("signature")),
                    Some("input_json_delta") => block.partial.push_str(
                        delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
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
            "message_stop" => return Ok(Progress::Done),
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

/// Chat Completions chunks for a turn, ending with `[DONE]`.
pub fn chat_events(turn: &Turn) -> Vec<Event> {
    let response = chat::encode_response(turn);
    let message = &response["choices"][0]["message"];
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
            "model": response["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = vec![event(
        "",
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
    )];
    if let Some(text) = message["content"].as_str() {
        events.push(event("", chunk(json!({"content": text}), Value::Null)));
    }
    for (index, call) in message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let name_delta = json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}}]});
        events.push(event("", chunk(name_delta, Value::Null)));
        let args_delta = json!({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]});
        events.push(event("", chunk(args_delta, Value::Null)));
    }
    events.push(event(
        "",
        chunk(json!({}), response["choices"][0]["finish_reason"].clone()),
    ));
    let mut usage = chunk(json!({}), Value::Null);
    usage["choices"] = json!([]);
    usage["usage"] = response["usage"].clone();
    events.push(event("", usage));
    events.push(event("", json!("[DONE]")));
    events
}

/// Rebuilds a Chat turn from chunks (`tool_calls` deltas merged by `index`).
#[derive(Debug, Default)]
pub struct ChatAccumulator {
    head: Map<String, Value>,
    text: Option<String>,
    /// Calls by index: (id, name, partial arguments). Indices come one after another (a
    /// new one is at most `calls.len()`), so the vector never holds a call not sent.
    calls: Vec<(String, String, String)>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    reported: usize,
    budget: Budget,
}

impl ChatAccumulator {
    /// An accumulator keeping to `limits` instead of the defaults.
    pub fn with_limits(limits: StreamLimits) -> Self {
        ChatAccumulator {
            budget: Budget::new(limits),
            ..Self::default()
        }
    }

    fn call(&self, index: usize) -> Result<ToolCall> {
        let (id, name, arguments) = &self.calls[index];
        Ok(ToolCall {
            id: id.clone(),
            name: name.clone(),
            input: serde_json::from_str(arguments).map_err(|e| ConversionError::InvalidJson {
                field: "arguments".into(),
                reason: e.to_string(),
            })?,
            caller: None,
            extra: Map::new(),
        })
    }
}

impl Accumulator for ChatAccumulator {
    fn push(&mut self, _event: &str, data: &Value) -> Result<Progress> {
        if data == "[DONE]" {
            return Ok(Progress::Done);
        }
        self.budget.charge(data)?;
        if data.get("error").is_some() {
            return Err(upstream_error(data));
        }
        for key in ["id", "created", "model", "system_fingerprint"] {
            if let Some(v) = data.get(key) {
                self.head.insert(key.into(), v.clone());
            }
        }
        if let Some(u) = data.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let choice = &data["choices"][0];
        if let Some(text) = choice["delta"]["content"].as_str() {
            self.text.get_or_insert_with(String::new).push_str(text);
        }
        let mut progress = Progress::Pending;
        let deltas = choice["delta"]["tool_calls"].as_array();
        for delta in deltas.into_iter().flatten() {
            let field = "tool_calls[].index";
            let index = self.budget.index(delta.get("index"), field)?.unwrap_or(0);
            // A new index means the calls before it are complete. It must be the next one:
            // a gap would leave calls that were never sent.
            if index > self.calls.len() {
                return Err(ConversionError::IndexOutOfRange {
                    field: field.into(),
                    index: index as u64,
                    max: self.calls.len() as u64,
                });
            }
            if index == self.calls.len() {
                if self.reported < self.calls.len() {
                    progress = Progress::ToolCallComplete(self.call(self.reported)?);
                    self.reported += 1;
                }
                self.calls.push(Default::default());
            }
            let call = &mut self.calls[index];
            if let Some(id) = delta["id"].as_str() {
                call.0 = id.to_owned();
            }
            if let Some(name) = delta["function"]["name"].as_str() {
                call.1.push_str(name);
            }
            if let Some(arguments) = delta["function"]["arguments"].as_str() {
                call.2.push_str(arguments);
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
            if self.reported < self.calls.len() {
                progress = Progress::ToolCallComplete(self.call(self.reported)?);
                self.reported += 1;
            }
        }
        Ok(progress)
    }

    fn finish(self) -> Result<Turn> {
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|(id, name, arguments)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}))
            .collect();
        let text = self.text.filter(|t| !t.is_empty());
        let mut message = json!({"role": "assistant", "content": text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let mut response = Value::Object(self.head);
        response["choices"] =
            json!([{"index": 0, "message": message, "finish_reason": self.finish_reason}]);
        if let Some(usage) = self.usage {
            response["usage"] = usage;
        }
        chat::decode_response(&response)
    }
}

/// Responses stream events for a turn, numbered by `sequence_number`.
pub fn responses_events(turn: &Turn) -> Vec<Event> {
    let response = responses::encode_response(turn);
    let mut events: Vec<Event> = Vec::new();
    let mut push = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(events.len());
        events.push(event(name, data));
    };
    let mut created = response.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    created["usage"] = Value::Null;
    push("response.created", json!({"response": created}));
    for (output_index, item) in response["output"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let item_id = item["id"].clone();
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("message") => {
                added["content"] = json!([]);
                added["status"] = json!("in_progress");
                push(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                );
                for (content_index, part) in item["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    let mut empty = part.clone();
                    empty["text"] = json!("");
                    let at = json!({"item_id": item_id, "output_index": output_index, "content_index": content_index});
                    let with = |mut v: Value, extra: Value| {
                        if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
                            v.extend(extra.clone());
                        }
                        v
                    };
                    push(
                        "response.content_part.added",
                        with(at.clone(), json!({"part": empty})),
                    );
                    if part["type"] == "output_text" {
                        push(
                            "response.output_text.delta",
                            with(at.clone(), json!({"delta": part["text"], "logprobs": []})),
                        );
                        push(
                            "response.output_text.done",
                            with(at.clone(), json!({"text": part["text"], "logprobs": []})),
                        );
                    }
                    push(
                        "response.content_part.done",
                        with(at, json!({"part": part})),
                    );
                }
            }
            Some("function_call") => {
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                push(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": added}),
                );
                let at = |key: &str, value: &Value| json!({"item_id": item_id, "output_index": output_index, key: value});
                push(
                    "response.function_call_arguments.delta",
                    at("delta", &item["arguments"]),
                );
                push(
                    "response.function_call_arguments.done",
                    at("arguments", &item["arguments"]),
                );
            }
            _ => push(
                "response.output_item.added",
                json!({"output_index": output_index, "item": item}),
            ),
        }
        push(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        );
    }
    let done = if response["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    push(done, json!({"response": response}));
    events
}

/// Rebuilds a Responses turn from its events.
///
/// A function call is taken whole from `response.output_item.done`, so argument deltas are
/// not kept (they were once, by output index, in a vector an index of 2e9 grew to that size).
#[derive(Debug, Default)]
pub struct ResponsesAccumulator {
    response: Option<Map<String, Value>>,
    /// Output items as they complete (`response.output_item.done`).
    items: Vec<Value>,
    budget: Budget,
}

impl ResponsesAccumulator {
    /// An accumulator keeping to `limits` instead of the defaults.
    pub fn with_limits(limits: StreamLimits) -> Self {
        ResponsesAccumulator {
            budget: Budget::new(limits),
            ..Self::default()
        }
    }
}

/// The `response` object an event carries (`None` when absent or `null`).
fn response_of(data: &Value) -> Result<Option<Map<String, Value>>> {
    match data.get("response") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(response)) => Ok(Some(response.clone())),
        Some(_) => Err(ConversionError::field("response")),
    }
}

impl Accumulator for ResponsesAccumulator {
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress> {
        self.budget.charge(data)?;
        // Checked though no longer used for storage: past the limit, the stream is broken.
        self.budget
            .index(data.get("output_index"), "output_index")?;
        match event {
            "response.created" | "response.in_progress" => self.response = response_of(data)?,
            "response.output_item.done" => {
                if self.items.len() >= self.budget.limits.max_blocks {
                    return Err(ConversionError::TooLarge {
                        what: "output items".into(),
                        max: self.budget.limits.max_blocks,
                    });
                }
                let item = data.get("item").cloned().unwrap_or_default();
                self.items.push(item.clone());
                if item["type"] == "function_call" {
                    let turn = responses::decode_response(&json!({"output": [item]}))?;
                    if let Some(call) = turn.tool_calls().next() {
                        return Ok(Progress::ToolCallComplete(call.clone()));
                    }
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.response = response_of(data)?;
                return Ok(Progress::Done);
            }
            "error" => return Err(upstream_error(&json!({"error": data}))),
            _ => {}
        }
        Ok(Progress::Pending)
    }

    fn finish(self) -> Result<Turn> {
        let mut response = self.response.unwrap_or_default();
        let complete = response
            .get("output")
            .and_then(Value::as_array)
            .is_some_and(|o| !o.is_empty());
        if !complete {
            response.insert("output".into(), Value::Array(self.items));
        }
        responses::decode_response(&Value::Object(response))
    }
}
