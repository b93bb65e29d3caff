//! Tool-call pairing, checked before anything runs.

use std::collections::HashSet;

use super::{ContentBlock, PairingError, Request, Role};

/// Check that every tool result answers a call of the assistant message just before it,
/// once, and that every call of an assistant message followed by a user message is
/// answered there. The last assistant message's calls may be unanswered only when it ends
/// the conversation (the model's own turn is being continued).
pub fn validate_pairing(request: &Request) -> Result<(), PairingError> {
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
