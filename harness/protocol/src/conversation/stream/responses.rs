//! OpenAI Responses streams: a turn as `response.*` events numbered by `sequence_number`,
//! and the accumulator that rebuilds it.

use serde_json::{Map, Value, json};

use std::collections::BTreeMap;

use super::delta::{BlockKind, Delta};
use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::{ContentBlock, ConversionError, Turn, Vendor, responses};

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
    /// What the deltas have told so far.
    live: Live,
}

/// The canonical blocks of a Responses stream: a message item's text parts, a function
/// call, a reasoning item each stream as a block; other items arrive whole at their end.
#[derive(Debug, Default)]
struct Live {
    started: bool,
    next_index: usize,
    /// Open blocks by (output index, content index); calls and reasoning use content 0.
    open: BTreeMap<(usize, usize), Open>,
}

/// One open block.
#[derive(Debug)]
struct Open {
    index: usize,
    /// Text so far (a text part's), for a stop the item's end does not give.
    text: String,
    /// Argument pieces went out (else the item's end sends its arguments as one).
    sent_arguments: bool,
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

impl Live {
    fn start(
        &mut self,
        output_index: usize,
        content_index: usize,
        kind: BlockKind,
        deltas: &mut Vec<Delta>,
    ) {
        let key = (output_index, content_index);
        if self.open.contains_key(&key) {
            return;
        }
        let index = self.next_index;
        self.next_index += 1;
        self.open.insert(
            key,
            Open {
                index,
                text: String::new(),
                sent_arguments: false,
            },
        );
        deltas.push(Delta::BlockStart { index, kind });
    }

    /// An item is done: its open blocks stop with the blocks it decodes to (in order),
    /// and blocks no delta started (a whole item, a refusal) start and stop now.
    fn stop_item(
        &mut self,
        output_index: usize,
        item: &Value,
        blocks: Vec<ContentBlock>,
        deltas: &mut Vec<Delta>,
    ) {
        let mut opened: Vec<(usize, Open)> = Vec::new();
        let keys: Vec<(usize, usize)> = self
            .open
            .range((output_index, 0)..=(output_index, usize::MAX))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if let Some(open) = self.open.remove(&key) {
                opened.push((key.1, open));
            }
        }
        let mut opened = opened.into_iter().peekable();
        for (n, block) in blocks.into_iter().enumerate() {
            let streamed = match (&block, opened.peek()) {
                (ContentBlock::Text { .. }, Some((content, _))) if *content == n => true,
                (ContentBlock::ToolCall(_) | ContentBlock::Reasoning { .. }, Some(_)) => n == 0,
                _ => false,
            };
            let Some((_, open)) = streamed.then(|| opened.next()).flatten() else {
                let index = self.next_index;
                self.next_index += 1;
                deltas.extend(super::turn_deltas::block_deltas(index, &block));
                continue;
            };
            if let ContentBlock::ToolCall(call) = &block
                && !open.sent_arguments
            {
                let json = item["arguments"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| super::delta::arguments_text(&call.input));
                deltas.push(Delta::ToolArguments {
                    index: open.index,
                    json,
                });
            }
            deltas.push(Delta::BlockStop {
                index: open.index,
                block,
            });
        }
        // Blocks the item did not decode to end with what streamed.
        for (_, open) in opened {
            deltas.push(Delta::BlockStop {
                index: open.index,
                block: ContentBlock::text(open.text),
            });
        }
    }

    /// The stream ended with blocks still open: each stops with what streamed.
    fn stop_all(&mut self, deltas: &mut Vec<Delta>) {
        for (_, open) in std::mem::take(&mut self.open) {
            deltas.push(Delta::BlockStop {
                index: open.index,
                block: ContentBlock::text(open.text),
            });
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
        self.push_deltas(event, data, &mut Vec::new())
    }

    fn push_deltas(
        &mut self,
        event: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress> {
        self.budget.charge(data)?;
        // Checked though no longer used for storage: past the limit, the stream is broken.
        let output_index = self
            .budget
            .index(data.get("output_index"), "output_index")?
            .unwrap_or(0);
        let content_index = self
            .budget
            .index(data.get("content_index"), "content_index")?
            .unwrap_or(0);
        match event {
            "response.created" | "response.in_progress" => {
                self.response = response_of(data)?;
                if !self.live.started {
                    self.live.started = true;
                    let text = |key: &str| {
                        data["response"][key]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    };
                    deltas.push(Delta::TurnStart {
                        id: text("id"),
                        model: text("model"),
                        origin: Some(Vendor::OpenaiResponses),
                    });
                }
            }
            "response.output_item.added" => {
                let item = &data["item"];
                let kind = match item["type"].as_str() {
                    Some("function_call") => Some(BlockKind::ToolCall {
                        id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                        name: item["name"].as_str().unwrap_or_default().to_owned(),
                        caller: None,
                    }),
                    Some("reasoning") => Some(BlockKind::Thinking {
                        vendor: Vendor::OpenaiResponses,
                    }),
                    _ => None,
                };
                if let Some(kind) = kind {
                    self.live.start(output_index, 0, kind, deltas);
                }
            }
            "response.content_part.added" if data["part"]["type"] == "output_text" => {
                self.live
                    .start(output_index, content_index, BlockKind::Text, deltas);
            }
            "response.output_text.delta" => {
                if let Some(open) = self.live.open.get_mut(&(output_index, content_index)) {
                    let text = data["delta"].as_str().unwrap_or_default();
                    open.text.push_str(text);
                    deltas.push(Delta::Text {
                        index: open.index,
                        text: text.to_owned(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(open) = self.live.open.get_mut(&(output_index, 0))
                    && data["delta"].as_str().is_some_and(|d| !d.is_empty())
                {
                    open.sent_arguments = true;
                    deltas.push(Delta::ToolArguments {
                        index: open.index,
                        json: data["delta"].as_str().unwrap_or_default().to_owned(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(open) = self.live.open.get(&(output_index, 0)) {
                    deltas.push(Delta::Thinking {
                        index: open.index,
                        text: data["delta"].as_str().unwrap_or_default().to_owned(),
                    });
                }
            }
            "response.output_item.done" => {
                if self.items.len() >= self.budget.limits.max_blocks {
                    return Err(ConversionError::TooLarge {
                        what: "output items".into(),
                        max: self.budget.limits.max_blocks,
                    });
                }
                let item = data.get("item").cloned().unwrap_or_default();
                self.items.push(item.clone());
                let blocks = responses::decode_response(&json!({"output": [item]}))?.content;
                self.live
                    .stop_item(output_index, &item, blocks.clone(), deltas);
                if item["type"] == "function_call"
                    && let Some(call) = blocks.into_iter().find_map(|b| match b {
                        ContentBlock::ToolCall(call) => Some(call),
                        _ => None,
                    })
                {
                    return Ok(Progress::ToolCallComplete(call));
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.response = response_of(data)?;
                self.live.stop_all(deltas);
                let mut head = self.response.clone().unwrap_or_default();
                head.insert("output".into(), json!([]));
                let head = responses::decode_response(&Value::Object(head))?;
                // The stop reason of an output without calls is all the head can tell.
                let called = self.items.iter().any(|i| i["type"] == "function_call");
                let stop_reason = match head.stop_reason {
                    Some(crate::conversation::StopReason::EndTurn) if called => {
                        Some(crate::conversation::StopReason::ToolUse)
                    }
                    other => other,
                };
                deltas.push(Delta::TurnEnd {
                    stop_reason,
                    stop_sequence: None,
                    usage: head.usage,
                    container: None,
                });
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
