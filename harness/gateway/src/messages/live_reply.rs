//! A streamed client reply as it is written: the model rounds' deltas renumbered as one
//! response, server tools held back until they ran, blocks Cordon shows itself, all
//! encoded for the client's API and handed to the server as they come.
//!
//! The first event goes out with the reply's head (its conversation, its computer): until
//! then nothing is sent, so a request that fails before its first byte is still answered
//! with an error status.

use std::collections::HashMap;
use std::collections::HashSet;

use cordon_core::Dispatcher;
use cordon_protocol::conversation::stream::{
    BlockKind, Delta, DeltaSink, Event, LiveEncoder, block_deltas,
};
use cordon_protocol::conversation::{ContentBlock, Turn, Vendor};
use tokio::sync::{mpsc, oneshot};

use super::request_reply::StreamHead;
use crate::tool_calls::{CallTarget, classify};

/// The reply being streamed to one client.
pub(crate) struct LiveReply {
    encoder: Box<dyn LiveEncoder>,
    /// The head, until the first event goes out with it.
    head: Option<(oneshot::Sender<StreamHead>, StreamHead)>,
    events: mpsc::UnboundedSender<Event>,
    /// The response id the client sees (known before the first byte).
    pub(super) id: String,
    model: String,
    origin: Option<Vendor>,
    /// Client block index of the next block.
    next: usize,
    /// This round's upstream blocks: their client index, or `None` while held back.
    round: HashMap<usize, Option<usize>>,
    /// The blocks that went out, in order: the reply's content as the client has it.
    pub(super) emitted: Vec<ContentBlock>,
    buffer: Vec<Event>,
}

impl LiveReply {
    pub(crate) fn new(
        encoder: Box<dyn LiveEncoder>,
        head: (oneshot::Sender<StreamHead>, StreamHead),
        events: mpsc::UnboundedSender<Event>,
        id: String,
        model: String,
        origin: Option<Vendor>,
    ) -> Self {
        LiveReply {
            encoder,
            head: Some(head),
            events,
            id,
            model,
            origin,
            next: 0,
            round: HashMap::new(),
            emitted: Vec::new(),
            buffer: Vec::new(),
        }
    }

    /// The conversation the reply belongs to, for its head.
    pub(super) fn set_conversation(&mut self, conversation: &str) {
        if let Some((_, head)) = &mut self.head {
            head.conversation_id = conversation.to_owned();
        }
    }

    /// The computer bound to the reply, for its head.
    pub(super) fn set_computer(&mut self, computer: Option<String>) {
        if let Some((_, head)) = &mut self.head {
            head.computer = computer;
        }
    }

    /// Whether the first byte went out (an error now is an event of the stream).
    pub(super) fn started(&self) -> bool {
        self.head.is_none()
    }

    fn emit(&mut self, delta: &Delta) {
        if let Some((sender, head)) = self.head.take() {
            // A client that went away does not stop the reply: it is still recorded.
            let _ = sender.send(head);
            let start = Delta::TurnStart {
                id: self.id.clone(),
                model: self.model.clone(),
                origin: self.origin,
            };
            self.encoder.encode(&start, &mut self.buffer);
        }
        self.encoder.encode(delta, &mut self.buffer);
        for event in self.buffer.drain(..) {
            let _ = self.events.send(event);
        }
    }

    /// A new model round: its blocks are numbered after the ones already out.
    pub(super) fn begin_round(&mut self) {
        self.round.clear();
    }

    /// One delta of the model's round. Turn-level deltas are the reply's own and stay here;
    /// a tool call `held` names (a server tool) is held back whole, since it runs only once
    /// complete and the client sees what it did.
    pub(super) fn upstream(&mut self, delta: Delta, held: &HeldNames<'_>) {
        let Some(index) = delta.index() else {
            return;
        };
        if let Delta::BlockStart { kind, .. } = &delta {
            let client = match kind {
                BlockKind::ToolCall { name, .. } if held.held(name) => None,
                _ => {
                    self.next += 1;
                    Some(self.next - 1)
                }
            };
            self.round.insert(index, client);
        }
        let Some(Some(client)) = self.round.get(&index).copied() else {
            return;
        };
        if let Delta::BlockStop { block, .. } = &delta {
            self.emitted.push(block.clone());
        }
        self.emit(&delta.with_index(client));
    }

    /// A whole block Cordon shows (a server tool's call and result, a held call the client
    /// must answer, its own text).
    pub(super) fn show(&mut self, block: &ContentBlock) {
        let index = self.next;
        self.next += 1;
        for delta in block_deltas(index, block) {
            self.emit(&delta);
        }
        self.emitted.push(block.clone());
    }

    /// Shows the blocks of `content` that did not go out yet, in order.
    pub(super) fn show_missing(&mut self, content: &[ContentBlock]) {
        let mut matched = vec![false; self.emitted.len()];
        let mut missing = Vec::new();
        for block in content {
            let out = self
                .emitted
                .iter()
                .enumerate()
                .position(|(n, b)| !matched[n] && b == block);
            match out {
                Some(n) => matched[n] = true,
                None => missing.push(block.clone()),
            }
        }
        for block in &missing {
            self.show(block);
        }
    }

    /// The reply ends with `turn`'s stop reason, usage and container.
    pub(super) fn end(&mut self, turn: &Turn) {
        self.emit(&Delta::TurnEnd {
            stop_reason: turn.stop_reason.clone(),
            stop_sequence: turn.stop_sequence.clone(),
            usage: turn.usage.clone(),
            container: turn.container.clone(),
        });
    }

    /// The reply fails after its first byte: the client's API's own error event.
    pub(super) fn fail(&mut self, kind: &str, message: &str) {
        self.emit(&Delta::Error {
            kind: kind.to_owned(),
            message: message.to_owned(),
        });
    }
}

/// Which tool names are server tools in this request, known at a call's start.
pub(super) struct HeldNames<'a> {
    pub(super) code: bool,
    pub(super) computer: Option<&'a str>,
    pub(super) client: &'a HashSet<String>,
    pub(super) operator: Option<&'a Dispatcher>,
    /// Other names Cordon runs (`RequestState::more_server_names`: tool searches, the
    /// JavaScript program tool, a bound browser's calls).
    pub(super) more: Vec<String>,
}

impl HeldNames<'_> {
    fn held(&self, name: &str) -> bool {
        if self.more.iter().any(|n| n == name) {
            return true;
        }
        let target = classify(
            name,
            self.code
                .then_some(cordon_protocol::conversation::CODE_TOOL),
            self.computer,
            &[],
            |n| self.client.contains(n),
            self.operator,
        );
        matches!(
            target,
            CallTarget::Code | CallTarget::Computer | CallTarget::ToolSearch | CallTarget::Operator
        )
    }
}

/// One model round's deltas on their way into the reply.
pub(super) struct RoundSink<'a, 'b> {
    pub(super) live: &'a mut LiveReply,
    pub(super) held: HeldNames<'b>,
}

impl DeltaSink for RoundSink<'_, '_> {
    fn send(&mut self, delta: Delta) -> bool {
        self.live.upstream(delta, &self.held);
        true
    }
}
