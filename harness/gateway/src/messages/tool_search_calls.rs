//! Tool-search calls of this front door: the search run for the model's call (shown to an
//! Anthropic client as `server_tool_use` + `tool_search_tool_result`, inline for the
//! others), and the tools earlier searches loaded, found again in the history.

use cordon_protocol::conversation::{
    ContentBlock, Extra, Message, ToolCall, ToolResult, ToolResultContent,
};

use super::browser_tool::browser_call_names;
use super::request_state::RequestState;
use crate::tool_search::{RESULT_BLOCK, ToolSearch, client_content, model_text};
use crate::upstream::Api;

impl RequestState<'_> {
    /// Whether a search is shown to the client as a server tool (Anthropic's blocks exist
    /// only in the Messages API; other clients never see the search).
    pub(super) fn shows_searches(&self) -> bool {
        self.api == Api::Anthropic
    }

    /// Runs the tool search `call`: the model's result, and the blocks shown to the client
    /// in place of the call (none when the client is not shown searches). The tools found
    /// are offered to the model from the next round on.
    pub(super) fn run_search(
        &mut self,
        call: &ToolCall,
    ) -> (ToolResult, Option<Vec<ContentBlock>>) {
        let Some(search) = self.tool_search.as_mut() else {
            let result = ToolResult {
                call_id: call.id.clone(),
                content: ToolResultContent::Text("no tool search is declared".to_owned()),
                is_error: true,
                extra: Extra::new(),
            };
            return (result, None);
        };
        let outcome = search.search(&call.name, &call.input);
        if let Ok(names) = &outcome {
            let loaded = search.load(names);
            self.offered.extend(loaded);
        }
        let (text, is_error) = model_text(&outcome);
        let result = ToolResult {
            call_id: call.id.clone(),
            content: ToolResultContent::Text(text),
            is_error,
            extra: Extra::new(),
        };
        let shown = self.shows_searches().then(|| {
            vec![
                ContentBlock::ServerToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    extra: Extra::new(),
                },
                ContentBlock::ServerToolResult {
                    kind: RESULT_BLOCK.to_owned(),
                    tool_use_id: call.id.clone(),
                    content: client_content(&outcome),
                    extra: Extra::new(),
                },
            ]
        });
        (result, shown)
    }

    /// Names of calls Cordon runs that a name-only check by code tool, computer tool name
    /// and operator tools misses: the tool searches, a JavaScript program tool, a bound
    /// browser's calls (its function and its members). A streamed reply holds their
    /// blocks back like any server tool's.
    pub(super) fn more_server_names(&self) -> Vec<String> {
        let mut names = self
            .tool_search
            .as_ref()
            .map(ToolSearch::names)
            .unwrap_or_default();
        if let Some(code) = &self.code_execution {
            names.push(code.name.clone());
        }
        if let Some(computer) = &self.computer
            && computer.browser.is_some()
        {
            names.extend(browser_call_names().map(str::to_owned));
        }
        names
    }

    /// Loads the deferred tools the conversation so far has found or used: each search call
    /// in the model's `view` is run again (the same query over the same tools finds the
    /// same), and a deferred tool the model already called stays loaded.
    pub(super) fn recall_loaded_tools(&mut self, view: &[Message]) {
        let Some(search) = self.tool_search.as_mut() else {
            return;
        };
        let mut names = Vec::new();
        for call in view
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|b| match b {
                ContentBlock::ToolCall(c) => Some(c),
                _ => None,
            })
        {
            if search.tool(&call.name).is_some() {
                names.extend(search.search(&call.name, &call.input).unwrap_or_default());
            } else if search.is_deferred(&call.name) {
                names.push(call.name.clone());
            }
        }
        let loaded = search.load(&names);
        self.offered.extend(loaded);
    }
}
