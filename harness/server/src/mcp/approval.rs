//! Approvals under `cordon mcp`: a call to an `ask` tool, or a computer step an `ask` rule
//! holds, becomes a form elicitation to the client's user; refused when nobody can be asked.

use std::sync::atomic::{AtomicBool, Ordering};

use cordon_core::broker::ApprovalRequest;
use cordon_protocol::execution::Decision;
use rmcp::model::ElicitationSchema;
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::form::accepted_form;

/// Decides `ask` calls by asking the MCP client's user (elicitation), or refuses them
/// when the client cannot ask.
pub(super) struct ElicitingApprover {
    pub(super) peer: Peer<RoleServer>,
    pub(super) elicitation: bool,
    pub(super) refused_unasked: AtomicBool,
}

impl std::fmt::Debug for ElicitingApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitingApprover")
            .field("elicitation", &self.elicitation)
            .finish_non_exhaustive()
    }
}

impl ElicitingApprover {
    pub(super) async fn ask(&self, request: &ApprovalRequest) -> Decision {
        {
            if !self.elicitation {
                self.refused_unasked.store(true, Ordering::SeqCst);
                return Decision::Deny;
            }
            let mut input = request.input.to_string();
            if input.len() > 2000 {
                let cut = input
                    .char_indices()
                    .nth(2000)
                    .map_or(input.len(), |(at, _)| at);
                input.truncate(cut);
                input.push('…');
            }
            let message = format!(
                "Code running in Cordon's sandbox wants to call `{}` ({}).\nInput: {input}\n\
                 Accept to allow this call; decline to refuse it.",
                request.tool, request.reason
            );
            elicit(&self.peer, message).await
        }
    }
}

/// Asks the client's user to approve (a form elicitation with one `approve` field).
/// Declined, cancelled, timed out or failed: deny wins when nobody said yes.
pub(super) async fn elicit(peer: &Peer<RoleServer>, message: String) -> Decision {
    let schema = ElicitationSchema::builder()
        .bool_property("approve", |schema| {
            schema
                .description("Allow this (accepting with no value allows it too)")
                .with_default(true)
        })
        .build();
    let Ok(schema) = schema else {
        return Decision::Deny;
    };
    let Some(content) = accepted_form(peer, message, schema).await else {
        return Decision::Deny;
    };
    let refused = content.get("approve").and_then(Value::as_bool) == Some(false);
    if refused {
        Decision::Deny
    } else {
        Decision::Approve
    }
}
