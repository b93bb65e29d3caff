//! Tool-call pairing and call-id uniqueness, checked before anything runs.
//!
//! Every vendor pairs a result with its call by id, and the gateway keys what it keeps
//! between requests (approvals asked, calls that ran inline) by call id too. So an id names
//! one call in the whole conversation: two calls sharing one would let a single answer or
//! approval stand for either of them.

use std::collections::HashSet;

use super::{ContentBlock, Message, PairingError, Request, Role};

/// Check that every tool call of the conversation has an id of its own, that every tool
/// result answers a call of the assistant message just before it, once, and that every
/// call of an assistant message followed by a user message is answered there. The last
/// assistant message's calls may be unanswered only when it ends the conversation (the
/// model's own turn is being continued).
pub fn validate_pairing(request: &Request) -> Result<(), PairingError> {
    let mut seen = HashSet::new();
    for message in &request.messages {
        unique_calls(&message.content, &mut seen)?;
    }
    let mut pending: Vec<&str> = Vec::new();
    for message in &request.messages {
        match message.role {
            Role::Assistant => {
                if let Some(id) = pending.first() {
                    return Err(PairingError::MissingResult {
                        id: (*id).to_owned(),
                    });
                }
                pending = message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some(c.id.as_str()),
                        _ => None,
                    })
                    .collect();
            }
            Role::User => {
                let mut answered = HashSet::new();
                for block in &message.content {
                    if let ContentBlock::ToolResult(r) = block {
                        if !pending.contains(&r.call_id.as_str()) {
                            return Err(PairingError::UnknownCall {
                                id: r.call_id.clone(),
                            });
                        }
                        if !answered.insert(r.call_id.as_str()) {
                            return Err(PairingError::DuplicateResult {
                                id: r.call_id.clone(),
                            });
                        }
                    }
                }
                if let Some(id) = pending.iter().find(|id| !answered.contains(*id)) {
                    return Err(PairingError::MissingResult {
                        id: (*id).to_owned(),
                    });
                }
                pending.clear();
            }
        }
    }
    Ok(())
}

/// Check a model's new turn before any of its calls runs: each call id used once in the
/// turn, and by no call of the conversation before it (`history`).
pub fn validate_turn_ids(history: &[Message], turn: &[ContentBlock]) -> Result<(), PairingError> {
    let mut seen = HashSet::new();
    for message in history {
        // The history was checked when it came in (or is the gateway's own view of it):
        // only the turn's ids are new.
        seen.extend(call_ids(&message.content));
    }
    unique_calls(turn, &mut seen)
}

/// Adds the call ids of `blocks` to `seen`, refusing one already there.
fn unique_calls<'a>(
    blocks: &'a [ContentBlock],
    seen: &mut HashSet<&'a str>,
) -> Result<(), PairingError> {
    for id in call_ids(blocks) {
        if !seen.insert(id) {
            return Err(PairingError::DuplicateCall { id: id.to_owned() });
        }
    }
    Ok(())
}

/// The ids of the calls in `blocks`: client and function calls, and server-tool calls,
/// whose results pair with them by id as well.
fn call_ids(blocks: &[ContentBlock]) -> impl Iterator<Item = &str> {
    blocks.iter().filter_map(|b| match b {
        ContentBlock::ToolCall(c) => Some(c.id.as_str()),
        ContentBlock::ServerToolCall { id, .. } => Some(id.as_str()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use serde_json::{Value, json};

    use super::*;
    use crate::conversation::{Vendor, anthropic, chat};

    fn transfer(id: &str, to: &str, amount: u64) -> Value {
        json!({"type": "tool_use", "id": id, "name": "transfer", "input": {"to": to, "amount": amount}})
    }

    fn answer(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "done"})
    }

    fn anthropic_request(messages: Value) -> Request {
        anthropic::decode_request(&json!({"model": "m", "messages": messages})).unwrap()
    }

    fn duplicate(id: &str) -> Result<(), PairingError> {
        Err(PairingError::DuplicateCall { id: id.into() })
    }

    #[test]
    fn two_calls_sharing_an_id_in_one_turn_are_refused_though_one_result_answers_both() {
        let request = anthropic_request(json!([
            {"role": "user", "content": "pay alice"},
            {"role": "assistant", "content": [transfer("toolu_x", "alice", 1), transfer("toolu_x", "mallory", 1_000_000)]},
            {"role": "user", "content": [answer("toolu_x")]}
        ]));
        assert_eq!(validate_pairing(&request), duplicate("toolu_x"));
        let error = validate_pairing(&request)
            .unwrap_err()
            .to_vendor(Vendor::Anthropic);
        assert_eq!(error.status, 400);
        let message = error.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`toolu_x` is used by more than one tool call"),
            "{message}"
        );

        // The same in Chat Completions: two `tool_calls` with one id, one `tool` message.
        let call = |to: &str| {
            json!({"id": "call_x", "type": "function",
                   "function": {"name": "transfer", "arguments": json!({"to": to}).to_string()}})
        };
        let request = chat::decode_request(&json!({"model": "m", "messages": [
            {"role": "user", "content": "pay alice"},
            {"role": "assistant", "content": null, "tool_calls": [call("alice"), call("mallory")]},
            {"role": "tool", "tool_call_id": "call_x", "content": "done"}
        ]}))
        .unwrap();
        assert_eq!(validate_pairing(&request), duplicate("call_x"));
    }

    #[test]
    fn an_id_reused_by_a_later_turn_or_a_server_tool_is_refused() {
        let request = anthropic_request(json!([
            {"role": "user", "content": "pay alice"},
            {"role": "assistant", "content": [transfer("toolu_1", "alice", 1)]},
            {"role": "user", "content": [answer("toolu_1")]},
            {"role": "assistant", "content": [transfer("toolu_1", "mallory", 1_000_000)]},
            {"role": "user", "content": [answer("toolu_1")]}
        ]));
        assert_eq!(validate_pairing(&request), duplicate("toolu_1"));
        let request = anthropic_request(json!([
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "code_execution", "input": {"code": "1"}},
                transfer("srvtoolu_1", "mallory", 1)
            ]},
            {"role": "user", "content": [answer("srvtoolu_1")]}
        ]));
        assert_eq!(validate_pairing(&request), duplicate("srvtoolu_1"));
        // Distinct ids across turns are fine.
        let request = anthropic_request(json!([
            {"role": "user", "content": "pay alice"},
            {"role": "assistant", "content": [transfer("toolu_1", "alice", 1)]},
            {"role": "user", "content": [answer("toolu_1")]},
            {"role": "assistant", "content": [transfer("toolu_2", "bob", 2)]},
            {"role": "user", "content": [answer("toolu_2")]}
        ]));
        assert_eq!(validate_pairing(&request), Ok(()));
    }

    #[test]
    fn a_new_turn_needs_ids_unused_in_it_and_in_the_conversation() {
        let history = anthropic_request(json!([
            {"role": "user", "content": "pay alice"},
            {"role": "assistant", "content": [transfer("toolu_1", "alice", 1)]},
            {"role": "user", "content": [answer("toolu_1")]}
        ]))
        .messages;
        let turn = |calls: Value| {
            anthropic_request(json!([{"role": "assistant", "content": calls}]))
                .messages
                .remove(0)
                .content
        };
        let twice = turn(json!([
            transfer("toolu_2", "alice", 1),
            transfer("toolu_2", "mallory", 9)
        ]));
        assert_eq!(validate_turn_ids(&history, &twice), duplicate("toolu_2"));
        let reused = turn(json!([transfer("toolu_1", "mallory", 9)]));
        assert_eq!(validate_turn_ids(&history, &reused), duplicate("toolu_1"));
        let fresh = turn(json!([
            transfer("toolu_2", "alice", 1),
            transfer("toolu_3", "bob", 2)
        ]));
        assert_eq!(validate_turn_ids(&history, &fresh), Ok(()));
    }
}
