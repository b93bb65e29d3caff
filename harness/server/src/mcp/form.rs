//! A form put to the MCP client's user (a form elicitation), and the form as they
//! accepted it: how `ask` approvals and `user_ask` questions reach a human.

use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

/// Longest the user may take to answer a form (an approval or a question).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Puts `message` with the form `schema` to the client's user: the form's content when
/// they accepted it (`null` when they accepted with none); `None` when they declined,
/// cancelled or took longer than [`ANSWER_TIMEOUT`], or the request failed.
pub(super) async fn accepted_form(
    peer: &Peer<RoleServer>,
    message: String,
    schema: ElicitationSchema,
) -> Option<Value> {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    match peer
        .create_elicitation_with_timeout(params, Some(ANSWER_TIMEOUT))
        .await
    {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            Some(answer.content.unwrap_or(Value::Null))
        }
        _ => None,
    }
}
