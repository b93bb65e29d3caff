//! The round loop: ask the model, run its server-tool calls, feed the results back, until
//! the model ends its turn, something needs the client, or the round cap.

use std::time::Instant;

use cordon_protocol::conversation::{
    Message, Request, Role, StopReason, ToolCall, Turn, Usage, anthropic,
};

use super::failure::{Fail, fail};
use super::live_reply::{HeldNames, LiveReply, RoundSink};
use super::request_state::{RequestState, response_id, text_turn};
use super::server_calls::Step;
use crate::call_ids::check_turn;
use crate::record::Entry;
use crate::upstream::UpstreamError;

impl RequestState<'_> {
    /// `live`: the reply streaming, which shows each round as it comes.
    pub(super) async fn rounds(
        &mut self,
        mut view: Vec<Message>,
        live: &mut Option<LiveReply>,
    ) -> Result<(Turn, Option<&'static str>), Fail> {
        let max = self.gw.options.max_tool_rounds;
        // Blocks shown before any round (approved code that ran) go out first.
        let mut shown_out = 0;
        for round in 1..=max {
            if let Some(live) = live.as_mut() {
                for block in &self.shown[shown_out..] {
                    live.show(block);
                }
                shown_out = self.shown.len();
            }
            let request = Request {
                messages: view.clone(),
                tools: self.offered.clone(),
                ..self.base.clone()
            };
            let started = Instant::now();
            let answer = match live.as_mut() {
                Some(live) => self.ask_live(&request, live).await,
                None => {
                    self.gw
                        .upstream
                        .call(&request, self.credential.as_ref())
                        .await
                }
            };
            let mut turn = answer.map_err(|e| {
                let (status, kind) = e.status_and_kind();
                fail(status, kind, e.to_string())
            })?;
            self.record(
                Entry::new("model_turn", anthropic::encode_response(&turn))
                    .round(round)
                    .took(started),
            );
            // Kept calls and approvals are found by id: a turn that reuses one runs nothing.
            check_turn(&view, &turn).map_err(|e| {
                let (status, kind) = e.status_and_kind();
                fail(status, kind, e.to_string())
            })?;
            add_usage(&mut self.usage, &turn.usage);
            let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();
            if calls.is_empty() {
                let mut content = std::mem::take(&mut self.shown);
                content.append(&mut turn.content);
                let stop = turn.stop_reason.clone().unwrap_or(StopReason::EndTurn);
                return Ok((self.finish_turn(turn, content, stop), None));
            }
            match self.run_calls(&mut turn, calls).await? {
                Step::Client(content) => {
                    let mut all = std::mem::take(&mut self.shown);
                    all.extend(content);
                    return Ok((self.finish_turn(turn, all, StopReason::ToolUse), None));
                }
                Step::Continue(assistant, results) => {
                    view.push(Message::new(Role::Assistant, assistant));
                    view.push(Message::new(Role::User, results));
                }
            }
        }
        if let Some(live) = live.as_mut() {
            for block in &self.shown[shown_out..] {
                live.show(block);
            }
        }
        let text =
            format!("Stopped: the tool-round limit ({max} model turns per request) was reached.");
        let mut turn = text_turn(&self.base.model, &text);
        turn.id = response_id(self.api);
        turn.usage = self.usage.clone();
        turn.container = self.container_info();
        Ok((turn, Some("max_tool_rounds")))
    }

    /// One model round streamed into `live`: text and client calls go out as they come,
    /// server-tool calls are held back (they run once complete, and show what they did).
    async fn ask_live(
        &self,
        request: &Request,
        live: &mut LiveReply,
    ) -> Result<Turn, UpstreamError> {
        live.begin_round();
        let mut sink = RoundSink {
            live,
            held: HeldNames {
                code: self.code_execution.is_some(),
                computer: self.computer.as_ref().map(|c| c.name.as_str()),
                client: &self.client_names,
                operator: self.gw.operator.as_ref(),
                more: self.more_server_names(),
            },
        };
        self.gw
            .upstream
            .call_streaming(request, self.credential.as_ref(), &mut sink)
            .await
    }
}

fn add_usage(total: &mut Usage, more: &Usage) {
    total.input_tokens += more.input_tokens;
    total.output_tokens += more.output_tokens;
    if let Some(n) = more.cache_creation_input_tokens {
        *total.cache_creation_input_tokens.get_or_insert(0) += n;
    }
    if let Some(n) = more.cache_read_input_tokens {
        *total.cache_read_input_tokens.get_or_insert(0) += n;
    }
}
