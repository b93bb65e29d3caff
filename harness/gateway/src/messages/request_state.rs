//! Everything one client request carries through the model loop, and the turns it hands
//! back (the model's, finished, or Cordon's own).

use std::collections::HashSet;
use std::sync::Arc;

use cordon_core::Dispatcher;
use cordon_core::ids::fresh_id;
use cordon_protocol::conversation::{
    ContentBlock, Extra, Request, StopReason, ToolCall, ToolCaller, ToolDefinition, ToolResult,
    ToolResultContent, Turn, Usage, Vendor, anthropic,
};
use cordon_protocol::execution::Language;
use serde_json::{Value, json};

use super::computer_tool::BoundComputer;
use crate::containers::{Container, ProgramCall};
use crate::gateway::Inner;
use crate::record::Entry;
use crate::tool_calls::{CallTarget, classify};
use crate::tool_search::ToolSearch;
use crate::upstream::{Api, Credential};

/// Code execution (programmatic tool calling) set up for this request.
pub(super) struct CodeExecution {
    /// The declared type (`code_execution_20250825`, `programmatic_tool_calling`).
    pub(super) kind: String,
    /// The name the model calls it by (`code_execution`, `programmatic_tool_calling`).
    pub(super) name: String,
    /// The language of its programs.
    pub(super) language: Language,
    /// Client tools callable from programs.
    pub(super) tools: Dispatcher,
}

/// Everything one request carries through the loop.
pub(super) struct RequestState<'a> {
    pub(super) gw: &'a Inner,
    /// The API the client speaks.
    pub(super) api: Api,
    pub(super) conversation: String,
    pub(super) credential: Option<Credential>,
    pub(super) base: Request,
    pub(super) offered: Vec<ToolDefinition>,
    /// Names of client tools (a client tool shadows an operator tool of the same name).
    pub(super) client_names: HashSet<String>,
    pub(super) code_execution: Option<CodeExecution>,
    /// The bound computer and the tool that drives it.
    pub(super) computer: Option<BoundComputer>,
    /// The tool search the request declares, with the tools it keeps from the model.
    pub(super) tool_search: Option<ToolSearch>,
    pub(super) container: Option<Arc<Container>>,
    /// Blocks shown before the final turn's (code results of earlier rounds).
    pub(super) shown: Vec<ContentBlock>,
    pub(super) usage: Usage,
}

/// The id prefix of a response in `api` (`msg_…`, `chatcmpl-…`, `resp_…`).
pub(super) fn response_id(api: Api) -> String {
    match api {
        Api::Anthropic => fresh_id("msg"),
        Api::OpenaiChat => fresh_id("chatcmpl").replacen('_', "-", 1),
        Api::OpenaiResponses => fresh_id("resp"),
        Api::Gemini => fresh_id("gemini"),
    }
}

/// A turn of Cordon's own holding `text`.
pub(super) fn text_turn(model: &str, text: &str) -> Turn {
    Turn {
        origin: Some(Vendor::Anthropic),
        id: fresh_id("msg"),
        model: model.to_owned(),
        content: vec![ContentBlock::text(text)],
        stop_reason: Some(StopReason::EndTurn),
        stop_sequence: None,
        usage: Usage::default(),
        container: None,
        extra: Extra::new(),
    }
}

/// A tool result's content as recorded.
pub(super) fn result_json(result: &ToolResult) -> Value {
    match &result.content {
        ToolResultContent::Text(t) => json!(t),
        ToolResultContent::Blocks(b) => Value::Array(anthropic::encode_blocks(b, true)),
    }
}

impl RequestState<'_> {
    /// Who runs `call` in this request (a tool nobody declared is the client's).
    pub(super) fn kind_of(&self, call: &ToolCall) -> CallTarget {
        if self.computer.as_ref().is_some_and(|c| c.drives(call)) {
            return CallTarget::Computer;
        }
        let code = self.code_execution.as_ref().map(|c| c.name.as_str());
        let searches = self
            .tool_search
            .as_ref()
            .map(ToolSearch::names)
            .unwrap_or_default();
        let target = classify(
            &call.name,
            code,
            None,
            &searches,
            |name| self.client_names.contains(name),
            self.gw.operator.as_ref(),
        );
        match target {
            CallTarget::Undeclared => CallTarget::Client,
            other => other,
        }
    }

    pub(super) fn record(&self, entry: Entry) {
        self.gw.recorder.record(&self.conversation, entry);
    }

    pub(super) fn container_info(&self) -> Option<cordon_protocol::conversation::Container> {
        self.container
            .as_ref()
            .map(|c| cordon_protocol::conversation::Container {
                id: c.id.clone(),
                expires_at: Some(c.expires_at()),
            })
    }

    pub(super) fn finish_turn(
        &self,
        turn: Turn,
        content: Vec<ContentBlock>,
        stop: StopReason,
    ) -> Turn {
        let mut out = turn;
        // Responses ids are Cordon's own: `previous_response_id` names them.
        if out.origin != Some(self.api.vendor())
            || out.id.is_empty()
            || self.api == Api::OpenaiResponses
        {
            out.id = response_id(self.api);
        }
        out.content = content;
        out.stop_reason = Some(stop);
        out.usage = self.usage.clone();
        out.container = self.container_info().or(out.container);
        out
    }

    /// A reply made by Cordon alone (a program suspended again on resume).
    pub(super) fn reply_turn(
        &self,
        content: Vec<ContentBlock>,
        stop: StopReason,
        model: Option<&str>,
    ) -> Turn {
        let mut turn = text_turn(model.unwrap_or(&self.base.model), "");
        turn.id = response_id(self.api);
        turn.content = content;
        turn.stop_reason = Some(stop);
        turn.container = self.container_info();
        turn
    }

    pub(super) fn program_blocks(
        &self,
        calls: &[ProgramCall],
        server_id: &str,
        kind: &str,
    ) -> Vec<ContentBlock> {
        calls
            .iter()
            .map(|c| {
                self.record(
                    Entry::new(
                        "tool_call",
                        json!({"name": c.name, "input": c.input, "runs": "client", "caller": server_id}),
                    )
                    .call(&c.id),
                );
                ContentBlock::ToolCall(ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input: c.input.clone(),
                    caller: Some(ToolCaller {
                        kind: kind.to_owned(),
                        tool_id: Some(server_id.to_owned()),
                    }),
                    extra: Extra::new(),
                })
            })
            .collect()
    }
}
