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
//! The digest is keyed with per-process random keys and kept in memory only: nothing
//! derived from a credential reaches the store, and after a restart a continuation starts
//! a new record (the header still joins).

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher, Hash, Hasher};

use cordon_protocol::conversation::{ContentBlock, Message, Role};

use cordon_core::ids::fresh_id;

use crate::bounded_map::BoundedMap;
use crate::messages::MessagesCall;
use crate::record::Recorder;
use crate::upstream::Credential;

/// Turns remembered at most (the oldest half forgotten past it: their continuations start
/// new records).
const CONTINUATIONS_MAX: usize = 10_000;

/// Turns handed back with tool calls, by the digest of what continues them.
#[derive(Debug)]
pub(crate) struct Continuations {
    keys: (RandomState, RandomState),
    conversations: BoundedMap<String>,
}

impl Default for Continuations {
    fn default() -> Self {
        Continuations {
            keys: (RandomState::new(), RandomState::new()),
            conversations: BoundedMap::new(CONTINUATIONS_MAX),
        }
    }
}

impl Continuations {
    /// A digest of `credential` and `messages`, still open for the turn that answers them.
    pub(crate) fn start(&self, credential: Option<&Credential>, messages: &[Message]) -> Digest {
        let mut digest = Digest {
            hashers: (self.keys.0.build_hasher(), self.keys.1.build_hasher()),
            run: None,
            text: String::new(),
        };
        digest.put(|h| credential.map(|c| c.0.as_str()).hash(h));
        for message in messages {
            digest.message(message.role, &message.content);
        }
        digest
    }

    /// Remembers that the turn `content` (as the client received it), answering the
    /// history in `digest`, belongs to `conversation` — when it holds calls to answer.
    pub(crate) fn remember(
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
        self.conversations
            .insert(&digest.finish(), conversation.to_owned());
    }

    /// The conversation whose handed-back turn `messages` continue: the same credential,
    /// and the same history up to and including the last assistant message.
    fn find(&self, credential: Option<&Credential>, messages: &[Message]) -> Option<String> {
        let end = messages.iter().rposition(|m| m.role == Role::Assistant)?;
        self.conversations
            .get(&self.start(credential, &messages[..=end]).finish())
    }
}

/// A keyed 128-bit digest of a conversation's outline, fed message by message.
///
/// The outline is what survives a client's round trip through its SDK and the vendor
/// shapes: per run of same-role messages (vendors split and merge messages differently),
/// the ids and names of tool calls and the ids and text of results in order, then all text
/// with its whitespace left out (block boundaries and joins differ between shapes). Inputs,
/// images, reasoning and vendor-only blocks are left out: the approval check compares
/// inputs itself.
#[derive(Debug, Clone)]
pub(crate) struct Digest {
    hashers: (DefaultHasher, DefaultHasher),
    /// The role of the run being fed.
    run: Option<Role>,
    /// Its text so far, without whitespace.
    text: String,
}

impl Digest {
    fn put(&mut self, feed: impl Fn(&mut DefaultHasher)) {
        feed(&mut self.hashers.0);
        feed(&mut self.hashers.1);
    }

    fn message(&mut self, role: Role, blocks: &[ContentBlock]) {
        if self.run != Some(role) {
            self.end_run();
            self.run = Some(role);
            self.put(|h| (role == Role::User).hash(h));
        }
        for block in blocks {
            match block {
                ContentBlock::Text { text, .. } => self.text.extend(no_space(text)),
                ContentBlock::ToolCall(call) => {
                    self.put(|h| ("call", &call.id, &call.name).hash(h))
                }
                ContentBlock::ToolResult(result) => {
                    let text: String = no_space(&result.content.text()).collect();
                    self.put(|h| ("result", &result.call_id, &text).hash(h));
                }
                _ => {}
            }
        }
    }

    fn end_run(&mut self) {
        if self.run.is_some() {
            let text = std::mem::take(&mut self.text);
            self.put(|h| ("text", &text).hash(h));
        }
    }

    fn finish(mut self) -> String {
        self.end_run();
        format!(
            "{:016x}{:016x}",
            self.hashers.0.finish(),
            self.hashers.1.finish()
        )
    }
}

fn no_space(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter(|c| !c.is_whitespace())
}

/// The conversation a request belongs to: the one it names (if this server began it: a
/// client cannot write into a conversation it made up), the one whose handed-back turn it
/// continues ([`Continuations`]), or a new one. `messages` is the request decoded (`None`
/// when it could not be); `recorder` knows the conversations this server began.
pub(crate) fn conversation_of(
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
    messages
        .and_then(|m| continuations.find(call.credential.as_ref(), m))
        .unwrap_or_else(|| fresh_id("conv"))
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

    #[test]
    fn only_the_same_credential_and_history_find_the_turn() {
        let continuations = Continuations::default();
        let key = Some(Credential("key-a".into()));
        let question = json!({"role": "user", "content": "Weather in Oslo?"});
        let asked = anthropic_messages(json!([question]));
        continuations.remember(continuations.start(key.as_ref(), &asked), &turn(), "conv_a");
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
            continuations.find(key.as_ref(), &back).as_deref(),
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
            continuations.find(key.as_ref(), &chat_back).as_deref(),
            Some("conv_a")
        );

        // Another credential, or a history that only shares the call id, finds nothing.
        let other = Some(Credential("key-b".into()));
        assert_eq!(continuations.find(other.as_ref(), &back), None);
        assert_eq!(continuations.find(None, &back), None);
        let forged = anthropic_messages(json!([
            {"role": "user", "content": "anything"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}]},
            answer
        ]));
        assert_eq!(continuations.find(key.as_ref(), &forged), None);
        // Another gateway's keys digest differently.
        assert_eq!(Continuations::default().find(key.as_ref(), &back), None);
    }
}
