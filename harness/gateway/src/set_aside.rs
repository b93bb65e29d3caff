//! What of a turn handed to the client the client never sees (calls that ran inline, with
//! their results; reasoning in another vendor's shape), kept until the client answers.

use std::collections::HashMap;
use std::sync::Arc;

use cordon_protocol::conversation::{ContentBlock, Message, Role, ToolCall, ToolResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bounded_map::BoundedMap;
use crate::call_ids::scoped;
use crate::gateway_store::{GatewayStore, GatewayStoreError, StoreResult, kinds};

/// What of a turn handed to the client the client never sees: the server calls that ran
/// inline with their results, and reasoning in another vendor's shape.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Aside {
    pub(crate) reasoning: Vec<ContentBlock>,
    pub(crate) calls: Vec<ToolCall>,
    pub(crate) results: Vec<ToolResult>,
}

/// [`Aside`] parts of turns whose calls went to the client, keyed by conversation and the
/// id of that turn's first client call. Bounded in memory (those turns forgotten reach
/// the model without them); with a store, one record per conversation holds them all, so
/// they outlive the process.
#[derive(Debug)]
pub(crate) struct Stash {
    asides: BoundedMap<Aside>,
    store: Option<Arc<dyn GatewayStore>>,
}

const STASH_MAX: usize = 10_000;

impl Stash {
    pub(crate) fn new(store: Option<Arc<dyn GatewayStore>>) -> Self {
        Stash {
            asides: BoundedMap::new(STASH_MAX),
            store,
        }
    }

    pub(crate) async fn keep(
        &self,
        conversation: &str,
        key: &str,
        aside: Aside,
    ) -> StoreResult<()> {
        if let Some(store) = &self.store {
            let mut kept = stored(store.as_ref(), conversation).await?;
            kept.insert(key.to_owned(), aside.clone());
            let value = serde_json::to_value(&kept)
                .map_err(|e| GatewayStoreError(format!("a turn's set-aside calls: {e}")))?;
            store.put(kinds::ASIDES, conversation, &value).await?;
        }
        self.asides.insert(key, aside);
        Ok(())
    }

    /// Puts kept reasoning and calls back into the assistant message holding their key
    /// (reasoning first, calls last), and the results at the start of the user message
    /// after it.
    pub(crate) async fn restore(&self, conversation: &str, view: &mut [Message]) {
        // A store that fails leaves the turns without what was set aside, as if forgotten.
        let kept = match &self.store {
            Some(store) => stored(store.as_ref(), conversation)
                .await
                .unwrap_or_default(),
            None => HashMap::new(),
        };
        if self.asides.is_empty() && kept.is_empty() {
            return;
        }
        let find = |key: String| self.asides.get(&key).or_else(|| kept.get(&key).cloned());
        for i in 0..view.len() {
            if view[i].role != Role::Assistant {
                continue;
            }
            let found = view[i].content.iter().find_map(|b| match b {
                ContentBlock::ToolCall(c) => find(scoped(conversation, &c.id)),
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

/// The asides kept in the store for `conversation`.
async fn stored(
    store: &dyn GatewayStore,
    conversation: &str,
) -> StoreResult<HashMap<String, Aside>> {
    Ok(store
        .get(kinds::ASIDES, conversation)
        .await?
        .and_then(|value: Value| serde_json::from_value(value).ok())
        .unwrap_or_default())
}
