//! The server's computer sessions (`/v1/computers`) as the gateway's computers
//! ([`GatewayComputers`]): the gateway's `computer` tool opens, steps and approves them
//! like any HTTP client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cordon_gateway::{ComputerOutcome, Computers};
use cordon_protocol::execution::Decision;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::computer_sessions::ComputerSessions;
use crate::api::{ComputerActions, ComputerStep, CreateComputer, StepStatus};

/// The server's computer sessions (`/v1/computers`) as the gateway's computers.
pub(super) struct GatewayComputers {
    pub(super) sessions: Arc<ComputerSessions>,
    /// The approval each computer's last step waits for (the gate asked), with the action
    /// it is for: an approval of another action does not release it.
    pub(super) asked: Mutex<HashMap<String, (String, Value)>>,
}

impl std::fmt::Debug for GatewayComputers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayComputers").finish_non_exhaustive()
    }
}

impl GatewayComputers {
    fn outcome(&self, id: &str, input: &Value, step: ComputerStep) -> ComputerOutcome {
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.remove(id);
        match step.status {
            StepStatus::ApprovalRequired => {
                let Some(pending) = step.pending_approval else {
                    return ComputerOutcome::Done {
                        screenshot: None,
                        text: Some("the step waits for an approval that has no id".into()),
                        is_error: true,
                    };
                };
                let reason = format!(
                    "{} ({}{})",
                    pending.reason,
                    pending.action,
                    pending
                        .element
                        .map(|e| format!(" on {e}"))
                        .unwrap_or_default()
                );
                asked.insert(id.to_owned(), (pending.approval_id, input.clone()));
                ComputerOutcome::NeedsApproval { reason }
            }
            status => ComputerOutcome::Done {
                screenshot: step.screenshot.map(|s| (s.media_type, s.data)),
                text: step.error.or(step.text),
                is_error: status != StepStatus::Ok,
            },
        }
    }
}

impl Computers for GatewayComputers {
    fn open<'a>(
        &'a self,
        url: &'a str,
        display: Option<(u64, u64)>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            // The client named this page: its origin is allowed, as a client creating the
            // session with `POST /v1/computers` could allow it. Other origins keep the
            // default policy.
            let origin = url
                .split_once("://")
                .map(|(scheme, rest)| {
                    format!(
                        "{scheme}://{}",
                        rest.split(['/', '?', '#']).next().unwrap_or(rest)
                    )
                })
                .unwrap_or_default();
            let mut body = json!({"url": url, "allow_origins": [origin]});
            if let Some((width, height)) = display {
                body["display"] = json!({"width": width, "height": height});
            }
            let body: CreateComputer = serde_json::from_value(body).map_err(|e| e.to_string())?;
            self.sessions
                .create(body)
                .await
                .map(|created| created.id)
                .map_err(|e| e.message)
        })
    }

    fn current_url<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move { self.sessions.info(id).await.ok()?.current_url })
    }

    fn exists<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.sessions
                .info(id)
                .await
                .is_ok_and(|info| serde_json::to_value(&info).is_ok_and(|v| v["state"] == "live"))
        })
    }

    fn interrupted_by_restart<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.sessions.info(id).await.is_ok_and(|info| {
                serde_json::to_value(&info).is_ok_and(|v| {
                    v["state"] != "live" && v["reason"] == crate::store::COMPUTER_RESTART_REASON
                })
            })
        })
    }

    fn act<'a>(
        &'a self,
        id: &'a str,
        input: &'a Value,
        approved: bool,
    ) -> BoxFuture<'a, Result<ComputerOutcome, String>> {
        Box::pin(async move {
            let asked = self
                .asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(id)
                .cloned();
            let step = match (approved, asked) {
                (true, Some((_, action))) if action != *input => {
                    return Err(
                        "this computer's pending approval is for another action; the model must \
                         ask again"
                            .to_owned(),
                    );
                }
                (true, Some((approval, _))) => {
                    match self.sessions.decide(&approval, Decision::Approve).await {
                        Some(Ok((_, step))) => step,
                        Some(Err(e)) => return Err(e.message),
                        None => return Err(format!("approval {approval} is no longer pending")),
                    }
                }
                _ => {
                    // Cordon's own vocabulary (`{"kind": "navigate", …}`) for what Anthropic's
                    // computer tool cannot say (a browser toolset's `navigate`).
                    // A Gemini function call (`{"name", "args"}`): Gemini's computer use.
                    let format = if input.get("kind").is_some() {
                        "native"
                    } else if input.get("name").is_some() && input.get("args").is_some() {
                        "gemini"
                    } else {
                        "anthropic"
                    };
                    let body: ComputerActions =
                        serde_json::from_value(json!({"format": format, "actions": [input]}))
                            .map_err(|e| e.to_string())?;
                    self.sessions.act(id, body).await.map_err(|e| e.message)?
                }
            };
            Ok(self.outcome(id, input, step))
        })
    }
}
