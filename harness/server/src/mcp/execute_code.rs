//! The `execute_code` tool: its description and schema, one run (in a REPL session or a
//! fresh workspace) with progress, cancellation, `user_ask` and approvals on the side, and
//! the tool result the model reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cordon_core::broker::ApprovalRequest;
use cordon_protocol::execution::{
    ExecutionEvent, ExecutionResult, ExecutionStatus, Language, ResultEncoding,
};
use cordon_protocol::tool::Locus;
use cordon_sandbox::ExecutionRequest;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, Tool};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use super::approval::ElicitingApprover;
use super::server::McpServer;
use super::{files, user_ask};

/// Interval of progress notifications during a run.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// Characters of stdout/stderr put into the text content (the whole output is in
/// `structuredContent`).
const TEXT_OUTPUT_CHARS: usize = 20_000;

impl McpServer {
    pub(super) fn execute_code_tool(&self) -> Tool {
        let names = self.inner.dispatcher.registry().names();
        let tools = if names.is_empty() {
            "No tools are declared.".to_owned()
        } else {
            format!(
                "Tools callable from the code (as global async functions, e.g. `await {}(...)`): {}.",
                names[0],
                names.join(", ")
            )
        };
        let description = format!(
            "Run Python or JavaScript in an isolated WebAssembly sandbox (no network or \
             environment; files only in /workspace, the working directory) and return stdout, \
             stderr, the value of the last expression and the files the program wrote. Pass \
             `files` to put files in /workspace first, `session_id` to keep variables and files \
             between calls (a REPL). {tools}"
        );
        let schema = json!({
            "type": "object",
            "properties": {
                "language": {
                    "type": "string", "enum": ["python", "python-lite", "javascript"], "default": "python",
                    "description": "Language of `code`: `python` (CPython 3.15 with numpy, pandas and matplotlib; numpy's default integer is 32-bit, pass dtype=np.int64 for large sums), `python-lite` (RustPython: faster start, standard library only) or `javascript`."
                },
                "code": {"type": "string", "description": "The program. Its last expression is the result."},
                "session_id": {
                    "type": "string",
                    "description": "Any id you choose: calls with the same id share variables, imports and files."
                },
                "files": {
                    "type": "object",
                    "description": "Files to put in /workspace before the code runs: relative path → its text, or {\"base64\": \"…\"} for bytes.",
                    "additionalProperties": {
                        "anyOf": [
                            {"type": "string"},
                            {"type": "object", "properties": {"base64": {"type": "string"}}, "required": ["base64"], "additionalProperties": false},
                            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}
                        ]
                    }
                }
            },
            "required": ["code"],
            "additionalProperties": false
        });
        let schema = match schema {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        Tool::new("execute_code", description, schema)
    }

    pub(super) async fn execute_code(
        &self,
        arguments: serde_json::Map<String, Value>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let code = match arguments.get("code") {
            Some(Value::String(code)) => code.clone(),
            _ => {
                return Err(McpError::invalid_params(
                    "`code` (a string) is required",
                    None,
                ));
            }
        };
        let language = match arguments.get("language") {
            None | Some(Value::Null) => Language::Python,
            Some(Value::String(name)) => Language::parse(name).ok_or_else(|| {
                McpError::invalid_params(
                    format!("unknown language {name:?}; use python, python-lite or javascript"),
                    None,
                )
            })?,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "`language` must be a string",
                    None,
                ));
            }
        };
        if let Some(key) = arguments
            .keys()
            .find(|key| !matches!(key.as_str(), "code" | "language" | "session_id" | "files"))
        {
            return Err(McpError::invalid_params(
                format!(
                    "unknown argument `{key}`; execute_code takes language, code, session_id, files"
                ),
                None,
            ));
        }
        let approver = Arc::new(ElicitingApprover {
            peer: context.peer.clone(),
            elicitation: context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form),
            refused_unasked: AtomicBool::new(false),
        });
        // No approver on the request: `ask` calls park on the execution's own broker and
        // are decided below (the same path for one-off runs and shared sessions, whose
        // approver would otherwise be fixed when the session is made).
        let session = match arguments.get("session_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => match self.session(id, language) {
                Ok(session) => Some(session),
                Err(message) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(message)]));
                }
            },
            Some(_) => {
                return Err(McpError::invalid_params(
                    "`session_id` must be a string",
                    None,
                ));
            }
        };
        let workspace = session
            .as_ref()
            .and_then(|session| session.workspace().cloned())
            .unwrap_or_else(|| self.new_workspace());
        if let Some(files) = arguments.get("files")
            && let Err(message) = files::write_inputs(&workspace, files)
        {
            return Ok(CallToolResult::error(vec![ContentBlock::text(message)]));
        }
        let before = files::snapshot(&workspace);
        let execution = match &session {
            Some(session) => session.execute(code),
            None => self.inner.sandbox.execute(
                ExecutionRequest::new(language, code, self.inner.dispatcher.clone())
                    .limits(self.inner.limits)
                    .workspace(workspace.clone()),
            ),
        };

        let (mut events, control, done) = execution.into_parts();
        let progress_token = context.meta.get_progress_token();
        let started = Instant::now();
        let mut ticker =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut cancelled = false;
        let mut output_bytes = 0usize;
        let result = loop {
            tokio::select! {
                () = context.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    control.cancel();
                }
                event = events.recv() => match event {
                    Some(ExecutionEvent::Completed(result)) => break result,
                    Some(ExecutionEvent::OutputDelta { text, .. }) => output_bytes += text.len(),
                    Some(ExecutionEvent::ToolCall { id, name, input, locus: Locus::Client, .. }) if name == "user_ask" => {
                        let peer = context.peer.clone();
                        let elicitation = approver.elicitation;
                        let control = control.clone();
                        tokio::spawn(async move {
                            let answer = user_ask::answer(&peer, elicitation, id, &input).await;
                            // Refused only when the call stopped waiting (timeout, cancel).
                            let _ = control.submit_tool_results(vec![answer]);
                        });
                    }
                    Some(ExecutionEvent::ApprovalRequired { approval_id, call_id, tool, input, reason }) => {
                        let request = ApprovalRequest { approval_id, call_id, tool, input, reason };
                        let approver = approver.clone();
                        let control = control.clone();
                        // Asked on the side: the run must stay cancellable while a human
                        // thinks, and several calls may wait at once.
                        tokio::spawn(async move {
                            let decision = approver.ask(&request).await;
                            // Unknown means the call stopped waiting (timeout, cancel).
                            let _ = control.decide(&request.approval_id, decision);
                        });
                    }
                    Some(_) => {}
                    None => break done.await,
                },
                _ = ticker.tick(), if progress_token.is_some() => {
                    if let Some(token) = &progress_token {
                        let seconds = started.elapsed().as_secs_f64();
                        let mut param = ProgressNotificationParam::new(token.clone(), seconds.floor());
                        param.message = Some(format!(
                            "running for {seconds:.0} s; {output_bytes} bytes of output so far"
                        ));
                        // A client that stopped listening does not stop the run.
                        let _ = context.peer.notify_progress(param).await;
                    }
                }
            }
        };
        let mut answer = tool_result(&result, approver.refused_unasked.load(Ordering::SeqCst));
        files::attach(
            &mut answer,
            &workspace,
            &files::written(&workspace, &before),
        );
        Ok(answer)
    }
}

/// The tool result for an execution: text for the model, the whole result as
/// `structuredContent`, `isError` unless it completed.
fn tool_result(result: &ExecutionResult, refused_unasked: bool) -> CallToolResult {
    let mut text = String::new();
    if !result.stdout.is_empty() {
        text.push_str(&clip(&result.stdout));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !result.stderr.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&clip(&result.stderr));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    match result.result_encoding {
        Some(ResultEncoding::Json) => text.push_str(&format!("[result] {}\n", result.result)),
        Some(ResultEncoding::Repr) => text.push_str(&format!(
            "[result] {}\n",
            result.result.as_str().unwrap_or_default()
        )),
        None => {}
    }
    if let Some(error) = &result.error {
        match result.status {
            ExecutionStatus::LimitExceeded => text.push_str(&format!(
                "[limit exceeded: {}] {}\n",
                result.limit.map(|limit| limit.as_str()).unwrap_or("?"),
                error.message
            )),
            _ if !error.traceback.is_empty() => {
                text.push_str(&error.traceback);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            _ => text.push_str(&format!("{}: {}\n", error.error_type, error.message)),
        }
    }
    if result.truncated {
        text.push_str("[note] output was cut to fit max_output_bytes\n");
    }
    if refused_unasked {
        text.push_str(
            "[note] calls to tools that need approval were refused: this MCP client does not \
             support elicitation, so nobody could be asked\n",
        );
    }
    if text.is_empty() {
        text.push_str(&format!("[{}] no output\n", result.status.as_str()));
    }
    let structured = serde_json::to_value(result).unwrap_or(Value::Null);
    let mut tool_result = if result.status == ExecutionStatus::Completed {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    tool_result.structured_content = Some(structured);
    tool_result
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(TEXT_OUTPUT_CHARS) {
        Some((at, _)) => format!(
            "{}… [{} more bytes in structuredContent]",
            &text[..at],
            text.len() - at
        ),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordon_protocol::execution::{ErrorInfo, Usage};

    #[test]
    fn errors_are_tool_results_with_is_error() {
        let result = ExecutionResult {
            status: ExecutionStatus::Error,
            limit: None,
            stdout: "before\n".into(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "ValueError".into(),
                message: "bad".into(),
                traceback: "Traceback …\nValueError: bad".into(),
            }),
            tool_calls: vec![],
            usage: Usage::default(),
            truncated: false,
        };
        let tool = tool_result(&result, false);
        assert_eq!(tool.is_error, Some(true));
        assert_eq!(
            tool.structured_content
                .as_ref()
                .map(|v| v["status"].clone()),
            Some(json!("error"))
        );
    }

    #[test]
    fn truncated_results_say_so() {
        let mut result = ExecutionResult {
            status: ExecutionStatus::Error,
            limit: None,
            stdout: String::new(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "ValueError".into(),
                message: "xxx… [29999000 bytes cut: max_output_bytes]".into(),
                traceback: String::new(),
            }),
            tool_calls: vec![],
            usage: Usage::default(),
            truncated: true,
        };
        let text = |result: &ExecutionResult| format!("{:?}", tool_result(result, false).content);
        assert!(text(&result).contains("cut to fit max_output_bytes"));
        result.truncated = false;
        assert!(!text(&result).contains("[note] output was cut"));
    }
}
