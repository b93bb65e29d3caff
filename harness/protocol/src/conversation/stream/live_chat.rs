//! Canonical deltas as Chat Completions chunks, live: a first chunk with the role, text
//! and `tool_calls` deltas, the finish reason, a usage chunk, `[DONE]`; a chunk holding
//! `error` when the turn fails. Chat has no place for server tools or other vendors'
//! reasoning: those blocks are left out, as the whole-turn encoder leaves them out.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::delta::{BlockKind, Delta};
use super::event::{Event, event};
use super::live_encoder::LiveEncoder;
use crate::conversation::{Turn, Vendor, chat};

/// Encodes deltas as Chat Completions chunks.
#[derive(Debug, Default)]
pub struct ChatLiveEncoder {
    id: String,
    model: String,
    /// What each carried block is: text, reasoning, or the call with this Chat index.
    blocks: HashMap<usize, Carried>,
    calls: usize,
    ended: bool,
}

#[derive(Debug, Clone, Copy)]
enum Carried {
    Text,
    Reasoning,
    /// A call: its `tool_calls[].index`, and whether argument pieces went out.
    Call(usize, bool),
}

impl ChatLiveEncoder {
    fn chunk(&self, delta: Value, finish: Value) -> Value {
        json!({
            "id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    }

    fn push(&self, delta: Value, out: &mut Vec<Event>) {
        out.push(event("", self.chunk(delta, Value::Null)));
    }
}

impl LiveEncoder for ChatLiveEncoder {
    fn encode(&mut self, delta: &Delta, out: &mut Vec<Event>) {
        if self.ended {
            return;
        }
        match delta {
            Delta::TurnStart { id, model, .. } => {
                self.id = id.clone();
                self.model = model.clone();
                self.push(json!({"role": "assistant", "content": ""}), out);
            }
            Delta::BlockStart { index, kind } => match kind {
                BlockKind::Text => {
                    self.blocks.insert(*index, Carried::Text);
                }
                BlockKind::Thinking {
                    vendor: Vendor::OpenaiChat,
                } => {
                    self.blocks.insert(*index, Carried::Reasoning);
                }
                BlockKind::ToolCall { id, name, .. } => {
                    let call = self.calls;
                    self.calls += 1;
                    self.blocks.insert(*index, Carried::Call(call, false));
                    self.push(
                        json!({"tool_calls": [{"index": call, "id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}),
                        out,
                    );
                }
                // A text block that arrives whole (Cordon's own text) is carried as text.
                BlockKind::Whole(crate::conversation::ContentBlock::Text { text, .. }) => {
                    self.blocks.insert(*index, Carried::Text);
                    if !text.is_empty() {
                        self.push(json!({"content": text}), out);
                    }
                }
                _ => {}
            },
            Delta::Text { index, text } => {
                if let Some(Carried::Text) = self.blocks.get(index) {
                    self.push(json!({"content": text}), out);
                }
            }
            Delta::Thinking { index, text } => {
                if let Some(Carried::Reasoning) = self.blocks.get(index) {
                    self.push(json!({"reasoning_content": text}), out);
                }
            }
            Delta::Signature { .. } => {}
            Delta::ToolArguments { index, json } => {
                if let Some(Carried::Call(call, sent)) = self.blocks.get_mut(index) {
                    *sent = true;
                    let call = *call;
                    self.push(
                        json!({"tool_calls": [{"index": call, "function": {"arguments": json}}]}),
                        out,
                    );
                }
            }
            Delta::BlockStop { index, .. } => {
                // A call without pieces has an empty object for arguments, never "".
                if let Some(Carried::Call(call, false)) = self.blocks.remove(index) {
                    self.push(
                        json!({"tool_calls": [{"index": call, "function": {"arguments": "{}"}}]}),
                        out,
                    );
                }
            }
            Delta::TurnEnd {
                stop_reason, usage, ..
            } => {
                self.ended = true;
                let response = chat::encode_response(&Turn {
                    origin: Some(Vendor::OpenaiChat),
                    id: self.id.clone(),
                    model: self.model.clone(),
                    content: Vec::new(),
                    stop_reason: stop_reason.clone(),
                    stop_sequence: None,
                    usage: usage.clone(),
                    container: None,
                    extra: Default::default(),
                });
                out.push(event(
                    "",
                    self.chunk(json!({}), response["choices"][0]["finish_reason"].clone()),
                ));
                let mut last = self.chunk(json!({}), Value::Null);
                last["choices"] = json!([]);
                last["usage"] = response["usage"].clone();
                out.push(event("", last));
                out.push(event("", json!("[DONE]")));
            }
            Delta::Error { kind, message } => {
                self.ended = true;
                out.push(event(
                    "",
                    json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
                ));
            }
        }
    }
}
