//! Chat Completions streams: a turn as `chat.completion.chunk`s ending with `[DONE]`, and
//! the accumulator that rebuilds it.

use serde_json::{Map, Value, json};

use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::{ConversionError, ToolCall, Turn, chat};

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
