//! The canonical live-stream vocabulary: a turn as it streams, told once for every API.
//!
//! An upstream's accumulator turns each vendor event it consumes into [`Delta`]s (besides
//! building the whole turn); a client API's [`LiveEncoder`] turns deltas into that API's
//! own events as they come. A gateway sits between the two, so any upstream API streams to
//! any client API without either side knowing the other.
//!
//! A stream is `TurnStart`, then blocks, then `TurnEnd` (or `Error`, after which nothing
//! follows). A block is `BlockStart`, the deltas of its kind, and `BlockStop`, which carries
//! the block complete. Blocks are numbered by `index` in the order they start, from 0, with
//! no gaps; several may be open at once (parallel tool calls whose argument deltas
//! interleave), each delta naming its block.

use serde_json::Value;

use crate::conversation::{Container, ContentBlock, StopReason, ToolCaller, Usage, Vendor};

/// What a block is, known when it starts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BlockKind {
    /// Text; [`Delta::Text`] pieces follow.
    Text,
    /// Reasoning in `vendor`'s shape (Anthropic `thinking`, a Responses `reasoning` item's
    /// summary, Chat `reasoning_content`); [`Delta::Thinking`] and [`Delta::Signature`]
    /// pieces follow. An API that cannot carry `vendor`'s reasoning leaves it out, as its
    /// whole-turn encoder does.
    Thinking {
        /// Whose reasoning it is.
        vendor: Vendor,
    },
    /// A call of a client or function tool; [`Delta::ToolArguments`] pieces follow. Its
    /// arguments are final only at [`Delta::BlockStop`]: nothing may run before.
    ToolCall {
        /// The pairing key.
        id: String,
        /// The tool's name: enough to know who runs the call.
        name: String,
        /// Who made it (programmatic tool calling), when known at the start.
        caller: Option<ToolCaller>,
    },
    /// A call of a server tool (Anthropic `server_tool_use`, a code call Cordon ran);
    /// [`Delta::ToolArguments`] pieces follow.
    ServerToolCall {
        /// Its id (`srvtoolu_…`).
        id: String,
        /// The server tool's name (`code_execution`, `web_search`, …).
        name: String,
    },
    /// A block that arrives whole (a server tool's result, redacted thinking, a vendor block
    /// the canonical model keeps opaque, an image): no deltas follow before its stop.
    Whole(ContentBlock),
}

/// One step of a streaming turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Delta {
    /// The turn begins.
    TurnStart {
        /// The turn's id (`msg_…`, `chatcmpl-…`, `resp_…`).
        id: String,
        /// The model answering.
        model: String,
        /// The vendor whose shapes the blocks' `extra` fields are in: an encoder of that
        /// vendor's API keeps them, the others leave them out (as the whole-turn encoders).
        origin: Option<Vendor>,
    },
    /// Block `index` begins.
    BlockStart {
        /// The block's number in this turn (start order, from 0).
        index: usize,
        /// What it is.
        kind: BlockKind,
    },
    /// More text of a [`BlockKind::Text`] block.
    Text {
        /// The block.
        index: usize,
        /// The piece.
        text: String,
    },
    /// More reasoning text of a [`BlockKind::Thinking`] block.
    Thinking {
        /// The block.
        index: usize,
        /// The piece.
        text: String,
    },
    /// More of a [`BlockKind::Thinking`] block's signature (Anthropic).
    Signature {
        /// The block.
        index: usize,
        /// The piece.
        signature: String,
    },
    /// More of a tool call's arguments: JSON text, valid only once all pieces are joined.
    ToolArguments {
        /// The block.
        index: usize,
        /// The piece.
        json: String,
    },
    /// Block `index` is complete.
    BlockStop {
        /// The block.
        index: usize,
        /// The block as it ended up: what a whole-turn reply would hold at its place. An
        /// encoder whose API repeats the whole block at its end (Responses
        /// `output_item.done`) takes it from here; the others may ignore it.
        block: ContentBlock,
    },
    /// The turn ends.
    TurnEnd {
        /// Why it ended.
        stop_reason: Option<StopReason>,
        /// The stop sequence met, if any.
        stop_sequence: Option<String>,
        /// Tokens used, for the whole turn.
        usage: Usage,
        /// The code-execution container the turn ran in (Anthropic `container`).
        container: Option<Container>,
    },
    /// The turn failed after its stream began; nothing follows. Accumulators do not make
    /// this (an upstream `error` event is their `Err`): the gateway does, for its client.
    Error {
        /// The error type in Anthropic's vocabulary (`api_error`, `overloaded_error`,
        /// `invalid_request_error`, …); each encoder maps it to its API's own.
        kind: String,
        /// What went wrong.
        message: String,
    },
}

impl Delta {
    /// The block this delta belongs to (`None` for turn-level deltas).
    pub fn index(&self) -> Option<usize> {
        match self {
            Delta::BlockStart { index, .. }
            | Delta::Text { index, .. }
            | Delta::Thinking { index, .. }
            | Delta::Signature { index, .. }
            | Delta::ToolArguments { index, .. }
            | Delta::BlockStop { index, .. } => Some(*index),
            Delta::TurnStart { .. } | Delta::TurnEnd { .. } | Delta::Error { .. } => None,
        }
    }

    /// The same delta for block `index` (a gateway numbering several model rounds' blocks
    /// as one client response).
    pub fn with_index(mut self, new: usize) -> Self {
        match &mut self {
            Delta::BlockStart { index, .. }
            | Delta::Text { index, .. }
            | Delta::Thinking { index, .. }
            | Delta::Signature { index, .. }
            | Delta::ToolArguments { index, .. }
            | Delta::BlockStop { index, .. } => *index = new,
            Delta::TurnStart { .. } | Delta::TurnEnd { .. } | Delta::Error { .. } => {}
        }
        self
    }
}

/// Hands a delta to a consumer as it is made (a channel's sender, a vector in tests).
pub trait DeltaSink: Send {
    /// Takes one delta; `false` when the consumer has gone (the producer may stop early).
    fn send(&mut self, delta: Delta) -> bool;
}

impl DeltaSink for Vec<Delta> {
    fn send(&mut self, delta: Delta) -> bool {
        self.push(delta);
        true
    }
}

/// The JSON text of a tool input as one [`Delta::ToolArguments`] piece carries it whole.
pub(super) fn arguments_text(input: &Value) -> String {
    if input.is_null() {
        "{}".to_owned()
    } else {
        input.to_string()
    }
}
