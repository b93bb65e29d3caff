//! Chat Completions streams: a turn as `chat.completion.chunk`s ending with `[DONE]`, and
//! the accumulator that rebuilds it.

use serde_json::{Map, Value, json};

use super::delta::{BlockKind, Delta};
use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::{ContentBlock, ConversionError, ToolCall, Turn, Vendor, chat};

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

impl Live {
    fn open(&mut self) -> usize {
        self.next_index += 1;
        self.next_index - 1
    }
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
    /// What the deltas have told so far.
    live: Live,
}

/// The canonical blocks of a Chat stream: its text (one block) and its calls, numbered in
/// the order they start. Every block stays open until the finish reason (calls may
/// interleave), then all stop in order.
#[derive(Debug, Default)]
struct Live {
    started: bool,
    next_index: usize,
    /// The text block's index once text arrived.
    text: Option<usize>,
    /// Per call (by Chat index): its block index once its name is known. A call's start
    /// waits for its name, since who runs it is decided by that name.
    calls: Vec<Option<usize>>,
    stopped: bool,
}

impl ChatAccumulator {
    /// An accumulator keeping to `limits` instead of the defaults.
    pub fn with_limits(limits: StreamLimits) -> Self {
        ChatAccumulator {
            budget: Budget::new(limits),
            ..Self::default()
        }
    }

    /// Stops every open block, in index order, each with the block the whole turn's decode
    /// gives (once: the finish reason and `[DONE]` both end the blocks).
    fn stop_blocks(&mut self, deltas: &mut Vec<Delta>) -> Result<()> {
        if self.live.stopped {
            return Ok(());
        }
        self.live.stopped = true;
        let mut stops: Vec<(usize, ContentBlock)> = Vec::new();
        if let (Some(index), Some(text)) = (self.live.text, &self.text) {
            stops.push((index, ContentBlock::text(text.clone())));
        }
        for (n, block) in self.live.calls.clone().into_iter().enumerate() {
            let (id, name, arguments) = &self.calls[n];
            let block = match block {
                Some(block) => block,
                // A call whose name never came starts now, for its stop.
                None => {
                    let block = self.live.open();
                    deltas.push(Delta::BlockStart {
                        index: block,
                        kind: BlockKind::ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                            caller: None,
                        },
                    });
                    if !arguments.is_empty() {
                        deltas.push(Delta::ToolArguments {
                            index: block,
                            json: arguments.clone(),
                        });
                    }
                    block
                }
            };
            // No pieces at all: the arguments are an empty object, as the decode has them.
            if arguments.is_empty() {
                deltas.push(Delta::ToolArguments {
                    index: block,
                    json: "{}".to_owned(),
                });
            }
            let decoded = chat::decode_response(&json!({"choices": [{"message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}],
            }}]}))?;
            let call = decoded
                .content
                .into_iter()
                .find(|b| matches!(b, ContentBlock::ToolCall(_)))
                .ok_or_else(|| ConversionError::field("tool_calls"))?;
            stops.push((block, call));
        }
        stops.sort_by_key(|(index, _)| *index);
        for (index, block) in stops {
            deltas.push(Delta::BlockStop { index, block });
        }
        Ok(())
    }

    /// The turn without its content: id, model, stop reason, usage.
    fn head_turn(&self) -> Result<Turn> {
        let mut response = Value::Object(self.head.clone());
        response["choices"] = json!([{"index": 0, "message": {"role": "assistant", "content": null},
            "finish_reason": self.finish_reason}]);
        if let Some(usage) = &self.usage {
            response["usage"] = usage.clone();
        }
        chat::decode_response(&response)
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
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress> {
        self.push_deltas(event, data, &mut Vec::new())
    }

    fn push_deltas(
        &mut self,
        _event: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress> {
        if data == "[DONE]" {
            self.stop_blocks(deltas)?;
            let head = self.head_turn()?;
            deltas.push(Delta::TurnEnd {
                stop_reason: head.stop_reason,
                stop_sequence: head.stop_sequence,
                usage: head.usage,
                container: None,
            });
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
        if !self.live.started {
            self.live.started = true;
            let text = |key: &str| data[key].as_str().unwrap_or_default().to_owned();
            deltas.push(Delta::TurnStart {
                id: text("id"),
                model: text("model"),
                origin: Some(Vendor::OpenaiChat),
            });
        }
        if let Some(u) = data.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let choice = &data["choices"][0];
        if let Some(text) = choice["delta"]["content"].as_str() {
            self.text.get_or_insert_with(String::new).push_str(text);
            if !text.is_empty() && !self.live.stopped {
                let index = match self.live.text {
                    Some(index) => index,
                    None => {
                        let index = self.live.open();
                        self.live.text = Some(index);
                        deltas.push(Delta::BlockStart {
                            index,
                            kind: BlockKind::Text,
                        });
                        index
                    }
                };
                deltas.push(Delta::Text {
                    index,
                    text: text.to_owned(),
                });
            }
        }
        let mut progress = Progress::Pending;
        let calls = choice["delta"]["tool_calls"].as_array();
        for delta in calls.into_iter().flatten() {
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
                // The call before is complete unless its arguments do not parse yet: some
                // servers interleave the pieces of parallel calls (the finish reason tells).
                if self.reported < self.calls.len()
                    && let Ok(call) = self.call(self.reported)
                {
                    progress = Progress::ToolCallComplete(call);
                    self.reported += 1;
                }
                self.calls.push(Default::default());
                self.live.calls.push(None);
            }
            let call = &mut self.calls[index];
            if let Some(id) = delta["id"].as_str() {
                call.0 = id.to_owned();
            }
            if let Some(name) = delta["function"]["name"].as_str() {
                call.1.push_str(name);
            }
            let piece = delta["function"]["arguments"].as_str().unwrap_or_default();
            call.2.push_str(piece);
            if self.live.stopped {
                continue;
            }
            match self.live.calls[index] {
                Some(block) if !piece.is_empty() => deltas.push(Delta::ToolArguments {
                    index: block,
                    json: piece.to_owned(),
                }),
                Some(_) => {}
                None if !call.1.is_empty() => {
                    let block = self.live.open();
                    self.live.calls[index] = Some(block);
                    deltas.push(Delta::BlockStart {
                        index: block,
                        kind: BlockKind::ToolCall {
                            id: call.0.clone(),
                            name: call.1.clone(),
                            caller: None,
                        },
                    });
                    // Pieces that came before the name.
                    if !call.2.is_empty() {
                        deltas.push(Delta::ToolArguments {
                            index: block,
                            json: call.2.clone(),
                        });
                    }
                }
                None => {}
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish_reason = Some(reason.clone());
            if self.reported < self.calls.len() {
                progress = Progress::ToolCallComplete(self.call(self.reported)?);
                self.reported += 1;
            }
            self.stop_blocks(deltas)?;
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
