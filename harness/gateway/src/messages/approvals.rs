//! Approvals: the `cordon_approval` blocks of a client request, checked against the calls
//! the server asked about, then applied (approved calls run, denied ones fail).

use std::collections::HashMap;

use cordon_protocol::conversation::{
    ContentBlock, Extra, Message, Request, Role, ToolCall, ToolResult, ToolResultContent,
};
use serde_json::json;

use super::failure::{Fail, bad_request, fail};
use super::request_state::RequestState;
use crate::call_ids::scoped;
use crate::record::Entry;
use crate::tool_calls::{denied_result, error_result};

/// Marks a placeholder tool result standing for a `cordon_approval` block.
pub(super) const APPROVAL_MARK: &str = "cordon_approval";

/// A client decision on an `ask` call.
#[derive(Debug, Clone)]
pub(super) struct Approval {
    call_id: String,
    granted: bool,
    reason: Option<String>,
}

/// Replaces each `cordon_approval` block of the last user message by a placeholder tool
/// result (so pairing can be checked) and returns the decisions.
pub(super) fn take_approvals(request: &mut Request) -> Result<Vec<Approval>, Fail> {
    let mut approvals = Vec::new();
    let Some(last) = request.messages.last_mut() else {
        return Ok(approvals);
    };
    if last.role != Role::User {
        return Ok(approvals);
    }
    for block in &mut last.content {
        let ContentBlock::Opaque { data, .. } = block else {
            continue;
        };
        if data["type"] != APPROVAL_MARK {
            continue;
        }
        let call_id = data["tool_use_id"]
            .as_str()
            .ok_or_else(|| bad_request("a `cordon_approval` block needs `tool_use_id`"))?
            .to_owned();
        let granted = data["granted"].as_bool().ok_or_else(|| {
            bad_request("a `cordon_approval` block needs `granted` (true or false)")
        })?;
        let reason = data["reason"].as_str().map(str::to_owned);
        let mut extra = Extra::new();
        extra.insert(APPROVAL_MARK.into(), json!(granted));
        *block = ContentBlock::ToolResult(ToolResult {
            call_id: call_id.clone(),
            content: ToolResultContent::Text(String::new()),
            is_error: false,
            extra,
        });
        approvals.push(Approval {
            call_id,
            granted,
            reason,
        });
    }
    Ok(approvals)
}

impl RequestState<'_> {
    pub(super) async fn apply_approvals(
        &mut self,
        approvals: &[Approval],
        request: &Request,
        view: &mut [Message],
    ) -> Result<(), Fail> {
        if approvals.is_empty() {
            return Ok(());
        }
        let calls: HashMap<&str, &ToolCall> = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| {
                m.content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall(c) => Some((c.id.as_str(), c)),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Every decision is checked before any runs: a request with one bad decision
        // applies none of them.
        for approval in approvals {
            let id = approval.call_id.as_str();
            let Some(call) = calls.get(id) else {
                return Err(bad_request(format!(
                    "cordon_approval for `{id}`: no such tool call in the previous assistant turn"
                )));
            };
            let asked = self
                .gw
                .asks
                .find(&scoped(&self.conversation, id))
                .await
                .map_err(|e| fail(503, "api_error", e.to_string()))?;
            let Some(asked) = asked else {
                return Err(bad_request(format!(
                    "cordon_approval for `{id}`: this server asked no approval for that call in \
                     this conversation, or it was already answered; only calls the server handed \
                     back for approval (stop_reason tool_use, an `ask` tool or a computer gate) \
                     take one, with the conversation sent back as it was received"
                )));
            };
            if asked.name != call.name || asked.input != call.input {
                return Err(bad_request(format!(
                    "cordon_approval for `{id}`: the call in the previous assistant turn is not \
                     the one the model made (name or input changed); send the turn back as it \
                     was received"
                )));
            }
        }
        for approval in approvals {
            let id = approval.call_id.as_str();
            // Taken out first: two requests racing with one approval run it once.
            let asked = self
                .gw
                .asks
                .take(&scoped(&self.conversation, id))
                .await
                .map_err(|e| fail(503, "api_error", e.to_string()))?;
            let Some(asked) = asked else {
                return Err(fail(
                    409,
                    "invalid_request_error",
                    format!("cordon_approval for `{id}`: another request answered it first"),
                ));
            };
            let call = ToolCall {
                id: id.to_owned(),
                name: asked.name,
                input: asked.input,
                caller: None,
                extra: Extra::new(),
            };
            self.record(
                Entry::new(
                    "approval",
                    json!({"granted": approval.granted, "reason": approval.reason, "name": call.name}),
                )
                .call(&call.id),
            );
            let result = if !approval.granted {
                denied_result(&call.id, approval.reason.as_deref())
            } else if asked.computer {
                match self.run_computer(&call, true).await {
                    Ok(result) => result,
                    Err(reason) => error_result(&call.id, reason),
                }
            } else {
                self.run_operator(&call, true).await
            };
            replace_result(view, result);
        }
        Ok(())
    }
}

fn replace_result(view: &mut [Message], result: ToolResult) {
    for message in view.iter_mut().rev() {
        for block in &mut message.content {
            if let ContentBlock::ToolResult(r) = block
                && r.call_id == result.call_id
                && r.extra.contains_key(APPROVAL_MARK)
            {
                *r = result;
                return;
            }
        }
    }
}
