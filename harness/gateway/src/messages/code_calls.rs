//! Code calls of this front door: a program run for the model's call and shown to the
//! client as a server tool, and a suspended program resumed with the client's results.

use std::sync::Arc;
use std::time::Instant;

use cordon_protocol::conversation::{
    ContentBlock, Extra, Message, PROGRAM_TOOL, Request, Role, StopReason, ToolCall, ToolResult,
    ToolResultContent, Turn,
};
use cordon_protocol::execution::ClientToolResult;
use serde_json::{Value, json};

use super::failure::{Fail, bad_request, container_failure};
use super::request_state::RequestState;
use crate::code_output::client_result;
use crate::containers::{self, Container, Outcome};
use crate::record::Entry;
use crate::tool_calls::{
    NO_CODE, ProgramRefused, code_of, error_result, program_result, push_user, run_program,
};

impl RequestState<'_> {
    /// Resumes the container's suspended program with the results in the last user
    /// message. Returns the reply when the program suspends again.
    pub(super) async fn resume_program(
        &mut self,
        request: &Request,
        view: &mut Vec<Message>,
    ) -> Result<Option<Turn>, Fail> {
        // The container is named by the request, or found by the program it holds: a
        // Responses client continuing with `previous_response_id` names none.
        let container = match self.container.clone() {
            Some(container) => container,
            None => match self.container_waiting_in(request).await? {
                Some(container) => {
                    self.container = Some(container.clone());
                    container
                }
                None => return Ok(None),
            },
        };
        let mut slot = container.running.lock().await;
        let Some(running) = slot.take() else {
            return Ok(None);
        };
        let Some(last) = request.messages.last().filter(|m| m.role == Role::User) else {
            *slot = Some(running);
            return Ok(None);
        };
        let mut results = Vec::new();
        for block in &last.content {
            if let ContentBlock::ToolResult(r) = block
                && running.pending.contains(&r.call_id)
            {
                results.push(ClientToolResult {
                    call_id: r.call_id.clone(),
                    output: program_value(&r.content),
                    is_error: r.is_error,
                });
            }
        }
        if results.len() < running.pending.len() {
            // The program resumes only with every result it waits for (a part would leave it
            // waiting, and this request with it); nothing is applied and it stays suspended.
            let missing: Vec<&str> = running
                .pending
                .iter()
                .filter(|id| !results.iter().any(|r| &r.call_id == *id))
                .map(String::as_str)
                .collect();
            let message = if results.is_empty() {
                format!(
                    "container `{}` has a program waiting for tool results ({}); answer them \
                     with tool_result blocks",
                    container.id,
                    missing.join(", ")
                )
            } else {
                format!(
                    "container `{}`: the program waits for every call it made; tool results are \
                     missing for {}",
                    container.id,
                    missing.join(", ")
                )
            };
            *slot = Some(running);
            return Err(bad_request(message));
        }
        let server_id = running.server_id.clone();
        let kind = running.kind.clone();
        let started = Instant::now();
        let (outcome, still) = containers::resume(running, results)
            .await
            .map_err(|e| bad_request(format!("tool results for the program: {e}")))?;
        *slot = still;
        drop(slot);
        match outcome {
            Outcome::Suspended(calls) => {
                let content = self.program_blocks(&calls, &server_id, &kind);
                Ok(Some(self.reply_turn(content, StopReason::ToolUse, None)))
            }
            Outcome::Done(result) => {
                self.record(
                    Entry::new(
                        "tool_result",
                        json!({"runs": "code_execution", "result": result}),
                    )
                    .call(&server_id)
                    .took(started),
                );
                self.shown.push(ContentBlock::ServerToolResult {
                    kind: result_block(&kind).into(),
                    tool_use_id: server_id.clone(),
                    content: client_result(&result),
                    extra: Extra::new(),
                });
                push_user(
                    view,
                    vec![ContentBlock::ToolResult(program_result(
                        &server_id, &result,
                    ))],
                );
                Ok(None)
            }
        }
    }

    /// Runs a code call. Returns the model's result (when the program ended), the blocks
    /// shown to the client, and whether the program waits for the client.
    pub(super) async fn run_code(
        &mut self,
        call: &ToolCall,
    ) -> (Option<ToolResult>, Vec<ContentBlock>, bool) {
        let Some(code_execution) = &self.code_execution else {
            return (None, Vec::new(), false);
        };
        let kind = code_execution.kind.clone();
        let language = code_execution.language;
        let tools = code_execution.tools.clone();
        let server_call = ContentBlock::ServerToolCall {
            id: call.id.clone(),
            name: code_execution.name.clone(),
            input: call.input.clone(),
            extra: Extra::new(),
        };
        let result_kind = result_block(&kind);
        let refused = |code: &str, text: String| {
            let shown = vec![
                server_call.clone(),
                ContentBlock::ServerToolResult {
                    kind: result_kind.into(),
                    tool_use_id: call.id.clone(),
                    content: json!({"type": "code_execution_tool_result_error", "error_code": code}),
                    extra: Extra::new(),
                },
            ];
            (Some(error_result(&call.id, text)), shown, false)
        };
        let Some(code) = code_of(call) else {
            return refused("invalid_tool_input", NO_CODE.into());
        };
        let container = match &self.container {
            Some(c) if c.language != language => {
                return refused(
                    "invalid_tool_input",
                    format!(
                        "container `{}` runs {:?} programs, not {language:?}; start a new one",
                        c.id, c.language
                    ),
                );
            }
            Some(c) => c.clone(),
            None => match self.gw.containers.create_for(language).await {
                Ok(c) => {
                    self.container = Some(c.clone());
                    c
                }
                Err(e) => return refused("unavailable", e.to_string()),
            },
        };
        let outcome = match run_program(&container, code, tools, &call.id, &kind).await {
            Ok(outcome) => outcome,
            Err(refusal @ ProgramRefused::Busy) => {
                return refused("too_many_requests", refusal.message());
            }
            Err(refusal @ ProgramRefused::Lost(_)) => {
                return refused("unavailable", refusal.message());
            }
        };
        match outcome {
            Outcome::Suspended(calls) => {
                let mut shown = vec![server_call];
                shown.extend(self.program_blocks(&calls, &call.id, &kind));
                (None, shown, true)
            }
            Outcome::Done(result) => {
                let shown = vec![
                    server_call,
                    ContentBlock::ServerToolResult {
                        kind: result_kind.into(),
                        tool_use_id: call.id.clone(),
                        content: client_result(&result),
                        extra: Extra::new(),
                    },
                ];
                (Some(program_result(&call.id, &result)), shown, false)
            }
        }
    }
}

/// The block type of a code call's result shown to the client: Anthropic's
/// `code_execution_tool_result`, or `program_output` for a JavaScript program of
/// `programmatic_tool_calling` (the Responses API shows it as a `program_output` item).
fn result_block(kind: &str) -> &'static str {
    if kind == PROGRAM_TOOL {
        "program_output"
    } else {
        "code_execution_tool_result"
    }
}

impl RequestState<'_> {
    /// The container holding a program suspended on the client's calls in `request`'s
    /// history: the code call shown last (its `srvtoolu_…` id is the program's). A program
    /// that waited in a process that stopped is refused as interrupted.
    async fn container_waiting_in(
        &self,
        request: &Request,
    ) -> Result<Option<Arc<Container>>, Fail> {
        let Some(last) = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
        else {
            return Ok(None);
        };
        for block in last.content.iter().rev() {
            if let ContentBlock::ServerToolCall { id, .. } = block
                && let Some(container) = self
                    .gw
                    .containers
                    .suspended_on(id)
                    .await
                    .map_err(|e| container_failure(&e))?
            {
                return Ok(Some(container));
            }
        }
        Ok(None)
    }
}

/// What a program receives for a client's tool result: a JSON object or array parsed,
/// anything else as text.
fn program_value(content: &ToolResultContent) -> Value {
    let text = content.text();
    match serde_json::from_str::<Value>(&text) {
        Ok(value @ (Value::Object(_) | Value::Array(_))) => value,
        _ => Value::String(text),
    }
}
