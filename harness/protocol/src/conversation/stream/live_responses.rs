//! Canonical deltas as an OpenAI Responses stream, live: `response.created`, each output
//! item's `response.output_item.added` … `response.output_item.done` with its text,
//! argument or reasoning-summary deltas between, `response.completed` (or `.incomplete`)
//! holding the whole output; an `error` event when the turn fails.
//!
//! A text block is a `message` item of its own, a tool call a `function_call` item. Code
//! Cordon ran is one `code_interpreter_call` item made of the call and its result, so the
//! call's block is held until its result's block arrives (or the turn ends without one).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::delta::{BlockKind, Delta};
use super::event::{Event, event};
use super::live_encoder::LiveEncoder;
use crate::conversation::{ContentBlock, Turn, Vendor, responses};

/// Encodes deltas as Responses stream events, numbered by `sequence_number`.
#[derive(Debug, Default)]
pub struct ResponsesLiveEncoder {
    sequence: usize,
    id: String,
    model: String,
    same: bool,
    /// The output items done so far, for `response.completed`.
    items: Vec<Value>,
    /// Items streaming now, by canonical block index.
    open: HashMap<usize, OpenItem>,
    /// Server tool calls waiting for their result, in order.
    held: Vec<ContentBlock>,
    ended: bool,
}

#[derive(Debug)]
struct OpenItem {
    output_index: usize,
    item_id: String,
    kind: ItemKind,
}

#[derive(Debug)]
enum ItemKind {
    Text(String),
    Call {
        arguments: String,
    },
    Reasoning {
        summary: Option<String>,
    },
    /// A server tool call, held until its result.
    Held,
}

impl ResponsesLiveEncoder {
    fn push(&mut self, name: &str, mut data: Value, out: &mut Vec<Event>) {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        out.push(event(name, data));
    }

    /// The output index the next item takes (items done plus items streaming).
    fn next_output(&self) -> usize {
        self.items.len()
            + self
                .open
                .values()
                .filter(|o| o.output_index != usize::MAX)
                .count()
    }

    /// `blocks` encoded as output items the way the whole-turn encoder writes them.
    fn encode_items(&self, blocks: Vec<ContentBlock>) -> Vec<Value> {
        let turn = Turn {
            origin: if self.same {
                Some(Vendor::OpenaiResponses)
            } else {
                None
            },
            id: self.id.clone(),
            model: self.model.clone(),
            content: blocks,
            stop_reason: None,
            stop_sequence: None,
            usage: Default::default(),
            container: None,
            extra: Default::default(),
        };
        match responses::encode_response(&turn)
            .get_mut("output")
            .map(Value::take)
        {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        }
    }

    /// Whole items, added and done at once.
    fn emit_whole(&mut self, items: Vec<Value>, out: &mut Vec<Event>) {
        for mut item in items {
            let output_index = self.next_output();
            if item.get("id").is_none() {
                item["id"] = json!(format!("item_{}_{output_index}", self.id));
            }
            self.push(
                "response.output_item.added",
                json!({"output_index": output_index, "item": item}),
                out,
            );
            self.push(
                "response.output_item.done",
                json!({"output_index": output_index, "item": item}),
                out,
            );
            self.items.push(item);
        }
    }

    fn start(&mut self, index: usize, kind: &BlockKind, out: &mut Vec<Event>) {
        let output_index = self.next_output();
        let (prefix, item, kind) = match kind {
            BlockKind::Text => (
                "msg",
                json!({"type": "message", "role": "assistant", "status": "in_progress", "content": []}),
                ItemKind::Text(String::new()),
            ),
            BlockKind::ToolCall { id, name, .. } => (
                "fc",
                json!({"type": "function_call", "call_id": id, "name": name, "arguments": "",
                    "status": "in_progress"}),
                ItemKind::Call {
                    arguments: String::new(),
                },
            ),
            BlockKind::Thinking {
                vendor: Vendor::OpenaiResponses,
            } => (
                "rs",
                json!({"type": "reasoning", "summary": []}),
                ItemKind::Reasoning { summary: None },
            ),
            BlockKind::ServerToolCall { .. } => {
                // Not an output item yet: it takes its place when its result comes.
                self.open.insert(
                    index,
                    OpenItem {
                        output_index: usize::MAX,
                        item_id: String::new(),
                        kind: ItemKind::Held,
                    },
                );
                return;
            }
            // Whole blocks are written at their stop; other vendors' reasoning is left out.
            _ => return,
        };
        let item_id = format!("{prefix}_{}_{output_index}", self.id);
        let mut item = item;
        item["id"] = json!(item_id);
        self.push(
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        if matches!(kind, ItemKind::Text(_)) {
            self.push(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": output_index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
                out,
            );
        }
        self.open.insert(
            index,
            OpenItem {
                output_index,
                item_id,
                kind,
            },
        );
    }

    fn stop(&mut self, index: usize, block: &ContentBlock, out: &mut Vec<Event>) {
        let Some(open) = self.open.remove(&index) else {
            // A block that arrived whole: a server tool's result completes its held call.
            let mut blocks = Vec::with_capacity(2);
            if let ContentBlock::ServerToolResult { tool_use_id, .. } = block
                && let Some(at) = self.held.iter().position(
                    |c| matches!(c, ContentBlock::ServerToolCall { id, .. } if id == tool_use_id),
                )
            {
                blocks.push(self.held.remove(at));
            }
            blocks.push(block.clone());
            let items = self.encode_items(blocks);
            self.emit_whole(items, out);
            return;
        };
        let OpenItem {
            output_index,
            item_id,
            kind,
        } = open;
        let at = |extra: Value| {
            let mut v = json!({"item_id": item_id, "output_index": output_index});
            if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                v.extend(extra);
            }
            v
        };
        let mut item = match kind {
            ItemKind::Held => {
                self.held.push(block.clone());
                return;
            }
            ItemKind::Text(text) => {
                let item = self
                    .encode_items(vec![block.clone()])
                    .pop()
                    .unwrap_or_else(|| {
                        json!({"type": "message", "role": "assistant", "content": [
                        {"type": "output_text", "text": text, "annotations": []}]})
                    });
                let part = item["content"][0].clone();
                self.push(
                    "response.output_text.done",
                    at(json!({"content_index": 0, "text": part["text"], "logprobs": []})),
                    out,
                );
                self.push(
                    "response.content_part.done",
                    at(json!({"content_index": 0, "part": part})),
                    out,
                );
                item
            }
            ItemKind::Call { arguments } => {
                let mut item = self
                    .encode_items(vec![block.clone()])
                    .pop()
                    .unwrap_or_default();
                // The pieces as they went out are the arguments (the same JSON, its spacing).
                let whole = if arguments.is_empty() {
                    item["arguments"].as_str().unwrap_or("{}").to_owned()
                } else {
                    arguments.clone()
                };
                item["arguments"] = json!(whole);
                if arguments.is_empty() {
                    self.push(
                        "response.function_call_arguments.delta",
                        at(json!({"delta": whole})),
                        out,
                    );
                }
                self.push(
                    "response.function_call_arguments.done",
                    at(json!({"arguments": whole})),
                    out,
                );
                item
            }
            ItemKind::Reasoning { summary } => {
                if let Some(text) = summary {
                    let part = json!({"type": "summary_text", "text": text});
                    self.push(
                        "response.reasoning_summary_text.done",
                        at(json!({"summary_index": 0, "text": text})),
                        out,
                    );
                    self.push(
                        "response.reasoning_summary_part.done",
                        at(json!({"summary_index": 0, "part": part})),
                        out,
                    );
                }
                match block {
                    ContentBlock::Reasoning { data, .. } => data.clone(),
                    _ => json!({"type": "reasoning", "summary": []}),
                }
            }
        };
        if item.get("id").is_none_or(|id| !id.is_string()) {
            item["id"] = json!(item_id);
        }
        if item["type"] != "reasoning" {
            item["id"] = json!(item_id);
            item["status"] = json!("completed");
        }
        self.push(
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
            out,
        );
        self.items.push(item);
    }

    fn piece(&mut self, index: usize, piece: Piece<'_>, out: &mut Vec<Event>) {
        let Some(open) = self.open.get_mut(&index) else {
            return;
        };
        let (output_index, item_id) = (open.output_index, open.item_id.clone());
        let at = json!({"item_id": item_id, "output_index": output_index});
        let with = |extra: Value| {
            let mut v = at.clone();
            if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                v.extend(extra);
            }
            v
        };
        match (&mut open.kind, piece) {
            (ItemKind::Text(text), Piece::Text(more)) => {
                text.push_str(more);
                let data = with(json!({"content_index": 0, "delta": more, "logprobs": []}));
                self.push("response.output_text.delta", data, out);
            }
            (ItemKind::Call { arguments }, Piece::Arguments(more)) => {
                arguments.push_str(more);
                let data = with(json!({"delta": more}));
                self.push("response.function_call_arguments.delta", data, out);
            }
            (ItemKind::Reasoning { summary }, Piece::Thinking(more)) => {
                let first = summary.is_none();
                summary.get_or_insert_with(String::new).push_str(more);
                if first {
                    let data = with(json!({"summary_index": 0,
                        "part": {"type": "summary_text", "text": ""}}));
                    self.push("response.reasoning_summary_part.added", data, out);
                }
                let data = with(json!({"summary_index": 0, "delta": more}));
                self.push("response.reasoning_summary_text.delta", data, out);
            }
            _ => {}
        }
    }
}

/// A piece of an open block.
enum Piece<'a> {
    Text(&'a str),
    Arguments(&'a str),
    Thinking(&'a str),
}

impl LiveEncoder for ResponsesLiveEncoder {
    fn encode(&mut self, delta: &Delta, out: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        match delta {
            Delta::TurnStart { id, model, origin } => {
                self.id = id.clone();
                self.model = model.clone();
                self.same = *origin == Some(Vendor::OpenaiResponses);
                let response = json!({
                    "id": id, "object": "response", "created_at": 0, "status": "in_progress",
                    "error": null, "incomplete_details": null, "model": model, "output": [],
                    "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
                    "usage": null,
                });
                self.push("response.created", json!({"response": response}), out);
                self.push("response.in_progress", json!({"response": response}), out);
            }
            Delta::BlockStart { index, kind } => self.start(*index, kind, out),
            Delta::Text { index, text } => self.piece(*index, Piece::Text(text), out),
            Delta::Thinking { index, text } => self.piece(*index, Piece::Thinking(text), out),
            Delta::ToolArguments { index, json } => self.piece(*index, Piece::Arguments(json), out),
            Delta::Signature { .. } => {}
            Delta::BlockStop { index, block } => self.stop(*index, block, out),
            Delta::TurnEnd {
                stop_reason,
                usage,
                container,
                ..
            } => {
                self.ended = true;
                // A call whose result never came (its program waits for the client).
                let held = std::mem::take(&mut self.held);
                for call in held {
                    let items = self.encode_items(vec![call]);
                    self.emit_whole(items, out);
                }
                let mut response = responses::encode_response(&Turn {
                    origin: Some(Vendor::OpenaiResponses),
                    id: self.id.clone(),
                    model: self.model.clone(),
                    content: Vec::new(),
                    stop_reason: stop_reason.clone(),
                    stop_sequence: None,
                    usage: usage.clone(),
                    container: None,
                    extra: Default::default(),
                });
                let mut items = std::mem::take(&mut self.items);
                if let Some(container) = container {
                    for item in &mut items {
                        if item["type"] == "code_interpreter_call" {
                            item["container_id"] = json!(container.id);
                        }
                    }
                }
                response["output"] = Value::Array(items);
                let name = if response["status"] == "incomplete" {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                self.push(name, json!({"response": response}), out);
            }
            Delta::Error { kind, message } => {
                self.ended = true;
                self.push(
                    "error",
                    json!({"code": kind, "message": message, "param": null}),
                    out,
                );
            }
        }
    }
}
