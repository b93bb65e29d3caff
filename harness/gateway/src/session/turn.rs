//! One turn of a session: the client's answers applied, then model turns with trusted
//! tools run inline, until the model ends its turn, a call needs the client, or the round
//! cap.

use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::conversation::stream::{Delta, DeltaSink};
use cordon_protocol::conversation::{
    ContentBlock, Extra, Message, Request, Role, System, ToolCall, ToolDefinition, ToolResult,
    ToolResultContent,
};
use cordon_protocol::tool::Policy;
use tokio::sync::mpsc::UnboundedSender;

use super::event::SessionEvent;
use super::input::{InputMessage, SessionInput};
use super::state::{CallKind, PendingCall, SessionState};
use crate::call_ids::check_turn;
use crate::containers::Outcome;
use crate::gateway::{Gateway, Inner};
use crate::tool_calls::{
    CallTarget, NO_CODE, call_operator, classify, code_function, code_of, denied_result,
    error_result, operator_function, program_result, push_user, run_program,
};
use crate::upstream::Credential;

fn send(events: &UnboundedSender<SessionEvent>, event: SessionEvent) {
    // A client that went away does not stop the turn: its state is still kept.
    let _ = events.send(event);
}

/// A model round's text, sent as `text_delta` events while the model writes it. Calls
/// are sent once complete, after the round (a server tool runs only whole).
struct TextSink<'a>(&'a UnboundedSender<SessionEvent>);

impl DeltaSink for TextSink<'_> {
    fn send(&mut self, delta: Delta) -> bool {
        if let Delta::Text { text, .. } = delta
            && !text.is_empty()
        {
            send(self.0, SessionEvent::TextDelta(text));
        }
        true
    }
}

impl Gateway {
    /// Runs one turn of a session: applies `input` (checked with
    /// [`SessionState::check`] first), then asks the model, runs trusted tools, until the
    /// model ends its turn, a call needs the client, or the round cap. Emits the events
    /// of the turn (not the `session` event) and leaves `state` ready to be kept.
    pub async fn session_turn(
        &self,
        state: &mut SessionState,
        input: SessionInput,
        credential: Option<Credential>,
        events: &UnboundedSender<SessionEvent>,
    ) {
        let credential = credential.filter(|_| self.inner.options.forward_client_key);
        session_turn(&self.inner, state, input, credential.as_ref(), events).await;
        // The session's container goes to rest with the session's state: both come back
        // after a restart.
        if let Some(id) = state.container.as_deref()
            && let Ok(container) = self.inner.containers.get(id).await
        {
            let _ = container.rest().await;
        }
    }
}

async fn session_turn(
    gw: &Inner,
    state: &mut SessionState,
    input: SessionInput,
    credential: Option<&Credential>,
    events: &UnboundedSender<SessionEvent>,
) {
    // 1. The client's answers, in the model's order, after the results that ran inline.
    let mut results: Vec<ContentBlock> = std::mem::take(&mut state.held)
        .into_iter()
        .map(ContentBlock::ToolResult)
        .collect();
    let mut user = Vec::new();
    let pending = std::mem::take(&mut state.pending);
    for call in &pending {
        let answer = input.messages.iter().find(|m| match m {
            InputMessage::Tool { id, .. } | InputMessage::Permission { id, .. } => *id == call.id,
            InputMessage::User(_) => false,
        });
        let result = match answer {
            Some(InputMessage::Tool {
                content, is_error, ..
            }) => ToolResult {
                call_id: call.id.clone(),
                content: ToolResultContent::Text(content.clone()),
                is_error: *is_error,
                extra: Extra::new(),
            },
            Some(InputMessage::Permission { granted: true, .. }) => {
                let tool_call = ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    caller: None,
                    extra: Extra::new(),
                };
                let result = call_operator(gw, &state.id, &tool_call, true).await;
                emit_result(events, &result);
                result
            }
            Some(InputMessage::Permission { reason, .. }) => {
                let result = denied_result(&call.id, reason.as_deref());
                emit_result(events, &result);
                result
            }
            // `check` makes every pending call answered.
            Some(InputMessage::User(_)) | None => {
                error_result(&call.id, "the client gave no answer".to_owned())
            }
        };
        results.push(ContentBlock::ToolResult(result));
    }
    for message in input.messages {
        if let InputMessage::User(content) = message {
            user.extend(content);
        }
    }
    results.extend(user);
    if !results.is_empty() {
        push_user(&mut state.messages, results);
    }

    // 2. Model turns.
    let offered = offered_tools(gw, state);
    let max = gw.options.max_tool_rounds;
    for _round in 1..=max {
        let request = Request {
            model: state.model.clone(),
            system: state.system.clone().map(System::Text),
            messages: state.messages.clone(),
            tools: offered.clone(),
            max_tokens: Some(state.max_tokens),
            // Streamed, so the client reads the text while the model writes it.
            stream: true,
            ..Request::default()
        };
        // A turn reusing a call id would let one answer stand for two calls: nothing of it
        // runs or is kept, and the client may send a message to try again.
        let checked = gw
            .upstream
            .call_streaming(&request, credential, &mut TextSink(events))
            .await
            .and_then(|turn| {
                check_turn(&state.messages, &turn)?;
                Ok(turn)
            });
        let turn = match checked {
            Ok(turn) => turn,
            Err(error) => {
                send(
                    events,
                    SessionEvent::TurnStop {
                        reason: "error",
                        message: Some(error.to_string()),
                    },
                );
                return;
            }
        };
        state
            .messages
            .push(Message::new(Role::Assistant, turn.content.clone()));
        let calls: Vec<ToolCall> = turn.tool_calls().cloned().collect();
        if calls.is_empty() {
            send(
                events,
                SessionEvent::TurnStop {
                    reason: "end_turn",
                    message: None,
                },
            );
            return;
        }
        let mut ran = Vec::new();
        for call in &calls {
            let kind = kind_of(gw, state, call);
            send(
                events,
                SessionEvent::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    kind,
                },
            );
            match kind {
                CallKind::Server => {
                    let result = run_trusted(gw, state, call).await;
                    emit_result(events, &result);
                    ran.push(result);
                }
                CallKind::Permission | CallKind::Application => {
                    state.pending.push(PendingCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        input: call.input.clone(),
                        kind,
                    });
                }
            }
        }
        if !state.pending.is_empty() {
            state.held = ran;
            send(
                events,
                SessionEvent::TurnStop {
                    reason: "tool_use",
                    message: None,
                },
            );
            return;
        }
        push_user(
            &mut state.messages,
            ran.into_iter().map(ContentBlock::ToolResult).collect(),
        );
    }
    send(
        events,
        SessionEvent::TurnStop {
            reason: "max_turns",
            message: Some(format!(
                "the tool-round limit ({max} model turns per request) was reached; send a \
                 message to go on"
            )),
        },
    );
}

fn emit_result(events: &UnboundedSender<SessionEvent>, result: &ToolResult) {
    send(
        events,
        SessionEvent::ToolResult {
            id: result.call_id.clone(),
            content: result.content.text(),
            is_error: result.is_error,
        },
    );
}

/// Who runs `call` in this session (it binds no computer).
fn target_of(gw: &Inner, state: &SessionState, call: &ToolCall) -> CallTarget {
    classify(
        &call.name,
        gw.containers
            .available()
            .then_some(cordon_protocol::conversation::CODE_TOOL),
        None,
        &[],
        |name| state.tools.iter().any(|t| t.name == name),
        gw.operator.as_ref(),
    )
}

/// The policy of the operator tool of that name.
fn operator_policy(gw: &Inner, name: &str) -> Option<Policy> {
    let operator = gw.operator.as_ref()?;
    operator
        .registry()
        .get(name)
        .map(|tool| tool.declaration.policy)
}

fn kind_of(gw: &Inner, state: &SessionState, call: &ToolCall) -> CallKind {
    match target_of(gw, state, call) {
        CallTarget::Code => CallKind::Server,
        // Input that fails the schema goes back to the model without asking anyone.
        CallTarget::Operator
            if operator_policy(gw, &call.name) == Some(Policy::Ask)
                && valid_operator_input(gw, call) =>
        {
            CallKind::Permission
        }
        CallTarget::Operator => CallKind::Server,
        CallTarget::Client => CallKind::Application,
        // A tool nobody declared: the model reads the error.
        CallTarget::Computer | CallTarget::ToolSearch | CallTarget::Undeclared => CallKind::Server,
    }
}

fn valid_operator_input(gw: &Inner, call: &ToolCall) -> bool {
    gw.operator
        .as_ref()
        .and_then(|o| o.registry().get(&call.name))
        .is_some_and(|tool| tool.validate_input(&call.input).is_ok())
}

/// Runs a call Cordon runs itself: code, an `allow` operator tool, or an error for a call
/// that cannot run (unknown tool, invalid input, a `deny` tool).
async fn run_trusted(gw: &Inner, state: &mut SessionState, call: &ToolCall) -> ToolResult {
    let target = target_of(gw, state, call);
    if target == CallTarget::Code {
        return run_code(gw, state, call).await;
    }
    let Some(policy) = operator_policy(gw, &call.name).filter(|_| target == CallTarget::Operator)
    else {
        return error_result(
            &call.id,
            format!("unknown tool `{}`: use one of the tools offered", call.name),
        );
    };
    let tool = gw
        .operator
        .as_ref()
        .and_then(|o| o.registry().get(&call.name));
    if let Some(tool) = tool
        && let Err(failure) = tool.validate_input(&call.input)
    {
        return error_result(&call.id, format!("invalid input: {}", failure.message));
    }
    if policy == Policy::Deny {
        return error_result(&call.id, format!("policy denies tool `{}`", call.name));
    }
    call_operator(gw, &state.id, call, false).await
}

async fn run_code(gw: &Inner, state: &mut SessionState, call: &ToolCall) -> ToolResult {
    let Some(code) = code_of(call) else {
        return error_result(&call.id, NO_CODE.to_owned());
    };
    let known = match state.container.as_deref() {
        Some(id) => gw.containers.get(id).await.ok(),
        None => None,
    };
    let container = match known {
        Some(container) => container,
        // No container yet, or it expired (or was interrupted): a fresh interpreter.
        None => match gw.containers.create().await {
            Ok(container) => container,
            Err(error) => return error_result(&call.id, error.to_string()),
        },
    };
    state.container = Some(container.id.clone());
    let no_tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
    match run_program(&container, code, no_tools, &call.id, "code_execution").await {
        Ok(Outcome::Done(result)) => program_result(&call.id, &result),
        // Programs in sessions get no client tools, so they never suspend (nor leave one
        // waiting in their container).
        Ok(Outcome::Suspended(_)) => {
            error_result(&call.id, "the program waited for a tool".to_owned())
        }
        Err(refusal) => error_result(&call.id, refusal.message()),
    }
}

/// The tools the model is offered in a session: the client's, the code tool (with a
/// sandbox), and the operator's `allow` and `ask` tools.
fn offered_tools(gw: &Inner, state: &SessionState) -> Vec<ToolDefinition> {
    let mut offered: Vec<ToolDefinition> = state
        .tools
        .iter()
        .cloned()
        .map(ToolDefinition::Function)
        .collect();
    if gw.containers.available() {
        offered.push(code_function(
            "Run Python code in a sandbox (no network, no files). The final expression's \
             value and everything printed are returned to you. Variables persist between \
             calls in this session."
                .to_owned(),
        ));
    }
    if let Some(operator) = &gw.operator {
        for tool in operator.registry().iter() {
            let d = &tool.declaration;
            if d.policy == Policy::Deny || state.tools.iter().any(|t| t.name == d.name) {
                continue;
            }
            offered.push(operator_function(d));
        }
    }
    offered
}
