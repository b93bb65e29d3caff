//! Executions: their limits, the events they emit, and how they end.
//!
//! The JSON shapes here are the contract of `cordon run --json`, the HTTP API's events and
//! the MCP tool results, so field names are stable.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::Locus;

/// Guest languages.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Language {
    /// Python 3.15 (CPython for wasm32-wasip1) with numpy, pandas and matplotlib loaded.
    #[serde(alias = "cpython")]
    Python,
    /// Python 3 on RustPython: starts faster and idles smaller than `python`, but has no
    /// C extensions (no numpy, pandas, matplotlib) and runs loops at a quarter of the speed.
    #[serde(rename = "python-lite", alias = "python_lite", alias = "rustpython")]
    PythonLite,
    /// JavaScript (QuickJS, ES2023).
    #[serde(alias = "js")]
    Javascript,
}

impl Language {
    /// Parses `python`/`py`/`python3`/`cpython`, `python-lite`/`rustpython`,
    /// `javascript`/`js` (case-insensitive).
    pub fn parse(name: &str) -> Option<Language> {
        match name.to_ascii_lowercase().as_str() {
            "python" | "py" | "python3" | "cpython" => Some(Language::Python),
            "python-lite" | "python_lite" | "pylite" | "rustpython" => Some(Language::PythonLite),
            "javascript" | "js" | "mjs" | "node" => Some(Language::Javascript),
            _ => None,
        }
    }

    /// Canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::PythonLite => "python-lite",
            Language::Javascript => "javascript",
        }
    }

    /// Every language, in the order help texts list them.
    pub const ALL: [Language; 3] = [Language::Python, Language::PythonLite, Language::Javascript];
}

/// Every limit of one execution. Each is enforced and named in the result when hit.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory of the guest, in bytes.
    pub memory_bytes: u64,
    /// CPU time the execution may use, in milliseconds.
    pub cpu_ms: u64,
    /// Elapsed time, in milliseconds, not counting time suspended on client tools (those
    /// waits are bounded by `client_tool_timeout_ms` instead).
    pub wall_ms: u64,
    /// Everything the result carries, in bytes: stdout + stderr + the final value, the
    /// error's message and traceback, and the inputs recorded in `tool_calls`. What does
    /// not fit is cut and the result says `truncated`.
    pub max_output_bytes: u64,
    /// Tool calls per execution.
    pub max_tool_calls: u64,
    /// Size of one tool input or one tool result, in bytes of JSON.
    pub max_payload_bytes: u64,
    /// How long a suspended execution waits for client-tool results.
    pub client_tool_timeout_ms: u64,
    /// Bytes of file contents the workspace (`/workspace`) may hold.
    pub workspace_bytes: u64,
    /// Files and directories the workspace may hold.
    pub workspace_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 256 * 1024 * 1024,
            cpu_ms: 10_000,
            wall_ms: 30_000,
            max_output_bytes: 1024 * 1024,
            max_tool_calls: 1_000,
            max_payload_bytes: 1024 * 1024,
            client_tool_timeout_ms: 300_000,
            workspace_bytes: 64 * 1024 * 1024,
            workspace_files: 1_000,
        }
    }
}

/// Which limit stopped an execution.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitKind {
    /// `memory_bytes`.
    Memory,
    /// `cpu_ms`.
    Cpu,
    /// `wall_ms`.
    Wall,
    /// `max_output_bytes`.
    Output,
    /// `max_tool_calls`.
    ToolCalls,
    /// `max_payload_bytes`.
    Payload,
}

impl LimitKind {
    /// The name used in results and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Memory => "memory",
            LimitKind::Cpu => "cpu",
            LimitKind::Wall => "wall",
            LimitKind::Output => "output",
            LimitKind::ToolCalls => "tool_calls",
            LimitKind::Payload => "payload",
        }
    }
}

/// How an execution ended.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExecutionStatus {
    /// The code ran to its end.
    Completed,
    /// The code raised, failed to compile, or the guest faulted.
    Error,
    /// A limit stopped it; `limit` says which.
    LimitExceeded,
    /// The caller cancelled it.
    Cancelled,
    /// The process serving it went away before it ended (before replicas: now
    /// `interrupted`; kept so stored results still read).
    Expired,
    /// The process (replica) running it stopped before it ended — it exited, was killed,
    /// or stopped renewing its lease; the final `execution.completed` says which replica.
    Interrupted,
}

impl ExecutionStatus {
    /// The name used in results.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Completed => "completed",
            ExecutionStatus::Error => "error",
            ExecutionStatus::LimitExceeded => "limit_exceeded",
            ExecutionStatus::Cancelled => "cancelled",
            ExecutionStatus::Expired => "expired",
            ExecutionStatus::Interrupted => "interrupted",
        }
    }
}

/// An exception (or fault) that ended an execution.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Exception type, e.g. `ValueError`, `SyntaxError`, `ToolError`, or a Cordon kind
    /// such as `LimitExceeded` or `GuestFault`.
    #[serde(rename = "type")]
    pub error_type: String,
    /// What went wrong.
    pub message: String,
    /// Formatted traceback (empty when there is none).
    #[serde(default)]
    pub traceback: String,
}

/// How the final expression's value is encoded in [`ExecutionResult::result`].
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultEncoding {
    /// `result` is the value itself, as JSON.
    Json,
    /// The value has no JSON form; `result` is a string holding its `repr`.
    Repr,
}

/// One tool call as recorded in a result.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Call id (also on the `tool.call` and `tool.result` events).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Input as the guest sent it (`null` when it was not valid JSON, or when it did not
    /// fit in `max_output_bytes`; the result then says `truncated`).
    pub input: Value,
    /// Whether the guest received an error for it.
    pub is_error: bool,
    /// From dispatch to result, in microseconds.
    pub duration_us: u64,
    /// Where it ran.
    pub locus: Locus,
}

/// Resources an execution used.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Elapsed milliseconds, including waits.
    pub wall_ms: u64,
    /// CPU milliseconds spent on this execution.
    pub cpu_ms: u64,
    /// Largest linear memory of the guest, in bytes.
    pub peak_memory_bytes: u64,
}

/// The end state of an execution: what `cordon run --json` prints and what the
/// `execution.completed` event carries.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionResult {
    /// How it ended.
    pub status: ExecutionStatus,
    /// Which limit was hit, when `status` is `limit_exceeded`.
    #[serde(default)]
    pub limit: Option<LimitKind>,
    /// Everything written to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything written to stderr (lossy UTF-8).
    pub stderr: String,
    /// The final expression's value (see `result_encoding`), or `null`.
    pub result: Value,
    /// How `result` is encoded; absent when there is no result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_encoding: Option<ResultEncoding>,
    /// The exception, limit or fault that ended it.
    #[serde(default)]
    pub error: Option<ErrorInfo>,
    /// Every tool call, in dispatch order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Resources used.
    pub usage: Usage,
    /// Whether something was cut to fit `max_output_bytes`: stdout or stderr, the error's
    /// message or traceback, or tool-call inputs (recorded as `null`). Absent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub truncated: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Which output stream a delta belongs to.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// Who made a tool call: the execution whose code called it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The execution's id.
    pub execution_id: String,
}

/// Something that happened during an execution, in order. Serialized with
/// `"type": "<dotted name>"`; the HTTP API sends the same names as SSE event types.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum ExecutionEvent {
    /// The guest is running.
    #[serde(rename = "execution.started")]
    Started {
        /// The execution's id.
        execution_id: String,
        /// Its language.
        language: Language,
    },
    /// Text written to stdout or stderr.
    #[serde(rename = "output.delta")]
    OutputDelta {
        /// Which stream.
        stream: Stream,
        /// The text (lossy UTF-8).
        text: String,
    },
    /// The guest called a tool (its input already passed schema and policy checks, or
    /// the call is about to fail with a `tool.result` error).
    #[serde(rename = "tool.call")]
    ToolCall {
        /// Call id; results are paired to it.
        id: String,
        /// Tool name.
        name: String,
        /// Input object.
        input: Value,
        /// The execution that made the call.
        caller: Caller,
        /// Where it runs: `client` calls wait for [`ClientToolResult`]s.
        locus: Locus,
    },
    /// A tool call finished.
    #[serde(rename = "tool.result")]
    ToolResult {
        /// The call id.
        id: String,
        /// Tool name.
        name: String,
        /// The result, or `{"error": kind, "message": …}` when `is_error`.
        output: Value,
        /// Whether the guest received an error.
        is_error: bool,
        /// From dispatch to result, in microseconds.
        duration_us: u64,
    },
    /// A call with policy `ask` waits for a decision.
    #[serde(rename = "approval.required")]
    ApprovalRequired {
        /// Id to decide on.
        approval_id: String,
        /// The call waiting for it.
        call_id: String,
        /// Tool name.
        tool: String,
        /// Input object.
        input: Value,
        /// Why approval is needed, for a human.
        reason: String,
    },
    /// The execution is suspended until client tool results arrive.
    #[serde(rename = "execution.awaiting")]
    Awaiting {
        /// Call ids still waiting for results.
        pending: Vec<String>,
        /// When they fail with a timeout, in Unix milliseconds.
        deadline_unix_ms: u64,
    },
    /// The execution ended; nothing follows.
    #[serde(rename = "execution.completed")]
    Completed(ExecutionResult),
}

/// A result for a pending client tool call.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientToolResult {
    /// The pending call's id.
    pub call_id: String,
    /// Its result (JSON). For errors, a string or object describing the failure.
    #[serde(default)]
    pub output: Value,
    /// Whether the call failed (the guest gets a `ToolError`).
    #[serde(default)]
    pub is_error: bool,
}

/// A resume point that is not an event seq: the `Last-Event-ID` header or `?after=` of an
/// event stream, or the `?after=` of a listing. The caller fixes the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected an event seq (a non-negative integer), not {shown:?}")]
pub struct InvalidSeq {
    /// What was sent, lossily decoded and cut to 64 characters (it is echoed back).
    pub shown: String,
}

/// Parses a resume point: the decimal seq of the last event the client has, surrounding
/// whitespace ignored. Takes bytes because a header value need not be UTF-8.
pub fn parse_event_seq(raw: &[u8]) -> Result<u64, InvalidSeq> {
    let invalid = || InvalidSeq {
        shown: String::from_utf8_lossy(raw).chars().take(64).collect(),
    };
    let text = std::str::from_utf8(raw).map_err(|_| invalid())?.trim();
    // `u64::from_str` would also take a leading `+`; a seq is digits only.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    text.parse().map_err(|_| invalid())
}

/// A decision on an `ask` approval.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The call runs.
    Approve,
    /// The call fails with a `denied` error.
    Deny,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn every_language_has_one_name_for_every_interface() {
        for language in Language::ALL {
            let name = language.as_str();
            assert_eq!(Language::parse(name), Some(language));
            assert_eq!(serde_json::to_value(language).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<Language>(json!(name)).unwrap(),
                language
            );
        }
        assert_eq!(Language::parse("CPython"), Some(Language::Python));
        assert_eq!(Language::parse("python"), Some(Language::Python));
        assert_eq!(Language::parse("RustPython"), Some(Language::PythonLite));
        // Names clients sent before `python` meant CPython still parse.
        for (old, language) in [("cpython", Language::Python), ("js", Language::Javascript)] {
            assert_eq!(
                serde_json::from_value::<Language>(json!(old)).unwrap(),
                language
            );
        }
    }

    #[test]
    fn events_serialize_with_dotted_type_names() {
        let event = ExecutionEvent::Awaiting {
            pending: vec!["call_1".into()],
            deadline_unix_ms: 5,
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"type": "execution.awaiting", "pending": ["call_1"], "deadline_unix_ms": 5})
        );
        let event = ExecutionEvent::OutputDelta {
            stream: Stream::Stdout,
            text: "hi\n".into(),
        };
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(
            serde_json::from_str::<ExecutionEvent>(&text).unwrap(),
            event
        );
    }

    #[test]
    fn result_json_has_the_documented_fields() {
        let result = ExecutionResult {
            status: ExecutionStatus::LimitExceeded,
            limit: Some(LimitKind::ToolCalls),
            stdout: String::new(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "LimitExceeded".into(),
                message: "m".into(),
                traceback: String::new(),
            }),
            tool_calls: vec![],
            usage: Usage::default(),
            truncated: false,
        };
        let value = serde_json::to_value(&result).unwrap();
        assert!(value.get("truncated").is_none(), "absent when false");
        let old: ExecutionResult = serde_json::from_value(value.clone()).unwrap();
        assert!(
            !old.truncated,
            "results without the field read as not truncated"
        );
        assert_eq!(value["status"], "limit_exceeded");
        assert_eq!(value["limit"], "tool_calls");
        assert_eq!(value["error"]["type"], "LimitExceeded");
        for field in ["stdout", "stderr", "result", "tool_calls", "usage"] {
            assert!(value.get(field).is_some(), "missing {field}");
        }
    }

    #[test]
    fn limits_accept_partial_objects_and_reject_unknown_fields() {
        let limits: Limits = serde_json::from_value(json!({"cpu_ms": 5})).unwrap();
        assert_eq!(limits.cpu_ms, 5);
        assert_eq!(limits.wall_ms, Limits::default().wall_ms);
        assert!(serde_json::from_value::<Limits>(json!({"cpu": 5})).is_err());
    }

    #[test]
    fn languages_parse_aliases() {
        assert_eq!(Language::parse("JS"), Some(Language::Javascript));
        assert_eq!(Language::parse("py"), Some(Language::Python));
        assert_eq!(Language::parse("ruby"), None);
    }
}
