//! A model's tool calls as both front doors run them: which tool a call is for, operator
//! tools, programs in a container, and the result blocks the model reads.

use std::sync::Arc;

use cordon_core::{ApproveListed, CallContext, Dispatcher};
use cordon_protocol::conversation::{
    CODE_TOOL, ContentBlock, Extra, FunctionTool, Message, Role, ToolCall, ToolDefinition,
    ToolResult, ToolResultContent,
};
use cordon_protocol::execution::{ExecutionResult, Language};
use cordon_protocol::tool::ToolDeclaration;
use serde_json::{Value, json};

use crate::code_output::model_text;
use crate::containers::{Container, ContainerError, Outcome};
use crate::gateway::Inner;

/// Who runs a model's tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallTarget {
    /// The code tool: a program in a container.
    Code,
    /// The bound computer's tool.
    Computer,
    /// A tool search (`tool_search_tool_regex_*` / `_bm25_*`), run by Cordon.
    ToolSearch,
    /// An operator tool (no client tool of its name shadows it).
    Operator,
    /// A tool the client declared.
    Client,
    /// A tool nobody declared.
    Undeclared,
}

/// Which tool the call `name` is for: the code tool (`code`, its name when offered),
/// the bound `computer` tool, a tool search (one of `searches`), an operator tool (unless
/// the client declares one of that name: a client tool shadows an operator tool), a client
/// tool, or none.
pub(crate) fn classify(
    name: &str,
    code: Option<&str>,
    computer: Option<&str>,
    searches: &[String],
    client_declares: impl Fn(&str) -> bool,
    operator: Option<&Dispatcher>,
) -> CallTarget {
    if code == Some(name) {
        return CallTarget::Code;
    }
    if computer == Some(name) {
        return CallTarget::Computer;
    }
    if searches.iter().any(|s| s == name) {
        return CallTarget::ToolSearch;
    }
    if !client_declares(name) && operator.is_some_and(|o| o.registry().get(name).is_some()) {
        return CallTarget::Operator;
    }
    if client_declares(name) {
        CallTarget::Client
    } else {
        CallTarget::Undeclared
    }
}

/// Adds `blocks` to the last message when it is the user's, else as a new user message.
pub(crate) fn push_user(messages: &mut Vec<Message>, blocks: Vec<ContentBlock>) {
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.extend(blocks),
        _ => messages.push(Message::new(Role::User, blocks)),
    }
}

pub(crate) fn error_result(call_id: &str, text: String) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        content: ToolResultContent::Text(text),
        is_error: true,
        extra: Extra::new(),
    }
}

/// The result of a call the user denied (with their reason, when they gave one).
pub(crate) fn denied_result(call_id: &str, reason: Option<&str>) -> ToolResult {
    let mut text = "the user denied this call".to_owned();
    if let Some(reason) = reason.filter(|r| !r.is_empty()) {
        text.push_str(&format!(": {reason}"));
    }
    error_result(call_id, text)
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

/// The code tool as the model is offered it: Python code to run, described by
/// `description`.
pub(crate) fn code_function(description: String) -> ToolDefinition {
    program_function(CODE_TOOL, description, Language::Python)
}

/// A code tool as the model is offered it (`name`): a program in `language` to run,
/// described by `description`.
pub(crate) fn program_function(
    name: &str,
    description: String,
    language: Language,
) -> ToolDefinition {
    let what = match language {
        Language::Javascript => "JavaScript program to run (top-level `await` allowed)",
        _ => "Python code to run",
    };
    ToolDefinition::Function(FunctionTool {
        name: name.to_owned(),
        description: Some(description),
        input_schema: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": what}},
            "required": ["code"],
        }),
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

/// What the model reads for a code call whose input has no program.
pub(crate) const NO_CODE: &str = "the input needs `code` (a string: the program to run)";

/// What the model reads for a code call while its container holds a program that waits
/// for tool results.
pub(crate) const CONTAINER_BUSY: &str =
    "the container is still running another program that waits for tool results";

/// The program of a code call: its input's `code`.
pub(crate) fn code_of(call: &ToolCall) -> Option<&str> {
    call.input.get("code").and_then(Value::as_str)
}

/// Why a program did not start in its container.
#[derive(Debug)]
pub(crate) enum ProgramRefused {
    /// The container holds a program that waits for tool results: it runs no other.
    Busy,
    /// The container was at rest and could not be brought back.
    Lost(ContainerError),
}

impl ProgramRefused {
    /// What the model reads.
    pub(crate) fn message(&self) -> String {
        match self {
            ProgramRefused::Busy => CONTAINER_BUSY.to_owned(),
            ProgramRefused::Lost(error) => error.to_string(),
        }
    }
}

/// Runs `code` for the code call `call_id` (of type `kind`) in `container`, with `tools`
/// callable from it, until it ends or suspends on client tools (it then waits in the
/// container for their results).
pub(crate) async fn run_program(
    container: &Container,
    code: &str,
    tools: Dispatcher,
    call_id: &str,
    kind: &str,
) -> Result<Outcome, ProgramRefused> {
    let mut slot = container.running.lock().await;
    if slot.is_some() {
        return Err(ProgramRefused::Busy);
    }
    let (outcome, running) = container
        .run(code, tools, call_id, kind)
        .await
        .map_err(ProgramRefused::Lost)?;
    *slot = running;
    drop(slot);
    Ok(outcome)
}

/// The model's result for the code call `call_id` whose program ended with `result`.
pub(crate) fn program_result(call_id: &str, result: &ExecutionResult) -> ToolResult {
    ToolResult {
        call_id: call_id.to_owned(),
        content: ToolResultContent::Text(model_text(result)),
        is_error: result.error.is_some(),
        extra: Extra::new(),
    }
}
