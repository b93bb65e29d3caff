//! A program's result as the model reads it and as the client is shown it, each part cut
//! to [`MAX_CODE_OUTPUT`].

use cordon_protocol::execution::ExecutionResult;
use serde_json::{Value, json};

/// Bytes of stdout, stderr, result and error each given to the model.
pub const MAX_CODE_OUTPUT: usize = 16 * 1024;

/// Cuts `text` to `max` bytes on a character boundary, saying so.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes cut]", &text[..end], text.len() - end)
}

/// What the model reads as the code tool's result.
pub(crate) fn model_text(result: &ExecutionResult) -> String {
    let mut out = String::new();
    if !result.stdout.is_empty() {
        out.push_str(&format!(
            "stdout:\n{}\n",
            bounded(&result.stdout, MAX_CODE_OUTPUT)
        ));
    }
    if !result.stderr.is_empty() {
        out.push_str(&format!(
            "stderr:\n{}\n",
            bounded(&result.stderr, MAX_CODE_OUTPUT)
        ));
    }
    if !result.result.is_null() {
        let value = match &result.result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!("result: {}\n", bounded(&value, MAX_CODE_OUTPUT)));
    }
    if let Some(error) = &result.error {
        out.push_str(&format!(
            "error: {}: {}\n{}",
            error.error_type,
            bounded(&error.message, MAX_CODE_OUTPUT),
            bounded(&error.traceback, MAX_CODE_OUTPUT)
        ));
    }
    if out.is_empty() {
        out.push_str("(no output)");
    }
    out.trim_end().to_owned()
}

/// The `code_execution_tool_result` content shown to the client.
pub(crate) fn client_result(result: &ExecutionResult) -> Value {
    let mut stderr = bounded(&result.stderr, MAX_CODE_OUTPUT);
    if let Some(error) = &result.error {
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        stderr.push_str(&format!(
            "{}{}: {}",
            bounded(&error.traceback, MAX_CODE_OUTPUT),
            error.error_type,
            bounded(&error.message, MAX_CODE_OUTPUT)
        ));
    }
    let mut stdout = bounded(&result.stdout, MAX_CODE_OUTPUT);
    if !result.result.is_null() && result.error.is_none() {
        let value = match &result.result {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if stdout.is_empty() {
            stdout = bounded(&value, MAX_CODE_OUTPUT);
        }
    }
    json!({
        "type": "code_execution_result",
        "stdout": stdout,
        "stderr": stderr,
        "return_code": if result.error.is_some() { 1 } else { 0 },
        "content": [],
    })
}
