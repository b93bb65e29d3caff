//! Canonical deltas as an Anthropic Messages stream, live: `message_start`, each block's
//! `content_block_start` / `content_block_delta` / `content_block_stop`, `message_delta`,
//! `message_stop`; an `error` event when the turn fails.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::delta::{BlockKind, Delta};
use super::event::{Event, event};
use super::live_encoder::LiveEncoder;
use crate::conversation::{ContentBlock, Turn, Vendor, anthropic};

/// Encodes deltas as Anthropic Messages stream events.
#[derive(Debug, Default)]
pub struct AnthropicLiveEncoder {
    /// The turn's blocks came from Anthropic: their `extra` fields go out.
    same: bool,
    /// Client block index by canonical index, for blocks this API carries.
    blocks: HashMap<usize, usize>,
    next: usize,
    id: String,
    model: String,
}

impl AnthropicLiveEncoder {
    fn client_index(&self, index: usize) -> Option<usize> {
        self.blocks.get(&index).copied()
    }

    fn delta(&self, index: usize, delta: Value, out: &mut Vec<Event>) {
        if let Some(index) = self.client_index(index) {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
    }

    /// The `content_block_start` block for `kind`, or `None` when this API cannot carry it.
    fn start_block(&self, kind: &BlockKind) -> Option<Value> {
        Some(match kind {
            BlockKind::Text => json!({"type": "text", "text": ""}),
            BlockKind::Thinking {
                vendor: Vendor::Anthropic,
            } => json!({"type": "thinking", "thinking": "", "signature": ""}),
            BlockKind::Thinking { .. } => return None,
            BlockKind::ToolCall { id, name, caller } => {
                let mut block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                if let Some(caller) = caller {
                    let mut c = json!({"type": caller.kind});
                    if let Some(tool_id) = &caller.tool_id {
                        c["tool_id"] = json!(tool_id);
                    }
                    block["caller"] = c;
                }
                block
            }
            BlockKind::ServerToolCall { id, name } => {
                json!({"type": "server_tool_use", "id": id, "name": name, "input": {}})
            }
            BlockKind::Whole(block) => {
                anthropic::encode_blocks(std::slice::from_ref(block), self.same).pop()?
            }
        })
    }
}

impl LiveEncoder for AnthropicLiveEncoder {
    fn encode(&mut self, delta: &Delta, out: &mut Vec<Event>) {
        match delta {
            Delta::TurnStart { id, model, origin } => {
                self.same = *origin == Some(Vendor::Anthropic);
                self.id = id.clone();
                self.model = model.clone();
                out.push(event(
                    "message_start",
                    json!({"type": "message_start", "message": {
                        "id": id, "type": "message", "role": "assistant", "model": model,
                        "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    }}),
                ));
            }
            Delta::BlockStart { index, kind } => {
                let Some(block) = self.start_block(kind) else {
                    return;
                };
                let client = self.next;
                self.next += 1;
                self.blocks.insert(*index, client);
                out.push(event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": client, "content_block": block}),
                ));
            }
            Delta::Text { index, text } => {
                self.delta(*index, json!({"type": "text_delta", "text": text}), out);
            }
            Delta::Thinking { index, text } => {
                self.delta(
                    *index,
                    json!({"type": "thinking_delta", "thinking": text}),
                    out,
                );
            }
            Delta::Signature { index, signature } => {
                self.delta(
                    *index,
                    json!({"type": "signature_delta", "signature": signature}),
                    out,
                );
            }
            Delta::ToolArguments { index, json } => {
                self.delta(
                    *index,
                    json!({"type": "input_json_delta", "partial_json": json}),
                    out,
                );
            }
            Delta::BlockStop { index, block } => {
                let Some(client) = self.blocks.remove(index) else {
                    return;
                };
                // Citations stream as deltas of their own before the stop.
                if let ContentBlock::Text { extra, .. } = block
                    && self.same
                    && let Some(Value::Array(citations)) = extra.get("citations")
                {
                    for citation in citations {
                        out.push(event(
                            "content_block_delta",
                            json!({"type": "content_block_delta", "index": client,
                                "delta": {"type": "citations_delta", "citation": citation}}),
                        ));
                    }
                }
                out.push(event(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": client}),
                ));
            }
            Delta::TurnEnd {
                stop_reason,
                stop_sequence,
                usage,
                container,
            } => {
                let message = anthropic::encode_response(&Turn {
                    origin: Some(Vendor::Anthropic),
                    id: self.id.clone(),
                    model: self.model.clone(),
                    content: Vec::new(),
                    stop_reason: stop_reason.clone(),
                    stop_sequence: stop_sequence.clone(),
                    usage: usage.clone(),
                    container: container.clone(),
                    extra: Default::default(),
                });
                let mut delta = json!({
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                });
                if let Some(container) = message.get("container") {
                    delta["container"] = container.clone();
                }
                out.push(event(
                    "message_delta",
                    json!({"type": "message_delta", "delta": delta, "usage": message["usage"]}),
                ));
                out.push(event("message_stop", json!({"type": "message_stop"})));
            }
            Delta::Error { kind, message } => {
                out.push(event(
                    "error",
                    json!({"type": "error", "error": {"type": kind, "message": message}}),
                ));
            }
        }
    }
}
