//! One client request answered, start to end: the conversation it belongs to, what the
//! client answered applied (a suspended program's results, approvals), the rounds run, and
//! the reply recorded.

use std::collections::HashSet;
use std::time::Instant;

use cordon_core::ids::fresh_id;
use cordon_protocol::conversation::stream::live_encoder;
use cordon_protocol::conversation::{
    ContentBlock, Request, Role, Turn, Usage, anthropic, encode_error, validate_pairing,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::approvals::{APPROVAL_MARK, take_approvals};
use super::decode::{decode, encode_response, input_items, responses_container};
use super::failure::{Fail, bad_request, container_failure};
use super::live_reply::LiveReply;
use super::model_view::{model_view, program_call_ids};
use super::request_reply::{LiveStream, MessagesAnswer, MessagesCall, MessagesReply, StreamHead};
use super::request_state::{RequestState, response_id, result_json};
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
        messages(&self.inner, call, None).await
    }

    /// Answers one client request like [`messages`](Gateway::messages), streaming the
    /// reply as it is made when the request asks for a stream (`"stream": true`): text and
    /// client tool calls as the model streams them, server tools once they ran, every model
    /// round in the one response, an upstream failure after the first byte as the API's
    /// in-stream error event. The reply runs in a task of its own: a client that goes away
    /// does not stop it, and it is recorded when complete.
    pub async fn messages_live(&self, call: MessagesCall) -> MessagesAnswer {
        let encoder = live_encoder(call.api.vendor());
        let (true, Some(encoder)) = (call.body.get("stream") == Some(&Value::Bool(true)), encoder)
        else {
            return MessagesAnswer::Whole(Box::new(self.messages(call).await));
        };
        let (head_sender, head) = oneshot::channel();
        let (events, receiver) = mpsc::unbounded_channel();
        let model = call.body["model"].as_str().unwrap_or_default().to_owned();
        let api = call.api;
        let gateway = self.clone();
        let task = tokio::spawn(async move {
            let inner = &gateway.inner;
            let live = LiveReply::new(
                encoder,
                (head_sender, StreamHead::default()),
                events,
                response_id(api),
                model,
                Some(inner.upstream.api().vendor()),
            );
            messages(inner, call, Some(live)).await
        });
        match head.await {
            Ok(head) => MessagesAnswer::Live(LiveStream {
                head,
                events: receiver,
            }),
            // Done before its first byte: answered whole, with its status.
            Err(_) => MessagesAnswer::Whole(Box::new(match task.await {
                Ok(reply) => reply,
                Err(error) => failed_task(&self.inner, api, &error.to_string()),
            })),
        }
    }
}

/// The reply to a request whose task ended without one (it panicked).
fn failed_task(gw: &Inner, api: Api, message: &str) -> MessagesReply {
    let mut reply = reject(gw, api, message);
    let error = encode_error(api.vendor(), 500, "api_error", message);
    reply.status = error.status;
    reply.body = error.body;
    reply
}

async fn messages(gw: &Inner, call: MessagesCall, mut live: Option<LiveReply>) -> MessagesReply {
    let decoded = decode(gw, &call);
    let history = decoded.as_ref().ok().map(|r| r.messages.as_slice());
    let conversation =
        conversation_of(gw.recorder.as_ref(), &gw.continuations, &call, history).await;
    if let Some(live) = &mut live {
        live.set_conversation(&conversation);
    }
    // The history as the client sent it (before approvals become placeholders): what it
    // sends back, with the turn it gets, to continue this conversation.
    let digest = match history {
        Some(m) => Some(gw.continuations.start(call.credential.as_ref(), m).await),
        None => None,
    };
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
    let outcome = handle(
        gw,
        &conversation,
        call,
        decoded,
        &mut computer_id,
        &mut live,
    )
    .await;
    let reply = match outcome {
        Ok((mut turn, stop)) => {
            // Streamed: what went out is the reply (its id, its blocks in their order).
            if let Some(live) = &mut live {
                live.show_missing(&turn.content);
                turn.id = live.id.clone();
                turn.content = live.emitted.clone();
                live.end(&turn);
            }
            if let Some(digest) = digest {
                gw.continuations
                    .remember(digest, &turn.content, &conversation)
                    .await;
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
            if let Some(live) = live.as_mut().filter(|l| l.started()) {
                live.fail(error.kind, &error.message);
            }
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
    live: &mut Option<LiveReply>,
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
        tool_search: None,
        container: None,
        shown: Vec::new(),
        usage: Usage::default(),
    };
    run.setup_tools(&request.tools, call.computer.as_deref(), computer_id)
        .await?;
    if let Some(live) = live {
        live.set_computer(computer_id.clone());
    }
    if let Some(id) = &container_param {
        let container = gw
            .containers
            .get(id)
            .await
            .map_err(|e| container_failure(&e))?;
        run.container = Some(container);
    }
    record_client_results(&run, &request);

    let answer = async {
        let program_ids = program_call_ids(&request.messages);
        let mut view = model_view(&request.messages, &program_ids);
        gw.stash.restore(conversation, &mut view).await;
        run.recall_loaded_tools(&view);

        // What the client answered: a suspended program's calls, approvals.
        if let Some(reply) = run.resume_program(&request, &mut view).await? {
            return Ok((reply, None));
        }
        run.apply_approvals(&approvals, &request, &mut view).await?;
        run.rounds(view, live).await
    }
    .await;
    // The container the request used goes to rest before the reply ends: a client that
    // has its reply finds the container again after a restart.
    if let Some(container) = &run.container
        && let Err(error) = container.rest().await
    {
        run.record(
            Entry::new(
                "error",
                json!({"type": "container_not_kept", "container": container.id, "message": error.to_string()}),
            ),
        );
    }
    answer
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
