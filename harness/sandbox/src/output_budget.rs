//! Fitting a result into `max_output_bytes`: everything an execution produces — output,
//! final value, error message and traceback, recorded tool inputs — shares one budget, so
//! every interface that shows a result (CLI, HTTP events, store, MCP) inherits the bound.

use cordon_protocol::execution::ExecutionResult;
use serde_json::Value;

/// Bytes an error keeps even when output used the whole budget: the result must still say
/// what ended the execution.
pub(crate) const ERROR_FLOOR_BYTES: usize = 4096;

/// Length of `value` as compact JSON, without building the text.
pub(crate) fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Size of a final value as it counts against the output limit (a string by its text).
pub(crate) fn value_len(value: &Value) -> usize {
    match value {
        Value::Null => 0,
        Value::String(text) => text.len(),
        value => json_len(value),
    }
}

/// The largest index `<= at` on a character boundary of `text`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest index `>= at` on a character boundary of `text`.
fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Cuts `text` to about `budget` bytes, keeping its start; says how much was cut.
/// Returns whether anything was cut.
pub(crate) fn cut_tail(text: &mut String, budget: usize) -> bool {
    if text.len() <= budget {
        return false;
    }
    let cut = text.len() - budget;
    let note = format!("… [{cut} bytes cut: max_output_bytes]");
    let keep = floor_boundary(text, budget.saturating_sub(note.len()));
    text.truncate(keep);
    text.push_str(&note);
    true
}

/// Cuts `text` to about `budget` bytes, keeping its start and its end (where a traceback
/// names the error); says how much was cut. Returns whether anything was cut.
pub(crate) fn cut_middle(text: &mut String, budget: usize) -> bool {
    if text.len() <= budget {
        return false;
    }
    let cut = text.len() - budget;
    let note = format!("\n… [{cut} bytes cut: max_output_bytes] …\n");
    let room = budget.saturating_sub(note.len());
    let head = floor_boundary(text, room / 2);
    let tail = ceil_boundary(text, text.len() - (room - room / 2));
    let mut out = String::with_capacity(budget);
    out.push_str(&text[..head]);
    out.push_str(&note);
    out.push_str(&text[tail..]);
    *text = out;
    true
}

/// Fits the error and the recorded tool inputs of `result` into what `max` leaves after
/// stdout, stderr and the final value (which the output sink and the final-value check
/// already bound). Inputs that do not fit become `null`. Returns whether anything was cut.
pub(crate) fn fit_to_output_limit(result: &mut ExecutionResult, max: u64) -> bool {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let mut used = result
        .stdout
        .len()
        .saturating_add(result.stderr.len())
        .saturating_add(value_len(&result.result));
    let mut cut = false;
    if let Some(error) = &mut result.error {
        let budget = max.saturating_sub(used).max(ERROR_FLOOR_BYTES);
        if error.message.len() + error.traceback.len() > budget {
            // A traceback usually repeats the message at its end: share the budget.
            let message_budget = if error.traceback.is_empty() {
                budget
            } else {
                budget / 2
            };
            cut |= cut_tail(&mut error.message, message_budget);
            let rest = budget.saturating_sub(error.message.len());
            cut |= cut_middle(&mut error.traceback, rest);
        }
        used = used.saturating_add(error.message.len() + error.traceback.len());
    }
    for call in &mut result.tool_calls {
        let size = json_len(&call.input);
        if used.saturating_add(size) > max {
            call.input = Value::Null;
            cut = true;
        } else {
            used += size;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordon_protocol::execution::{ErrorInfo, ExecutionStatus, ToolCallRecord, Usage};
    use cordon_protocol::tool::Locus;
    use serde_json::json;

    fn result_with(message: String, traceback: String, inputs: Vec<Value>) -> ExecutionResult {
        ExecutionResult {
            status: ExecutionStatus::Error,
            limit: None,
            stdout: "x".repeat(100),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: Some(ErrorInfo {
                error_type: "ValueError".into(),
                message,
                traceback,
            }),
            tool_calls: inputs
                .into_iter()
                .enumerate()
                .map(|(n, input)| ToolCallRecord {
                    id: format!("call_{n}"),
                    name: "t".into(),
                    input,
                    is_error: false,
                    duration_us: 0,
                    locus: Locus::Host,
                })
                .collect(),
            usage: Usage::default(),
            truncated: false,
        }
    }

    #[test]
    fn a_huge_error_and_many_inputs_fit_in_about_the_limit() {
        let max = 20_000;
        let huge = "é".repeat(1_000_000);
        let traceback = format!("Traceback:\n  File \"<cell>\", line 1\nValueError: {huge}");
        let inputs = vec![json!({"q": "y".repeat(5_000)}); 10];
        let mut result = result_with(huge, traceback, inputs);
        assert!(fit_to_output_limit(&mut result, max));
        let size = serde_json::to_string(&result).unwrap().len() as u64;
        assert!(size < max + 2_000, "{size} bytes");
        let error = result.error.as_ref().unwrap();
        assert!(error.message.contains("bytes cut"), "{}", error.message);
        assert!(error.traceback.starts_with("Traceback:"));
        assert!(error.traceback.ends_with("éé"), "keeps the end");
        // The error came first and took what was left.
        assert!(result.tool_calls.iter().all(|call| call.input.is_null()));

        let inputs = vec![json!({"q": "y".repeat(5_000)}); 10];
        let mut result = result_with("bad".into(), String::new(), inputs);
        assert!(fit_to_output_limit(&mut result, max));
        assert!(
            !result.tool_calls[0].input.is_null(),
            "the first inputs fit"
        );
        assert!(result.tool_calls[9].input.is_null());
    }

    #[test]
    fn small_results_are_left_alone_and_errors_keep_a_floor() {
        let mut result = result_with("bad".into(), "tb".into(), vec![json!({"a": 1})]);
        let before = result.clone();
        assert!(!fit_to_output_limit(&mut result, 1 << 20));
        assert_eq!(result, before);
        // Output used the whole budget: the error still says what happened.
        let mut result = result_with("m".repeat(10_000), String::new(), vec![]);
        assert!(fit_to_output_limit(&mut result, 50));
        let message = &result.error.as_ref().unwrap().message;
        assert!(message.len() <= ERROR_FLOOR_BYTES, "{}", message.len());
        assert!(message.starts_with("mmm"));
    }

    #[test]
    fn cuts_respect_character_boundaries() {
        for budget in 0..40 {
            let mut text = "€".repeat(30);
            cut_middle(&mut text, budget);
            let mut text = "€".repeat(30);
            cut_tail(&mut text, budget);
        }
        assert_eq!(json_len(&json!({"a": [1, "b"]})), r#"{"a":[1,"b"]}"#.len());
    }
}
