//! The server-tool calls of one model turn: operator tools run inline or asked about,
//! computer actions, code; what the client must act on goes back in the turn, what ran
//! inline is set aside for the model's view.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use cordon_core::ids::fresh_id;
use cordon_protocol::conversation::{
    ContentBlock, Extra, ImageSource, ToolCall, ToolResult, ToolResultContent, Turn,
};
use cordon_protocol::tool::Policy;
use serde_json::json;

use super::failure::{Fail, fail};
use super::gemini_computer::GeminiComputer;
use super::request_state::{RequestState, result_json};
use crate::asked_calls::Asked;
use crate::call_ids::scoped;
use crate::computer::ComputerOutcome;
use crate::record::Entry;
use crate::set_aside::Aside;
use crate::tool_calls::{CallTarget, call_operator, error_result};

/// What one model turn's calls lead to.
pub(super) enum Step {
    /// The client must act: the response content.
    Client(Vec<ContentBlock>),
    /// Everything ran: the assistant content and the results for the next round.
    Continue(Vec<ContentBlock>, Vec<ContentBlock>),
}

impl RequestState<'_> {
    /// Runs the server-tool calls of one model turn.
    pub(super) async fn run_calls(
        &mut self,
        turn: &mut Turn,
        calls: Vec<ToolCall>,
    ) -> Result<Step, Fail> {
        // Code calls (and searches shown to the client) get `srvtoolu_` ids, in the model's
        // view and the client's alike.
        let mut renamed: HashMap<String, String> = HashMap::new();
        for call in &calls {
            let shown_search =
                self.kind_of(call) == CallTarget::ToolSearch && self.shows_searches();
            if matches!(self.kind_of(call), CallTarget::Code) || shown_search {
                renamed.insert(call.id.clone(), fresh_id("srvtoolu"));
            }
        }
        for block in &mut turn.content {
            if let ContentBlock::ToolCall(c) = block
                && let Some(new) = renamed.get(&c.id)
            {
                c.id = new.clone();
            }
        }
        let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();

        let mut results: HashMap<String, ToolResult> = HashMap::new();
        let mut to_client: HashSet<String> = HashSet::new();
        let mut inline: HashSet<String> = HashSet::new();
        let mut code_shown: HashMap<String, Vec<ContentBlock>> = HashMap::new();
        let mut suspended = false;
        for call in &calls {
            let kind = self.kind_of(call);
            let runs = match kind {
                CallTarget::Code => "code_execution",
                CallTarget::Computer => "computer",
                CallTarget::ToolSearch => "tool_search",
                CallTarget::Operator => "server",
                CallTarget::Client | CallTarget::Undeclared => "client",
            };
            self.record(
                Entry::new(
                    "tool_call",
                    json!({"name": call.name, "input": call.input, "runs": runs}),
                )
                .call(&call.id),
            );
            let started = Instant::now();
            match kind {
                CallTarget::Client | CallTarget::Undeclared => {
                    to_client.insert(call.id.clone());
                }
                CallTarget::Operator => {
                    let Some(operator) = self.gw.operator.as_ref() else {
                        continue;
                    };
                    let Some(tool) = operator.registry().get(&call.name) else {
                        continue;
                    };
                    if let Err(failure) = tool.validate_input(&call.input) {
                        results.insert(
                            call.id.clone(),
                            error_result(&call.id, format!("invalid input: {}", failure.message)),
                        );
                        inline.insert(call.id.clone());
                    } else if tool.declaration.policy == Policy::Ask {
                        self.ask_client(call, format!("`{}` has policy ask", call.name), false)
                            .await?;
                        to_client.insert(call.id.clone());
                        continue;
                    } else {
                        results.insert(call.id.clone(), self.run_operator(call, false).await);
                        inline.insert(call.id.clone());
                    }
                }
                CallTarget::Computer => match self.run_computer(call, false).await {
                    Ok(result) => {
                        results.insert(call.id.clone(), result);
                        inline.insert(call.id.clone());
                    }
                    Err(reason) => {
                        self.ask_client(call, reason, true).await?;
                        to_client.insert(call.id.clone());
                        continue;
                    }
                },
                CallTarget::ToolSearch => {
                    let (result, shown) = self.run_search(call);
                    results.insert(call.id.clone(), result);
                    match shown {
                        Some(shown) => {
                            code_shown.insert(call.id.clone(), shown);
                        }
                        None => {
                            inline.insert(call.id.clone());
                        }
                    }
                }
                CallTarget::Code => {
                    let (result, shown, waiting) = self.run_code(call).await;
                    code_shown.insert(call.id.clone(), shown);
                    if waiting {
                        suspended = true;
                    } else if let Some(result) = result {
                        results.insert(call.id.clone(), result);
                    }
                }
            }
            if let Some(result) = results.get(&call.id) {
                self.record(
                    Entry::new(
                        "tool_result",
                        json!({"runs": runs, "content": result_json(result), "is_error": result.is_error}),
                    )
                    .call(&call.id)
                    .took(started),
                );
            }
        }

        if to_client.is_empty() && !suspended {
            // Everything ran here: the model reads the results next round.
            let results: Vec<ContentBlock> = calls
                .iter()
                .filter_map(|c| results.remove(&c.id))
                .map(ContentBlock::ToolResult)
                .collect();
            for call in &calls {
                if let Some(shown) = code_shown.remove(&call.id) {
                    self.shown.extend(shown);
                }
            }
            return Ok(Step::Continue(turn.content.clone(), results));
        }
        // Something needs the client: the model's turn, with code calls shown as server
        // tools and calls that ran inline left out (kept aside, so the model's view of this
        // turn gets them back when the client answers).
        // Reasoning in another vendor's shape than the client's cannot reach the client, but
        // its vendor wants it back beside the calls: it is kept aside too.
        let client_vendor = self.api.vendor();
        let reasoning: Vec<ContentBlock> = turn
            .content
            .iter()
            .filter(
                |b| matches!(b, ContentBlock::Reasoning { vendor, .. } if *vendor != client_vendor),
            )
            .cloned()
            .collect();
        if (!inline.is_empty() || !reasoning.is_empty())
            && let Some(key) = calls.iter().find(|c| to_client.contains(&c.id))
        {
            let ran: Vec<ToolCall> = calls
                .iter()
                .filter(|c| inline.contains(&c.id))
                .cloned()
                .collect();
            let ran_results: Vec<ToolResult> =
                ran.iter().filter_map(|c| results.remove(&c.id)).collect();
            self.gw
                .stash
                .keep(
                    &self.conversation,
                    &scoped(&self.conversation, &key.id),
                    Aside {
                        reasoning,
                        calls: ran,
                        results: ran_results,
                    },
                )
                .await
                .map_err(|e| fail(503, "api_error", e.to_string()))?;
        }
        let mut content = Vec::new();
        for block in &turn.content {
            match block {
                ContentBlock::ToolCall(c) if inline.contains(&c.id) => {}
                ContentBlock::ToolCall(c) if code_shown.contains_key(&c.id) => {
                    content.extend(code_shown.remove(&c.id).unwrap_or_default());
                }
                other => content.push(other.clone()),
            }
        }
        Ok(Step::Client(content))
    }

    /// Hands `call` to the client for approval: recorded as `approval_required` with
    /// `reason`, and kept until a `cordon_approval` answers it.
    async fn ask_client(
        &self,
        call: &ToolCall,
        reason: String,
        computer: bool,
    ) -> Result<(), Fail> {
        self.record(
            Entry::new(
                "approval_required",
                json!({"name": call.name, "reason": reason}),
            )
            .call(&call.id),
        );
        let asked = Asked {
            name: call.name.clone(),
            input: call.input.clone(),
            computer,
        };
        self.gw
            .asks
            .keep(&scoped(&self.conversation, &call.id), asked)
            .await
            .map_err(|e| fail(503, "api_error", e.to_string()))
    }

    /// Runs one operator tool call (validated, `allow` or approved `ask`).
    pub(super) async fn run_operator(&self, call: &ToolCall, approved: bool) -> ToolResult {
        let started = Instant::now();
        let result = call_operator(self.gw, &self.conversation, call, approved).await;
        if approved {
            self.record(
                Entry::new(
                    "tool_result",
                    json!({"runs": "server", "content": result_json(&result), "is_error": result.is_error}),
                )
                .call(&call.id)
                .took(started),
            );
        }
        result
    }

    /// Runs one computer action. `Err` when a gate asks (the call goes to the client). An
    /// action the tool's declaration disables is refused to the model: nothing runs.
    pub(super) async fn run_computer(
        &self,
        call: &ToolCall,
        approved: bool,
    ) -> Result<ToolResult, String> {
        let (Some(computers), Some(bound)) = (&self.gw.computers, &self.computer) else {
            return Ok(error_result(&call.id, "no computer is bound".to_owned()));
        };
        let action = match bound.action_of(call) {
            Ok(action) => action,
            Err(refusal) => return Ok(error_result(&call.id, refusal)),
        };
        match computers.act(&bound.id, &action, approved).await {
            Ok(ComputerOutcome::Done {
                screenshot,
                text,
                is_error,
            }) => {
                if bound.gemini.is_some() {
                    let url = computers.current_url(&bound.id).await;
                    return Ok(GeminiComputer::result(
                        call, approved, screenshot, text, is_error, url,
                    ));
                }
                let mut blocks = Vec::new();
                if let Some(text) = text {
                    blocks.push(ContentBlock::text(text));
                }
                if let Some((media_type, data)) = screenshot {
                    blocks.push(ContentBlock::Image {
                        source: ImageSource::Base64 { media_type, data },
                        extra: Extra::new(),
                    });
                }
                Ok(ToolResult {
                    call_id: call.id.clone(),
                    content: ToolResultContent::Blocks(blocks),
                    is_error,
                    extra: Extra::new(),
                })
            }
            Ok(ComputerOutcome::NeedsApproval { reason }) => Err(reason),
            Err(message) => Ok(error_result(&call.id, message)),
        }
    }
}
