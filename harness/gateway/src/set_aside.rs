//! What of a turn handed to the client the client never sees (calls that ran inline, with
//! their results; reasoning in another vendor's shape), kept until the client answers.

use cordon_protocol::conversation::{ContentBlock, Message, Role, ToolCall, ToolResult};

use crate::bounded_map::BoundedMap;
use crate::call_ids::scoped;

/// What of a turn handed to the client the client never sees: the server calls that ran
/// inline with their results, and reasoning in another vendor's shape.
#[derive(Debug, Clone)]
pub(crate) struct Aside {
    pub(crate) reasoning: Vec<ContentBlock>,
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) results: Vec<ToolResult>,
}

/// [`Aside`] parts of turns whose calls went to the client, keyed by conversation and the
/// id of that turn's first client call. Bounded (those turns forgotten reach the model
/// without them).
#[derive(Debug)]
pub(crate) struct Stash {
    asides: BoundedMap<Aside>,
}

const STASH_MAX: usize = 10_000;

impl Default for Stash {
    fn default() -> Self {
        Stash {
            asides: BoundedMap::new(STASH_MAX),
        }
    }
}

impl Stash {
    pub(crate) fn keep(&self, key: &str, aside: Aside) {
        self.asides.insert(key, aside);
    }

    /// Puts kept reasoning and calls back into the assistant message holding their key
    /// (reasoning first, calls last), and the results at the start of the user message
    /// after it.
    pub(crate) fn restore(&self, conversation: &str, view: &mut [Message]) {
        if self.asides.is_empty() {
            return;
        }
        for i in 0..view.len() {
            if view[i].role != Role::Assistant {
                continue;
            }
            let found = view[i].content.iter().find_map(|b| match b {
                ContentBlock::ToolCall(c) => self.asides.get(&scoped(conversation, &c.id)),
                _ => None,
            });
            let Some(Aside {
                reasoning,
                calls,
                results,
            }) = found
            else {
                continue;
            };
            if view.get(i + 1).is_none_or(|m| m.role != Role::User) {
                continue;
            }
            view[i].content.splice(0..0, reasoning);
            view[i]
                .content
                .extend(calls.into_iter().map(ContentBlock::ToolCall));
            let next = &mut view[i + 1].content;
            for (at, result) in results.into_iter().enumerate() {
                next.insert(at, ContentBlock::ToolResult(result));
            }
        }
    }
}
