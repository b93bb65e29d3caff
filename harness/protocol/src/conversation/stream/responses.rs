//! OpenAI Responses streams: a turn as `response.*` events numbered by `sequence_number`,
//! and the accumulator that rebuilds it.

use serde_json::{Map, Value, json};

use super::event::{Accumulator, Event, Progress, Result, event, upstream_error};
use super::limits::{Budget, StreamLimits};
use crate::conversation::{ConversionError, Turn, responses};

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
