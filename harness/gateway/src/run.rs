//! The model loop of one client request.
//!
//! 1. Decode the client's request; turn `cordon_approval` blocks into placeholders so
//!    pairing can be checked; check pairing (nothing has run yet).
//! 2. Build the model's view of the conversation: server-tool blocks become the function
//!    calls the model made, program-made calls and their results disappear.
//! 3. Finish what the client answered: resume a suspended program, run approved calls.
//! 4. Ask the model, run its server-tool calls, feed results back, until the model ends
//!    its turn, something needs the client, or the round cap.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use cordon_core::{ApproveListed, CallContext, Dispatcher, ToolRegistry};
use cordon_protocol::conversation::{
    ContentBlock, Extra, FunctionTool, ImageSource, Message, Request, Role, StopReason, ToolCall,
    ToolCaller, ToolDefinition, ToolResult, ToolResultContent, Turn, Usage, Vendor, anthropic,
    chat, encode_error, responses, validate_pairing,
};
use cordon_protocol::execution::ClientToolResult;
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use serde_json::{Value, json};

use crate::Api;
use crate::call_ids::{check_turn, scoped};
use crate::continuation::conversation_of;
use crate::kept::Kept;
use crate::ptc::{self, Container, Outcome, ProgramCall};
use crate::record::{Entry, request_record};
use cordon_core::ids::fresh_id;

use crate::{ComputerOutcome, Inner, MessagesCall, MessagesReply};

/// The name the code tool has for the model.
use cordon_protocol::conversation::CODE_TOOL;
/// Marks a placeholder tool result standing for a `cordon_approval` block.
const APPROVAL_MARK: &str = "cordon_approval";

/// A reply that ends the request early.
struct Fail {
    status: u16,
    kind: &'static str,
    message: String,
}

fn fail(status: u16, kind: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        status,
        kind,
        message: message.into(),
    }
}

fn bad_request(message: impl Into<String>) -> Fail {
    fail(400, "invalid_request_error", message)
}

/// A client decision on an `ask` call.
#[derive(Debug, Clone)]
struct Approval {
    call_id: String,
    granted: bool,
    reason: Option<String>,
}

/// Programmatic tool calling set up for this request.
struct Ptc {
    /// The declared type (`code_execution_20250825`).
    kind: String,
    /// Client tools callable from programs.
    tools: Dispatcher,
}

/// Everything one request carries through the loop.
struct Run<'a> {
    gw: &'a Inner,
    /// The API the client speaks.
    api: Api,
    conversation: String,
    credential: Option<crate::Credential>,
    base: Request,
    offered: Vec<ToolDefinition>,
    /// Names of client tools (a client tool shadows an operator tool of the same name).
    client_names: HashSet<String>,
    ptc: Option<Ptc>,
    /// The bound computer and the tool's name.
    computer: Option<(String, String)>,
    container: Option<Arc<Container>>,
    /// Blocks shown before the final turn's (code results of earlier rounds).
    shown: Vec<ContentBlock>,
    usage: Usage,
}

pub(crate) async fn messages(gw: &Inner, call: MessagesCall) -> MessagesReply {
    let decoded = decode(gw, &call);
    let history = decoded.as_ref().ok().map(|r| r.messages.as_slice());
    let conversation = conversation_of(gw, &call, history);
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

fn encode_response(api: Api, turn: &Turn) -> Value {
    match api {
        Api::Anthropic => anthropic::encode_response(turn),
        Api::OpenaiChat => chat::encode_response(turn),
        Api::OpenaiResponses => responses::encode_response(turn),
    }
}

/// Whether a built-in tool type is the code tool: Anthropic's `code_execution_*`, or
/// OpenAI's `code_interpreter` (for Responses clients).
fn is_code_tool(kind: &str) -> bool {
    kind.starts_with("code_execution_") || kind == "code_interpreter"
}

/// The container a Responses client names: its `code_interpreter` tool's `container` (an
/// id), else the container of the last code call in its input.
fn responses_container(body: &Value) -> Option<String> {
    let named = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "code_interpreter")
        .find_map(|t| t["container"].as_str().map(str::to_owned));
    named.or_else(|| {
        body.get("input")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .rev()
            .filter(|item| item["type"] == "code_interpreter_call")
            .find_map(|item| {
                item["container_id"]
                    .as_str()
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
            })
    })
}

/// Responses one `previous_response_id` chain may go back through.
const MAX_RESPONSE_CHAIN: usize = 10_000;

/// A Responses request's `input` as items (a string is one user message).
fn input_items(body: &Value) -> Vec<Value> {
    match body.get("input") {
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

/// The items of response `id` and of every response it continued, oldest first.
fn response_history(gw: &Inner, id: &str) -> Result<Vec<Value>, Fail> {
    let mut chain = Vec::new();
    let mut next = Some(id.to_owned());
    while let Some(current) = next {
        if chain.len() >= MAX_RESPONSE_CHAIN {
            return Err(bad_request(format!(
                "previous_response_id `{id}`: the chain is longer than {MAX_RESPONSE_CHAIN} \
                 responses; send the whole conversation in `input`"
            )));
        }
        let Some((parent, items)) = gw.recorder.response(&current) else {
            return Err(bad_request(format!(
                "previous_response_id `{current}` is not a response this server keeps \
                 (unknown, deleted with the conversation history, or made with `store: \
                 false`); send the whole conversation in `input`"
            )));
        };
        chain.push(items);
        next = parent;
    }
    Ok(chain
        .into_iter()
        .rev()
        .flat_map(|items| match items {
            Value::Array(items) => items,
            _ => Vec::new(),
        })
        .collect())
}

/// The id prefix of a response in `api` (`msg_…`, `chatcmpl-…`, `resp_…`).
fn response_id(api: Api) -> String {
    match api {
        Api::Anthropic => fresh_id("msg"),
        Api::OpenaiChat => fresh_id("chatcmpl").replacen('_', "-", 1),
        Api::OpenaiResponses => fresh_id("resp"),
    }
}

/// A request refused before it could be read (a body that is not JSON): a conversation
/// of its own records the error, so the reply carries an id like every other.
pub(crate) fn reject(gw: &Inner, api: Api, message: &str) -> MessagesReply {
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

/// The client's request in canonical form (a Responses request with the history its
/// `previous_response_id` continues).
fn decode(gw: &Inner, call: &MessagesCall) -> Result<Request, Fail> {
    match call.api {
        Api::Anthropic => anthropic::decode_request(&call.body),
        Api::OpenaiChat => chat::decode_request(&call.body),
        Api::OpenaiResponses => match call.body.get("previous_response_id") {
            None | Some(Value::Null) => responses::decode_request(&call.body),
            Some(Value::String(previous)) => {
                let mut items = response_history(gw, previous)?;
                items.extend(input_items(&call.body));
                let mut body = call.body.clone();
                if let Some(fields) = body.as_object_mut() {
                    fields.remove("previous_response_id");
                }
                body["input"] = Value::Array(items);
                responses::decode_request(&body)
            }
            Some(_) => return Err(bad_request("`previous_response_id` must be a string")),
        },
    }
    .map_err(|e| {
        bad_request(format!(
            "the request is not a valid {} request: {e}",
            call.api.title()
        ))
    })
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

    let mut run = Run {
        gw,
        api,
        conversation: conversation.to_owned(),
        credential: call.credential.filter(|_| gw.options.forward_client_key),
        base: request.clone(),
        offered: Vec::new(),
        client_names: HashSet::new(),
        ptc: None,
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

/// Replaces each `cordon_approval` block of the last user message by a placeholder tool
/// result (so pairing can be checked) and returns the decisions.
fn take_approvals(request: &mut Request) -> Result<Vec<Approval>, Fail> {
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

fn record_client_results(run: &Run<'_>, request: &Request) {
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

fn result_json(result: &ToolResult) -> Value {
    match &result.content {
        ToolResultContent::Text(t) => json!(t),
        ToolResultContent::Blocks(b) => Value::Array(anthropic::encode_blocks(b, true)),
    }
}

/// Ids of tool calls made by programs (their `caller` is a code-execution tool).
fn program_call_ids(messages: &[Message]) -> HashSet<String> {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) if is_program_call(c) => Some(c.id.clone()),
            _ => None,
        })
        .collect()
}

fn is_program_call(call: &ToolCall) -> bool {
    call.caller
        .as_ref()
        .is_some_and(|c| is_code_tool(&c.kind) || c.kind == "program")
}

/// The conversation as the model saw it: `server_tool_use` blocks are the model's function
/// calls, `*_tool_result` blocks their results (in the user message after the call), and
/// calls made by programs, with their results, are not there at all.
pub(crate) fn model_view(messages: &[Message], program_ids: &HashSet<String>) -> Vec<Message> {
    let mut flat: Vec<(Role, ContentBlock)> = Vec::new();
    let mut pending: Vec<ContentBlock> = Vec::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                let mut calls_here: HashSet<String> = HashSet::new();
                for block in &message.content {
                    match block {
                        ContentBlock::ServerToolCall {
                            id, name, input, ..
                        } => {
                            calls_here.insert(id.clone());
                            flat.push((
                                Role::Assistant,
                                ContentBlock::ToolCall(ToolCall {
                                    id: id.clone(),
                                    name: name.clone(),
                                    input: input.clone(),
                                    caller: None,
                                    extra: Extra::new(),
                                }),
                            ));
                        }
                        ContentBlock::ServerToolResult {
                            tool_use_id,
                            content,
                            ..
                        } => {
                            let result = ContentBlock::ToolResult(ToolResult {
                                call_id: tool_use_id.clone(),
                                content: ToolResultContent::Text(server_result_text(content)),
                                is_error: false,
                                extra: Extra::new(),
                            });
                            if calls_here.contains(tool_use_id) {
                                pending.push(result);
                            } else {
                                // The result of a call in an earlier message: that turn ends.
                                flat.extend(pending.drain(..).map(|b| (Role::User, b)));
                                flat.push((Role::User, result));
                            }
                        }
                        ContentBlock::ToolCall(c) if program_ids.contains(&c.id) => {}
                        other => flat.push((Role::Assistant, other.clone())),
                    }
                }
            }
            Role::User => {
                flat.extend(pending.drain(..).map(|b| (Role::User, b)));
                for block in &message.content {
                    match block {
                        ContentBlock::ToolResult(r) if program_ids.contains(&r.call_id) => {}
                        other => flat.push((Role::User, other.clone())),
                    }
                }
            }
        }
    }
    flat.extend(pending.drain(..).map(|b| (Role::User, b)));
    let mut out: Vec<Message> = Vec::new();
    for (role, block) in flat {
        match out.last_mut() {
            Some(last) if last.role == role => last.content.push(block),
            _ => out.push(Message::new(role, vec![block])),
        }
    }
    // Keep the client's string form of a lone text message (vendors render it the same).
    for (message, original) in out.iter_mut().zip(messages) {
        if original.content_was_string && message.content == original.content {
            message.content_was_string = true;
        }
    }
    out
}

/// The text a model reads for a code-execution result block shown to the client.
fn server_result_text(content: &Value) -> String {
    match content.get("type").and_then(Value::as_str) {
        Some("code_execution_result") => {
            let mut out = String::new();
            for key in ["stdout", "stderr"] {
                if let Some(text) = content[key].as_str().filter(|t| !t.is_empty()) {
                    out.push_str(&format!("{key}:\n{text}\n"));
                }
            }
            if content["return_code"].as_i64().unwrap_or(0) != 0 {
                out.push_str(&format!("return_code: {}\n", content["return_code"]));
            }
            if out.is_empty() {
                "(no output)".to_owned()
            } else {
                out.trim_end().to_owned()
            }
        }
        Some("code_execution_tool_result_error") => format!(
            "error: {}",
            content["error_code"].as_str().unwrap_or("unavailable")
        ),
        _ => content.to_string(),
    }
}

fn code_tool_description(ptc_tools: &ToolRegistry) -> String {
    let mut text = String::from(
        "Run Python code in a sandbox (no network, no files). The final expression's value \
         and everything printed are returned to you; nothing else is. Variables persist \
         between calls in the same container.",
    );
    if !ptc_tools.is_empty() {
        text.push_str(
            "\n\nThese tools are async functions in the program's globals: call them with \
             `await`, e.g. `r = await name(arg=value)`, and run several at once with \
             `await asyncio.gather(...)` (import asyncio). Their results reach only the \
             program: print what you need.\n",
        );
        for tool in ptc_tools.iter() {
            let d = &tool.declaration;
            text.push_str(&format!(
                "\n- `{}`: {} Input schema: {}",
                d.name,
                if d.description.is_empty() {
                    "(no description)"
                } else {
                    d.description.as_str()
                },
                d.input_schema
            ));
        }
    }
    text
}

/// The display a computer tool declares (`display_width_px`, `display_height_px`).
fn display_of(data: &Value) -> Option<(u64, u64)> {
    // Anthropic's `display_width_px`, OpenAI's `display_width`.
    let side =
        |anthropic: &str, openai: &str| data[anthropic].as_u64().or_else(|| data[openai].as_u64());
    Some((
        side("display_width_px", "display_width")?,
        side("display_height_px", "display_height")?,
    ))
}

/// Anthropic's computer tool as a function tool, for upstreams without the built-in.
fn computer_function(name: &str, data: &Value) -> ToolDefinition {
    let (width, height) = display_of(data).unwrap_or((1024, 768));
    ToolDefinition::Function(FunctionTool {
        name: name.to_owned(),
        description: Some(format!(
            "Use a computer with a {width}x{height} screen through screenshots and mouse and \
             keyboard actions. Every action returns a screenshot. Coordinates are [x, y] pixels \
             of the screenshot."
        )),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": [
                    "screenshot", "left_click", "right_click", "middle_click", "double_click",
                    "triple_click", "mouse_move", "left_click_drag", "type", "key", "scroll",
                    "wait", "cursor_position", "zoom"]},
                "coordinate": {"type": "array", "items": {"type": "integer"}},
                "start_coordinate": {"type": "array", "items": {"type": "integer"}},
                "text": {"type": "string"},
                "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                "scroll_amount": {"type": "integer"},
                "duration": {"type": "number"},
                "region": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["action"]
        }),
        allowed_callers: Vec::new(),
        extra: Extra::new(),
    })
}

fn text_turn(model: &str, text: &str) -> Turn {
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

/// What a model's tool call is.
enum Kind {
    Code,
    Computer,
    Operator,
    Client,
}

impl Run<'_> {
    async fn setup_tools(
        &mut self,
        tools: &[ToolDefinition],
        computer_header: Option<&str>,
        computer_id: &mut Option<String>,
    ) -> Result<(), Fail> {
        let mut ptc_kind: Option<String> = None;
        for tool in tools {
            if let ToolDefinition::BuiltIn { kind, .. } = tool
                && is_code_tool(kind)
            {
                ptc_kind = Some(kind.clone());
            }
        }
        let mut ptc_decls = Vec::new();
        for tool in tools {
            match tool {
                ToolDefinition::Function(f) => {
                    self.client_names.insert(f.name.clone());
                    let programmatic = ptc_kind.as_ref().is_some_and(|k| {
                        f.allowed_callers
                            .iter()
                            .any(|c| c == k || c == "programmatic")
                    });
                    if programmatic {
                        ptc_decls.push(ToolDeclaration {
                            name: f.name.clone(),
                            description: f.description.clone().unwrap_or_default(),
                            input_schema: f.input_schema.clone(),
                            policy: Policy::Allow,
                            handler: HandlerSpec::Client {},
                        });
                    }
                    let direct = f.allowed_callers.is_empty()
                        || f.allowed_callers.iter().any(|c| c == "direct");
                    if direct {
                        let mut offered = f.clone();
                        offered.allowed_callers.clear();
                        self.offered.push(ToolDefinition::Function(offered));
                    }
                }
                ToolDefinition::BuiltIn { kind, .. } if is_code_tool(kind) => {}
                ToolDefinition::BuiltIn { kind, data, vendor }
                    if kind.starts_with("computer_") || kind == "computer" =>
                {
                    let name = data["name"].as_str().unwrap_or("computer").to_owned();
                    match (computer_header, &self.gw.computers) {
                        (Some(binding), Some(computers)) => {
                            let id = if binding.starts_with("http://")
                                || binding.starts_with("https://")
                            {
                                computers
                                    .open(binding, display_of(data))
                                    .await
                                    .map_err(|e| {
                                        bad_request(format!(
                                            "x-cordon-computer: cannot open {binding}: {e}"
                                        ))
                                    })?
                            } else if computers.exists(binding).await {
                                binding.to_owned()
                            } else {
                                return Err(bad_request(format!(
                                    "x-cordon-computer: no open computer `{binding}` (POST /v1/computers opens one, or pass a URL)"
                                )));
                            };
                            *computer_id = Some(id.clone());
                            self.computer = Some((id, name.clone()));
                        }
                        (Some(_), None) => {
                            return Err(bad_request(
                                "x-cordon-computer: this server runs no computers",
                            ));
                        }
                        // Unbound: a client tool like any other.
                        (None, _) => {
                            self.client_names.insert(name.clone());
                        }
                    }
                    // The vendor's own tool reaches an upstream of that vendor when Cordon runs
                    // Anthropic's actions (bound) or the client runs the vendor's (unbound:
                    // `computer_call` items pass through as they are). Otherwise the model
                    // gets a function taking Anthropic's actions, which Cordon or the client
                    // runs.
                    let upstream_vendor = self.gw.upstream.api().vendor();
                    let bound = self.computer.is_some();
                    if *vendor == upstream_vendor && (!bound || *vendor == Vendor::Anthropic) {
                        self.offered.push(tool.clone());
                    } else {
                        self.offered.push(computer_function(&name, data));
                    }
                }
                other => self.offered.push(other.clone()),
            }
        }
        if let Some(kind) = ptc_kind {
            if !self.gw.containers.available() {
                return Err(bad_request(format!(
                    "`{kind}`: code execution is not available on this server"
                )));
            }
            let registry = ToolRegistry::new(ptc_decls)
                .map_err(|e| bad_request(format!("tools callable from code execution: {e}")))?;
            self.offered.push(ToolDefinition::Function(FunctionTool {
                name: CODE_TOOL.to_owned(),
                description: Some(code_tool_description(&registry)),
                input_schema: json!({
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "Python code to run"}},
                    "required": ["code"],
                }),
                allowed_callers: Vec::new(),
                extra: Extra::new(),
            }));
            self.ptc = Some(Ptc {
                kind,
                tools: Dispatcher::new(Arc::new(registry)),
            });
        }
        if let Some(operator) = &self.gw.operator {
            for tool in operator.registry().iter() {
                let d = &tool.declaration;
                // An `ask` tool needs an approval, which only the Messages API can carry
                // (`cordon_approval`): other clients are not offered it.
                let unanswerable = d.policy == Policy::Ask && self.api != Api::Anthropic;
                if self.client_names.contains(&d.name) || d.policy == Policy::Deny || unanswerable {
                    continue;
                }
                self.offered.push(operator_function(d));
            }
        }
        Ok(())
    }

    fn kind_of(&self, call: &ToolCall) -> Kind {
        if self.ptc.is_some() && call.name == CODE_TOOL {
            return Kind::Code;
        }
        if let Some((_, name)) = &self.computer
            && *name == call.name
        {
            return Kind::Computer;
        }
        if !self.client_names.contains(&call.name)
            && self
                .gw
                .operator
                .as_ref()
                .is_some_and(|o| o.registry().get(&call.name).is_some())
        {
            return Kind::Operator;
        }
        Kind::Client
    }

    fn record(&self, entry: Entry) {
        self.gw.recorder.record(&self.conversation, entry);
    }

    /// Resumes the container's suspended program with the results in the last user
    /// message. Returns the reply when the program suspends again.
    async fn resume_program(
        &mut self,
        request: &Request,
        view: &mut Vec<Message>,
    ) -> Result<Option<Turn>, Fail> {
        let Some(container) = self.container.clone() else {
            return Ok(None);
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
        let (outcome, still) = ptc::resume(running, results)
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
                    kind: "code_execution_tool_result".into(),
                    tool_use_id: server_id.clone(),
                    content: ptc::client_result(&result),
                    extra: Extra::new(),
                });
                push_user(
                    view,
                    ContentBlock::ToolResult(ToolResult {
                        call_id: server_id,
                        content: ToolResultContent::Text(ptc::model_text(&result)),
                        is_error: result.error.is_some(),
                        extra: Extra::new(),
                    }),
                );
                Ok(None)
            }
        }
    }

    /// Runs approved calls and denies the others, replacing their placeholders.
    async fn apply_approvals(
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
            let Some(asked) = self.gw.asks.kept.get(&scoped(&self.conversation, id)) else {
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
            let Some(asked) = self.gw.asks.kept.remove(&scoped(&self.conversation, id)) else {
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
                let mut text = "the user denied this call".to_owned();
                if let Some(reason) = approval.reason.as_deref().filter(|r| !r.is_empty()) {
                    text.push_str(&format!(": {reason}"));
                }
                error_result(&call.id, text)
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

    async fn rounds(
        &mut self,
        mut view: Vec<Message>,
    ) -> Result<(Turn, Option<&'static str>), Fail> {
        let max = self.gw.options.max_tool_rounds;
        for round in 1..=max {
            let request = Request {
                messages: view.clone(),
                tools: self.offered.clone(),
                ..self.base.clone()
            };
            let started = Instant::now();
            let mut turn = self
                .gw
                .upstream
                .call(&request, self.credential.as_ref())
                .await
                .map_err(|e| {
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
        let text =
            format!("Stopped: the tool-round limit ({max} model turns per request) was reached.");
        let mut turn = text_turn(&self.base.model, &text);
        turn.id = response_id(self.api);
        turn.usage = self.usage.clone();
        turn.container = self.container_info();
        Ok((turn, Some("max_tool_rounds")))
    }

    fn container_info(&self) -> Option<cordon_protocol::conversation::Container> {
        self.container
            .as_ref()
            .map(|c| cordon_protocol::conversation::Container {
                id: c.id.clone(),
                expires_at: Some(c.expires_at()),
            })
    }

    fn finish_turn(&self, turn: Turn, content: Vec<ContentBlock>, stop: StopReason) -> Turn {
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
    fn reply_turn(
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

    fn program_blocks(
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

    /// Runs the server-tool calls of one model turn.
    async fn run_calls(&mut self, turn: &mut Turn, calls: Vec<ToolCall>) -> Result<Step, Fail> {
        // Code calls get `srvtoolu_` ids, in the model's view and the client's alike.
        let mut renamed: HashMap<String, String> = HashMap::new();
        for call in &calls {
            if matches!(self.kind_of(call), Kind::Code) {
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
                Kind::Code => "code_execution",
                Kind::Computer => "computer",
                Kind::Operator => "server",
                Kind::Client => "client",
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
                Kind::Client => {
                    to_client.insert(call.id.clone());
                }
                Kind::Operator => {
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
                        self.record(
                            Entry::new(
                                "approval_required",
                                json!({"name": call.name, "reason": format!("`{}` has policy ask", call.name)}),
                            )
                            .call(&call.id),
                        );
                        self.gw.asks.kept.insert(
                            &scoped(&self.conversation, &call.id),
                            Asked {
                                name: call.name.clone(),
                                input: call.input.clone(),
                                computer: false,
                            },
                        );
                        to_client.insert(call.id.clone());
                        continue;
                    } else {
                        results.insert(call.id.clone(), self.run_operator(call, false).await);
                        inline.insert(call.id.clone());
                    }
                }
                Kind::Computer => match self.run_computer(call, false).await {
                    Ok(result) => {
                        results.insert(call.id.clone(), result);
                        inline.insert(call.id.clone());
                    }
                    Err(reason) => {
                        self.record(
                            Entry::new(
                                "approval_required",
                                json!({"name": call.name, "reason": reason}),
                            )
                            .call(&call.id),
                        );
                        self.gw.asks.kept.insert(
                            &scoped(&self.conversation, &call.id),
                            Asked {
                                name: call.name.clone(),
                                input: call.input.clone(),
                                computer: true,
                            },
                        );
                        to_client.insert(call.id.clone());
                        continue;
                    }
                },
                Kind::Code => {
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
            self.gw.stash.keep(
                &scoped(&self.conversation, &key.id),
                Aside {
                    reasoning,
                    calls: ran,
                    results: ran_results,
                },
            );
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

    /// Runs one operator tool call (validated, `allow` or approved `ask`).
    async fn run_operator(&self, call: &ToolCall, approved: bool) -> ToolResult {
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

    /// Runs one computer action. `Err` when a gate asks (the call goes to the client).
    async fn run_computer(&self, call: &ToolCall, approved: bool) -> Result<ToolResult, String> {
        let (Some(computers), Some((id, _))) = (&self.gw.computers, &self.computer) else {
            return Ok(error_result(&call.id, "no computer is bound".to_owned()));
        };
        match computers.act(id, &call.input, approved).await {
            Ok(ComputerOutcome::Done {
                screenshot,
                text,
                is_error,
            }) => {
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

    /// Runs a code call. Returns the model's result (when the program ended), the blocks
    /// shown to the client, and whether the program waits for the client.
    async fn run_code(&mut self, call: &ToolCall) -> (Option<ToolResult>, Vec<ContentBlock>, bool) {
        let Some(ptc) = &self.ptc else {
            return (None, Vec::new(), false);
        };
        let kind = ptc.kind.clone();
        let tools = ptc.tools.clone();
        let server_call = ContentBlock::ServerToolCall {
            id: call.id.clone(),
            name: CODE_TOOL.to_owned(),
            input: call.input.clone(),
            extra: Extra::new(),
        };
        let refused = |code: &str, text: String| {
            let shown = vec![
                server_call.clone(),
                ContentBlock::ServerToolResult {
                    kind: "code_execution_tool_result".into(),
                    tool_use_id: call.id.clone(),
                    content: json!({"type": "code_execution_tool_result_error", "error_code": code}),
                    extra: Extra::new(),
                },
            ];
            (Some(error_result(&call.id, text)), shown, false)
        };
        let Some(code) = call.input.get("code").and_then(Value::as_str) else {
            return refused(
                "invalid_tool_input",
                "the input needs `code` (a string of Python)".into(),
            );
        };
        let container = match &self.container {
            Some(c) => c.clone(),
            None => match self.gw.containers.create() {
                Ok(c) => {
                    self.container = Some(c.clone());
                    c
                }
                Err(e) => return refused("unavailable", e.to_string()),
            },
        };
        let mut slot = container.running.lock().await;
        if slot.is_some() {
            return refused(
                "too_many_requests",
                "the container is still running another program that waits for tool results".into(),
            );
        }
        let (outcome, running) = container.run(code, tools, &call.id, &kind).await;
        *slot = running;
        drop(slot);
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
                        kind: "code_execution_tool_result".into(),
                        tool_use_id: call.id.clone(),
                        content: ptc::client_result(&result),
                        extra: Extra::new(),
                    },
                ];
                let model = ToolResult {
                    call_id: call.id.clone(),
                    content: ToolResultContent::Text(ptc::model_text(&result)),
                    is_error: result.error.is_some(),
                    extra: Extra::new(),
                };
                (Some(model), shown, false)
            }
        }
    }
}

/// An operator tool as the model is offered it.
pub(crate) fn operator_function(declaration: &ToolDeclaration) -> ToolDefinition {
    ToolDefinition::Function(FunctionTool {
        name: declaration.name.clone(),
        description: (!declaration.description.is_empty()).then(|| declaration.description.clone()),
        input_schema: declaration.input_schema.clone(),
        allowed_callers: Vec::new(),
        extra: Extra::new(),
    })
}

/// Runs one operator tool call (`allow`, or an `ask` one the user `approved`); its failures
/// are the model's to read.
pub(crate) async fn call_operator(
    gw: &Inner,
    conversation: &str,
    call: &ToolCall,
    approved: bool,
) -> ToolResult {
    let Some(operator) = gw.operator.as_ref() else {
        return error_result(&call.id, "no operator tools on this server".to_owned());
    };
    let mut ctx = CallContext::new(conversation.to_owned());
    if approved {
        ctx.approver = Arc::new(ApproveListed::new([call.name.clone()]));
    }
    let done = operator
        .call_batch(&ctx, vec![(call.name.clone(), call.input.to_string())])
        .await;
    match done.into_iter().next().map(|d| d.result) {
        Some(Ok(text)) => ToolResult {
            call_id: call.id.clone(),
            content: ToolResultContent::Text(text),
            is_error: false,
            extra: Extra::new(),
        },
        Some(Err(failure)) => error_result(&call.id, failure.message),
        None => error_result(&call.id, "the tool did not run".to_owned()),
    }
}

/// What of a turn handed to the client the client never sees: the server calls that ran
/// inline with their results, and reasoning in another vendor's shape.
#[derive(Debug, Clone)]
struct Aside {
    reasoning: Vec<ContentBlock>,
    calls: Vec<ToolCall>,
    results: Vec<ToolResult>,
}

/// [`Aside`] parts of turns whose calls went to the client, keyed by conversation and the
/// id of that turn's first client call. Bounded (those turns forgotten reach the model
/// without them).
#[derive(Debug)]
pub(crate) struct Stash {
    kept: Kept<Aside>,
}

const STASH_MAX: usize = 10_000;

impl Default for Stash {
    fn default() -> Self {
        Stash {
            kept: Kept::new(STASH_MAX),
        }
    }
}

impl Stash {
    fn keep(&self, key: &str, kept: Aside) {
        self.kept.insert(key, kept);
    }

    /// Puts kept reasoning and calls back into the assistant message holding their key
    /// (reasoning first, calls last), and the results at the start of the user message
    /// after it.
    fn restore(&self, conversation: &str, view: &mut [Message]) {
        if self.kept.is_empty() {
            return;
        }
        for i in 0..view.len() {
            if view[i].role != Role::Assistant {
                continue;
            }
            let found = view[i].content.iter().find_map(|b| match b {
                ContentBlock::ToolCall(c) => self.kept.get(&scoped(conversation, &c.id)),
                _ => None,
            });
            let Some(Aside {
                reasoning,
                calls,
                results,
            }) = found
            else {
                continue;
            };
            if view.get(i + 1).is_none_or(|m| m.role != Role::User) {
                continue;
            }
            view[i].content.splice(0..0, reasoning);
            view[i]
                .content
                .extend(calls.into_iter().map(ContentBlock::ToolCall));
            let next = &mut view[i + 1].content;
            for (at, result) in results.into_iter().enumerate() {
                next.insert(at, ContentBlock::ToolResult(result));
            }
        }
    }
}

/// A call handed to the client for approval, as the model made it. Only these can be
/// approved, each once, and what runs is this input, not the client's copy of it.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    name: String,
    input: Value,
    computer: bool,
}

/// Calls waiting for a `cordon_approval`, by conversation and call id.
#[derive(Debug)]
pub(crate) struct Asks {
    kept: Kept<Asked>,
}

const ASKS_MAX: usize = 10_000;

impl Default for Asks {
    fn default() -> Self {
        Asks {
            kept: Kept::new(ASKS_MAX),
        }
    }
}

/// What one model turn's calls lead to.
enum Step {
    /// The client must act: the response content.
    Client(Vec<ContentBlock>),
    /// Everything ran: the assistant content and the results for the next round.
    Continue(Vec<ContentBlock>, Vec<ContentBlock>),
}

pub(crate) fn error_result(call_id: &str, text: String) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        content: ToolResultContent::Text(text),
        is_error: true,
        extra: Extra::new(),
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

fn push_user(view: &mut Vec<Message>, block: ContentBlock) {
    match view.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(block),
        _ => view.push(Message::new(Role::User, vec![block])),
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
