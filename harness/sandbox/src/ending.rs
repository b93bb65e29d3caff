//! How a run ended — the guest's own outcome, a limit, a cancellation or a fault — turned
//! into an [`ExecutionResult`], and the results of failures.

use cordon_guest::abi::Outcome;
use cordon_protocol::execution::{
    ErrorInfo, ExecutionResult, ExecutionStatus, LimitKind, ResultEncoding, Usage,
};
use serde_json::Value;
use wasmtime::Trap;

use crate::host_state::MemoryGuard;
use crate::meter::{Meter, Stop};

/// How the guest's entry call ended.
pub(crate) enum Ended {
    Returned(wasmtime::Result<()>),
    Stopped(Stop),
}

fn stopped(reason: Stop) -> (ExecutionResult, bool) {
    let result = match reason {
        Stop::Limit { kind, message } => {
            let mut result = failure(ExecutionStatus::LimitExceeded, "LimitExceeded", &message);
            result.limit = Some(kind);
            result
        }
        Stop::Cancelled => failure(
            ExecutionStatus::Cancelled,
            "Cancelled",
            "the execution was cancelled",
        ),
        Stop::Bridge(message) => failure(
            ExecutionStatus::Error,
            "BridgeViolation",
            &format!("the guest broke the bridge protocol: {message}"),
        ),
    };
    (result, false)
}

fn memory_stop(limit: u64) -> (ExecutionResult, bool) {
    stopped(Stop::limit(
        LimitKind::Memory,
        format!("memory limit of {} MiB reached", limit >> 20),
    ))
}

/// The result of a run that ended so, and whether its instance may be reused.
pub(crate) fn classify(
    ended: Ended,
    outcome: Option<Outcome>,
    meter: &Meter,
    memory: &MemoryGuard,
    memory_limit: u64,
) -> (ExecutionResult, bool) {
    // A recorded stop comes first: everything after it is its consequence.
    if let Some(reason) = meter.stop_reason() {
        return stopped(reason);
    }
    match ended {
        Ended::Stopped(reason) => stopped(reason),
        Ended::Returned(Err(trap)) => {
            if let Some(reason) = trap.downcast_ref::<Stop>() {
                return stopped(reason.clone());
            }
            if memory.hit {
                return memory_stop(memory_limit);
            }
            let (kind, message) = match trap.downcast_ref::<Trap>() {
                Some(Trap::StackOverflow) => (
                    "StackOverflow",
                    "the guest ran out of stack (recursion too deep)".to_owned(),
                ),
                Some(trap) => ("GuestFault", format!("the guest runtime trapped: {trap}")),
                None => (
                    "GuestFault",
                    format!("the guest runtime failed: {}", first_line(&trap)),
                ),
            };
            (failure(ExecutionStatus::Error, kind, &message), false)
        }
        Ended::Returned(Ok(())) => match outcome {
            Some(Outcome::Completed {
                result_json,
                result_repr,
            }) => {
                let mut result = empty_result(ExecutionStatus::Completed);
                if let Some(json) = result_json {
                    // The guest encoded it; fall back to text if it is somehow not JSON.
                    match serde_json::from_str(&json) {
                        Ok(value) => {
                            result.result = value;
                            result.result_encoding = Some(ResultEncoding::Json);
                        }
                        Err(_) => {
                            result.result = Value::String(json);
                            result.result_encoding = Some(ResultEncoding::Repr);
                        }
                    }
                } else if let Some(repr) = result_repr {
                    result.result = Value::String(repr);
                    result.result_encoding = Some(ResultEncoding::Repr);
                }
                (result, true)
            }
            Some(Outcome::Error {
                error_type,
                message,
                traceback,
            }) => {
                // Whatever the guest called it (MemoryError, InternalError: out of memory, or a
                // later error caused by it), an uncaught error after the cap was hit is the cap.
                if memory.hit {
                    return memory_stop(memory_limit);
                }
                let mut result = failure(ExecutionStatus::Error, &error_type, &message);
                if let Some(error) = &mut result.error {
                    error.traceback = traceback;
                }
                (result, true)
            }
            None => (
                failure(
                    ExecutionStatus::Error,
                    "GuestFault",
                    "the guest returned without reporting an outcome",
                ),
                false,
            ),
        },
    }
}

fn first_line(error: &wasmtime::Error) -> String {
    // The outer context of a failure inside the guest is only "error while executing at
    // wasm backtrace:"; what went wrong is the innermost cause.
    error
        .root_cause()
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A result with no output, value, error, tool calls or usage (filled in by the caller).
fn empty_result(status: ExecutionStatus) -> ExecutionResult {
    ExecutionResult {
        status,
        limit: None,
        stdout: String::new(),
        stderr: String::new(),
        result: Value::Null,
        result_encoding: None,
        error: None,
        tool_calls: Vec::new(),
        usage: Usage::default(),
        truncated: false,
    }
}

/// An [`empty_result`] that ended with `error_type: message`.
pub(crate) fn failure(status: ExecutionStatus, error_type: &str, message: &str) -> ExecutionResult {
    let error = ErrorInfo {
        error_type: error_type.into(),
        message: message.into(),
        traceback: String::new(),
    };
    ExecutionResult {
        error: Some(error),
        ..empty_result(status)
    }
}

/// A result for failures of Cordon itself (never expected; reported, not panicked).
pub(crate) fn internal_failure(message: &str) -> ExecutionResult {
    failure(ExecutionStatus::Error, "CordonInternalError", message)
}
