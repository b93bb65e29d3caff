//! Which recorded conversation a client request continues.
//!
//! A request names its conversation with `x-cordon-conversation-id` (an unguessable id the
//! gateway handed out), or it continues a turn the gateway handed back with tool calls to
//! answer. A call id alone does not say the second: ids travel in logs and screenshots, and
//! some upstreams make them predictable. So each such turn is remembered by a digest of
//! everything the client must send back to continue it — the client's credential and the
//! conversation up to and including that turn — and a request joins the conversation only
//! when its own history, up to its last assistant message, digests the same. Anything else
//! starts a new record.
//!
//! The digest is keyed with a random key: with a gateway store, one key shared by every
//! process on that store (made once, kept in it) and the digests kept there too, so a
//! continuation after a restart joins its conversation; without one, a key per process
//! and digests in memory only. The store holds a keyed SHA-256 of the credential and the
//! history, never the credential.

use std::sync::Arc;

use cordon_protocol::conversation::{ContentBlock, Message, Role};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use cordon_core::ids::fresh_id;

use crate::bounded_map::BoundedMap;
use crate::gateway_store::{GatewayStore, kinds};
use crate::messages::MessagesCall;
use crate::record::Recorder;
use crate::upstream::Credential;

/// Turns remembered at most in memory (the oldest half forgotten past it: without a
/// store, their continuations start new records).
const CONTINUATIONS_MAX: usize = 10_000;

/// The key record's name under [`kinds::KEY`].
const KEY_NAME: &str = "continuation";

/// Turns handed back with tool calls, by the digest of what continues them.
#[derive(Debug)]
pub(crate) struct Continuations {
    key: tokio::sync::OnceCell<String>,
    store: Option<Arc<dyn GatewayStore>>,
    conversations: BoundedMap<String>,
}

impl Continuations {
    pub(crate) fn new(store: Option<Arc<dyn GatewayStore>>) -> Self {
        Continuations {
            key: tokio::sync::OnceCell::new(),
            store,
            conversations: BoundedMap::new(CONTINUATIONS_MAX),
        }
    }

    /// The digest key: the store's (made by the first process that needs it), else this
    /// process's own. A store that fails gives a key for this call only (its digests
    /// match nothing kept).
    async fn key(&self) -> String {
        let made = self
            .key
            .get_or_try_init(|| async {
                let Some(store) = &self.store else {
                    return Ok(fresh_id("key"));
                };
                let fresh = Value::String(fresh_id("key"));
                let kept = store.put_new(kinds::KEY, KEY_NAME, &fresh).await?;
                Ok::<_, crate::gateway_store::GatewayStoreError>(
                    kept.as_str().map_or_else(|| fresh_id("key"), str::to_owned),
                )
            })
            .await;
        match made {
            Ok(key) => key.clone(),
            Err(_) => fresh_id("key"),
        }
    }

    /// A digest of `credential` and `messages`, still open for the turn that answers them.
    pub(crate) async fn start(
        &self,
        credential: Option<&Credential>,
        messages: &[Message],
    ) -> Digest {
        let mut digest = Digest {
            hasher: Sha256::new(),
            run: None,
            text: String::new(),
        };
        digest.put(&[b"key", self.key().await.as_bytes()]);
        match credential {
            Some(credential) => digest.put(&[b"credential", credential.0.as_bytes()]),
            None => digest.put(&[b"no credential"]),
        }
        for message in messages {
            digest.message(message.role, &message.content);
        }
        digest
    }

    /// Remembers that the turn `content` (as the client received it), answering the
    /// history in `digest`, belongs to `conversation` — when it holds calls to answer. A
    /// store that fails leaves it in memory only.
    pub(crate) async fn remember(
        &self,
        mut digest: Digest,
        content: &[ContentBlock],
        conversation: &str,
    ) {
        if !content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall(_)))
        {
            return;
        }
        digest.message(Role::Assistant, content);
        let digest = digest.finish();
        if let Some(store) = &self.store {
            let value = Value::String(conversation.to_owned());
            let _ = store.put(kinds::CONTINUATION, &digest, &value).await;
        }
        self.conversations.insert(&digest, conversation.to_owned());
    }

    /// The conversation whose handed-back turn `messages` continue: the same credential,
    /// and the same history up to and including the last assistant message.
    async fn find(&self, credential: Option<&Credential>, messages: &[Message]) -> Option<String> {
        let end = messages.iter().rposition(|m| m.role == Role::Assistant)?;
        let digest = self.start(credential, &messages[..=end]).await.finish();
        if let Some(conversation) = self.conversations.get(&digest) {
            return Some(conversation);
        }
        let store = self.store.as_ref()?;
        let value = store.get(kinds::CONTINUATION, &digest).await.ok()??;
        value.as_str().map(str::to_owned)
    }
}

/// A keyed SHA-256 digest of a conversation's outline, fed message by message.
///
/// The outline is what survives a client's round trip through its SDK and the vendor
/// shapes: per run of same-role messages (vendors split and merge messages differently),
/// the ids and names of tool calls and the ids and text of results in order, then all text
/// with its whitespace left out (block boundaries and joins differ between shapes). Inputs,
/// images, reasoning and vendor-only blocks are left out: the approval check compares
/// inputs itself. Every field goes in with its length, so no two outlines feed the same
/// bytes.
#[derive(Debug, Clone)]
pub(crate) struct Digest {
    hasher: Sha256,
    /// The role of the run being fed.
    run: Option<Role>,
    /// Its text so far, without whitespace.
    text: String,
}

impl Digest {
    fn put(&mut self, fields: &[&[u8]]) {
        self.hasher.update((fields.len() as u64).to_le_bytes());
        for field in fields {
            self.hasher.update((field.len() as u64).to_le_bytes());
            self.hasher.update(field);
        }
    }

    fn message(&mut self, role: Role, blocks: &[ContentBlock]) {
        if self.run != Some(role) {
            self.end_run();
            self.run = Some(role);
            let role: &[u8] = if role == Role::User {
                b"user"
            } else {
                b"other"
            };
            self.put(&[b"run", role]);
        }
        for block in blocks {
            match block {
                ContentBlock::Text { text, .. } => self.text.extend(no_space(text)),
                ContentBlock::ToolCall(call) => {
                    self.put(&[b"call", call.id.as_bytes(), call.name.as_bytes()]);
                }
                ContentBlock::ToolResult(result) => {
                    let text: String = no_space(&result.content.text()).collect();
                    self.put(&[b"result", result.call_id.as_bytes(), text.as_bytes()]);
                }
                _ => {}
            }
        }
    }

    fn end_run(&mut self) {
        if self.run.is_some() {
            let text = std::mem::take(&mut self.text);
            self.put(&[b"text", text.as_bytes()]);
        }
    }

    fn finish(mut self) -> String {
        self.end_run();
        self.hasher
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

fn no_space(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter(|c| !c.is_whitespace())
}

/// The conversation a request belongs to: the one it names (if this server began it: a
/// client cannot write into a conversation it made up), the one whose handed-back turn it
/// continues ([`Continuations`]), or a new one. `messages` is the request decoded (`None`
/// when it could not be); `recorder` knows the conversations this server began.
pub(crate) async fn conversation_of(
    recorder: &dyn Recorder,
    continuations: &Continuations,
    call: &MessagesCall,
    messages: Option<&[Message]>,
) -> String {
    if let Some(id) = &call.conversation
        && id.starts_with("conv_")
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && recorder.knows(id)
    {
        return id.clone();
    }
    let found = match messages {
        Some(messages) => continuations.find(call.credential.as_ref(), messages).await,
        None => None,
    };
    found.unwrap_or_else(|| fresh_id("conv"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use cordon_protocol::conversation::{anthropic, chat};
    use serde_json::{Value, json};

    use super::*;

    fn anthropic_messages(messages: Value) -> Vec<Message> {
        anthropic::decode_request(&json!({"model": "m", "messages": messages}))
            .unwrap()
            .messages
    }

    fn turn() -> Vec<ContentBlock> {
        anthropic_messages(json!([{"role": "assistant", "content": [
            {"type": "text", "text": "Checking.\n\nBoth."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}
        ]}]))
        .remove(0)
        .content
    }

    #[tokio::test]
    async fn only_the_same_credential_and_history_find_the_turn() {
        let continuations = Continuations::new(None);
        let key = Some(Credential("key-a".into()));
        let question = json!({"role": "user", "content": "Weather in Oslo?"});
        let asked = anthropic_messages(json!([question]));
        continuations
            .remember(
                continuations.start(key.as_ref(), &asked).await,
                &turn(),
                "conv_a",
            )
            .await;
        let answer = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "rain"}]});
        let back = anthropic_messages(json!([
            question,
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking. Both."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            answer
        ]));
        assert_eq!(
            continuations.find(key.as_ref(), &back).await.as_deref(),
            Some("conv_a")
        );
        // The same turn sent back in Chat Completions' shape finds it too.
        let chat_back = chat::decode_request(&json!({"model": "m", "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "Checking.\n\nBoth.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rain"}
        ]}))
        .unwrap()
        .messages;
        assert_eq!(
            continuations
                .find(key.as_ref(), &chat_back)
                .await
                .as_deref(),
            Some("conv_a")
        );

        // Another credential, or a history that only shares the call id, finds nothing.
        let other = Some(Credential("key-b".into()));
        assert_eq!(continuations.find(other.as_ref(), &back).await, None);
        assert_eq!(continuations.find(None, &back).await, None);
        let forged = anthropic_messages(json!([
            {"role": "user", "content": "anything"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}]},
            answer
        ]));
        assert_eq!(continuations.find(key.as_ref(), &forged).await, None);
        // Another gateway's keys digest differently.
        assert_eq!(
            Continuations::new(None).find(key.as_ref(), &back).await,
            None
        );
    }

    #[tokio::test]
    async fn a_gateway_on_the_same_store_finds_the_turn_and_the_store_holds_no_credential() {
        let store = std::sync::Arc::new(crate::gateway_store::MemoryGatewayStore::default());
        let first = Continuations::new(Some(store.clone()));
        let key = Some(Credential("sk-secret-key".into()));
        let question = json!({"role": "user", "content": "Weather in Oslo?"});
        let asked = anthropic_messages(json!([question]));
        first
            .remember(first.start(key.as_ref(), &asked).await, &turn(), "conv_a")
            .await;
        let back = anthropic_messages(json!([
            question,
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking. Both."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "rain"}]}
        ]));
        let restarted = Continuations::new(Some(store.clone()));
        assert_eq!(
            restarted.find(key.as_ref(), &back).await.as_deref(),
            Some("conv_a")
        );
        let other = Some(Credential("sk-other-key".into()));
        assert_eq!(restarted.find(other.as_ref(), &back).await, None);
        assert_eq!(store.count(kinds::CONTINUATION), 1);
        assert_eq!(store.count(kinds::KEY), 1);
        let kept = format!("{store:?}");
        assert!(!kept.contains("sk-secret-key"), "{kept}");
    }
}
