//! One client request answered, start to end: the conversation it belongs to, what the
//! client answered applied (a suspended program's results, approvals), the rounds run, and
//! the reply recorded.

use std::collections::HashSet;
use std::time::Instant;

use cordon_core::ids::fresh_id;
use cordon_protocol::conversation::{
    ContentBlock, Request, Role, Turn, Usage, anthropic, encode_error, validate_pairing,
};
use serde_json::{Value, json};

use super::approvals::{APPROVAL_MARK, take_approvals};
use super::decode::{decode, encode_response, input_items, responses_container};
use super::failure::{Fail, bad_request};
use super::model_view::{model_view, program_call_ids};
use super::request_reply::{MessagesCall, MessagesReply};
use super::request_state::{RequestState, result_json};
use crate::continuation::conversation_of;
use crate::gateway::{Gateway, Inner};
use crate::record::{Entry, request_record};
use crate::upstream::Api;

impl Gateway {
    /// The reply to a request body that could not be read at all (not JSON, not an
    /// object): a 400 `invalid_request_error` in `api`'s shape, in a conversation of its own.
    pub fn reject(&self, api: Api, message: &str) -> MessagesReply {
        reject(&self.inner, api, message)
    }

    /// Answers one client request: `POST /v1/messages`, `/v1/chat/completions` or
    /// `/v1/responses` (the call's [`MessagesCall::api`]).
    pub async fn messages(&self, call: MessagesCall) -> MessagesReply {
        messages(&self.inner, call).await
    }
}

async fn messages(gw: &Inner, call: MessagesCall) -> MessagesReply {
    let decoded = decode(gw, &call);
    let history = decoded.as_ref().ok().map(|r| r.messages.as_slice());
    let conversation = conversation_of(gw.recorder.as_ref(), &gw.continuations, &call, history);
    // The history as the client sent it (before approvals become placeholders): what it
    // sends back, with the turn it gets, to continue this conversation.
    let digest = history.map(|m| gw.continuations.start(call.credential.as_ref(), m));
    gw.recorder.begin(&conversation, &gw.upstream.describe());
    gw.recorder.record(
        &conversation,
        Entry::new("request", request_record(&call.body)),
    );
    let started = Instant::now();
    let stream = call.body.get("stream") == Some(&Value::Bool(true));
    let api = call.api;
    // What a Responses request adds to its chain, kept with its output when it succeeds.
    let chain = (api == Api::OpenaiResponses && call.body.get("store") != Some(&json!(false)))
        .then(|| {
            let previous = call
                .body
                .get("previous_response_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            (previous, input_items(&call.body))
        });
    let mut computer_id = None;
    let outcome = handle(gw, &conversation, call, decoded, &mut computer_id).await;
    let reply = match outcome {
        Ok((turn, stop)) => {
            if let Some(digest) = digest {
                gw.continuations
                    .remember(digest, &turn.content, &conversation);
            }
            let body = encode_response(api, &turn);
            MessagesReply {
                status: 200,
                body,
                turn: Some(turn),
                conversation_id: conversation.clone(),
                stop,
                computer: computer_id,
                stream,
                api,
            }
        }
        Err(error) => {
            gw.recorder.record(
                &conversation,
                Entry::new(
                    "error",
                    json!({"status": error.status, "type": error.kind, "message": error.message}),
                ),
            );
            let body = encode_error(api.vendor(), error.status, error.kind, &error.message);
            MessagesReply {
                status: body.status,
                body: body.body,
                turn: None,
                conversation_id: conversation.clone(),
                stop: None,
                computer: computer_id,
                stream,
                api,
            }
        }
    };
    if let Some((previous, mut items)) = chain
        && reply.status == 200
        && let Some(id) = reply.body.get("id").and_then(Value::as_str)
    {
        if let Some(output) = reply.body.get("output").and_then(Value::as_array) {
            items.extend(output.iter().cloned());
        }
        gw.recorder
            .keep_response(id, previous.as_deref(), &Value::Array(items));
    }
    // Recorded in one shape (Anthropic's) whatever the client speaks.
    let canonical = reply.turn.as_ref().map(anthropic::encode_response);
    let field = |name: &str| canonical.as_ref().and_then(|c| c.get(name)).cloned();
    gw.recorder.record(
        &conversation,
        Entry::new(
            "response",
            json!({
                "status": reply.status,
                "stop_reason": field("stop_reason"),
                "stop": reply.stop,
                "content": field("content"),
                "container": field("container"),
            }),
        )
        .took(started),
    );
    reply
}

/// A request refused before it could be read (a body that is not JSON): a conversation
/// of its own records the error, so the reply carries an id like every other.
fn reject(gw: &Inner, api: Api, message: &str) -> MessagesReply {
    let conversation = fresh_id("conv");
    gw.recorder.begin(&conversation, &gw.upstream.describe());
    let error = encode_error(api.vendor(), 400, "invalid_request_error", message);
    gw.recorder.record(
        &conversation,
        Entry::new(
            "error",
            json!({"status": 400, "type": "invalid_request_error", "message": message}),
        ),
    );
    MessagesReply {
        status: error.status,
        body: error.body,
        turn: None,
        conversation_id: conversation,
        stop: None,
        computer: None,
        stream: false,
        api,
    }
}

async fn handle(
    gw: &Inner,
    conversation: &str,
    call: MessagesCall,
    decoded: Result<Request, Fail>,
    computer_id: &mut Option<String>,
) -> Result<(Turn, Option<&'static str>), Fail> {
    let mut request = decoded?;
    let api = call.api;
    if request.messages.is_empty() {
        return Err(bad_request("`messages` must not be empty"));
    }
    let container_param = match request.extra.remove("container") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(Value::Object(c)) => c.get("id").and_then(Value::as_str).map(str::to_owned),
        Some(_) => return Err(bad_request("`container` must be a container id")),
    };
    let container_param = container_param.or_else(|| {
        (call.api == Api::OpenaiResponses)
            .then(|| responses_container(&call.body))
            .flatten()
    });
    let approvals = take_approvals(&mut request)?;
    validate_pairing(&request).map_err(|e| bad_request(e.to_string()))?;
    // A conversation ending on the model's own tool calls asks the model to go on without
    // their results: every vendor refuses that, so the gateway does before anything runs.
    if let Some(last) = request
        .messages
        .last()
        .filter(|m| m.role == Role::Assistant)
        && let Some(call) = last.content.iter().find_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c),
            _ => None,
        })
    {
        return Err(bad_request(format!(
            "tool call `{}` has no result: the conversation ends with it; send its result \
             after it",
            call.id
        )));
    }

    let mut run = RequestState {
        gw,
        api,
        conversation: conversation.to_owned(),
        credential: call.credential.filter(|_| gw.options.forward_client_key),
        base: request.clone(),
        offered: Vec::new(),
        client_names: HashSet::new(),
        code_execution: None,
        computer: None,
        container: None,
        shown: Vec::new(),
        usage: Usage::default(),
    };
    run.setup_tools(&request.tools, call.computer.as_deref(), computer_id)
        .await?;
    if let Some(id) = &container_param {
        let container = gw
            .containers
            .get(id)
            .map_err(|e| bad_request(e.to_string()))?;
        run.container = Some(container);
    }
    record_client_results(&run, &request);

    let program_ids = program_call_ids(&request.messages);
    let mut view = model_view(&request.messages, &program_ids);
    gw.stash.restore(conversation, &mut view);

    // What the client answered: a suspended program's calls, approvals.
    if let Some(reply) = run.resume_program(&request, &mut view).await? {
        return Ok((reply, None));
    }
    run.apply_approvals(&approvals, &request, &mut view).await?;
    run.rounds(view).await
}

fn record_client_results(run: &RequestState<'_>, request: &Request) {
    let Some(last) = request.messages.last() else {
        return;
    };
    for block in &last.content {
        if let ContentBlock::ToolResult(result) = block
            && !result.extra.contains_key(APPROVAL_MARK)
        {
            run.gw.recorder.record(
                &run.conversation,
                Entry::new(
                    "tool_result",
                    json!({"from": "client", "content": result_json(result), "is_error": result.is_error}),
                )
                .call(&result.call_id),
            );
        }
    }
}
