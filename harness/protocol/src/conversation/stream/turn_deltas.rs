//! A finished turn, or one block of it, told as canonical deltas: for upstreams that answer
//! whole (a scripted model, a JSON answer to a streamed request) and for blocks a gateway
//! makes itself (a server tool's call and result).

use serde_json::Value;

use super::delta::{BlockKind, Delta, arguments_text};
use crate::conversation::{ContentBlock, Turn, Vendor};

/// The whole turn as deltas: `TurnStart`, each block in order, `TurnEnd`.
pub fn turn_deltas(turn: &Turn) -> Vec<Delta> {
    let mut deltas = vec![Delta::TurnStart {
        id: turn.id.clone(),
        model: turn.model.clone(),
        origin: turn.origin,
    }];
    for (index, block) in turn.content.iter().enumerate() {
        deltas.extend(block_deltas(index, block));
    }
    deltas.push(Delta::TurnEnd {
        stop_reason: turn.stop_reason.clone(),
        stop_sequence: turn.stop_sequence.clone(),
        usage: turn.usage.clone(),
        container: turn.container.clone(),
    });
    deltas
}

/// One complete block as block `index`: its start, its content in one piece, its stop.
pub fn block_deltas(index: usize, block: &ContentBlock) -> Vec<Delta> {
    let kind = block_kind(block);
    let mut deltas = Vec::with_capacity(4);
    let pieces: Vec<Delta> = match (&kind, block) {
        (BlockKind::Text, ContentBlock::Text { text, .. }) if !text.is_empty() => {
            vec![Delta::Text {
                index,
                text: text.clone(),
            }]
        }
        (BlockKind::Thinking { vendor }, ContentBlock::Reasoning { data, .. }) => {
            thinking_pieces(index, *vendor, data)
        }
        (BlockKind::ToolCall { .. }, ContentBlock::ToolCall(call)) => vec![Delta::ToolArguments {
            index,
            json: arguments_text(&call.input),
        }],
        (BlockKind::ServerToolCall { .. }, ContentBlock::ServerToolCall { input, .. }) => {
            vec![Delta::ToolArguments {
                index,
                json: arguments_text(input),
            }]
        }
        _ => Vec::new(),
    };
    deltas.push(Delta::BlockStart { index, kind });
    deltas.extend(pieces);
    deltas.push(Delta::BlockStop {
        index,
        block: block.clone(),
    });
    deltas
}

/// What `block` is at its start.
pub fn block_kind(block: &ContentBlock) -> BlockKind {
    match block {
        ContentBlock::Text { .. } => BlockKind::Text,
        ContentBlock::Reasoning { vendor, data } if is_thinking(*vendor, data) => {
            BlockKind::Thinking { vendor: *vendor }
        }
        ContentBlock::ToolCall(call) => BlockKind::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            caller: call.caller.clone(),
        },
        ContentBlock::ServerToolCall { id, name, .. } => BlockKind::ServerToolCall {
            id: id.clone(),
            name: name.clone(),
        },
        other => BlockKind::Whole(other.clone()),
    }
}

/// Whether reasoning streams as text: Anthropic `thinking` (not `redacted_thinking`), a
/// Responses `reasoning` item, Chat's `reasoning_content` string.
fn is_thinking(vendor: Vendor, data: &Value) -> bool {
    match vendor {
        Vendor::Anthropic => data.get("type").and_then(Value::as_str) == Some("thinking"),
        Vendor::OpenaiResponses => data.get("type").and_then(Value::as_str) == Some("reasoning"),
        Vendor::OpenaiChat => data.is_string(),
        // Other vendors' reasoning arrives whole until their stream says otherwise.
        _ => false,
    }
}

/// The text and signature pieces of a reasoning block's data.
fn thinking_pieces(index: usize, vendor: Vendor, data: &Value) -> Vec<Delta> {
    let mut pieces = Vec::new();
    let text = match vendor {
        Vendor::Anthropic => data["thinking"].as_str().unwrap_or_default().to_owned(),
        Vendor::OpenaiResponses => summary_text(data),
        _ => data.as_str().unwrap_or_default().to_owned(),
    };
    if !text.is_empty() {
        pieces.push(Delta::Thinking { index, text });
    }
    if let Some(signature) = data["signature"].as_str().filter(|s| !s.is_empty()) {
        pieces.push(Delta::Signature {
            index,
            signature: signature.to_owned(),
        });
    }
    pieces
}

/// A Responses reasoning item's summary texts, joined by blank lines.
pub(super) fn summary_text(item: &Value) -> String {
    item["summary"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}
