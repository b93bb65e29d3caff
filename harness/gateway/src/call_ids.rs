//! Call ids as the gateway's keys.
//!
//! Results, approvals and what the gateway keeps between requests are all found by call
//! id, so an id must name one call: a model turn reusing one is refused before any of its
//! calls runs, and what is kept is kept per conversation, so knowing another
//! conversation's call id reaches nothing of it.

use cordon_protocol::conversation::{Message, Turn, validate_turn_ids};

use crate::UpstreamError;

/// Refuses a model turn whose call ids repeat within it or reuse one of the conversation
/// before it (`history`): an upstream protocol error. Nothing of the turn has run.
pub(crate) fn check_turn(history: &[Message], turn: &Turn) -> Result<(), UpstreamError> {
    validate_turn_ids(history, &turn.content).map_err(|e| {
        UpstreamError::InvalidAnswer(format!(
            "the model's turn breaks the tool-call protocol ({e}); none of its calls was run"
        ))
    })
}

/// The key of call `id` of `conversation` in what the gateway keeps between requests.
pub(crate) fn scoped(conversation: &str, id: &str) -> String {
    // Conversation ids are `conv_` and hex: the first `/` ends them.
    format!("{conversation}/{id}")
}
