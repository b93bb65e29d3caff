//! A search's outcome as the model reads it and as an Anthropic client is shown it
//! (`tool_search_tool_result` holding `tool_reference`s, or
//! `tool_search_tool_result_error`). The model's text depends only on what the client is
//! shown, so the model reads the same when the client sends the blocks back.

use serde_json::{Value, json};

use super::error::SearchError;

/// The block type of a search's result shown to the client.
pub(crate) const RESULT_BLOCK: &str = "tool_search_tool_result";

/// What the model reads for a search that found `names` (empty: nothing matched).
fn found_text(names: &[String]) -> String {
    if names.is_empty() {
        "No tool matched. Search again with another query.".to_owned()
    } else {
        format!(
            "Found {} tool{} and loaded {}; call {} directly: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            if names.len() == 1 { "it" } else { "them" },
            if names.len() == 1 { "it" } else { "them" },
            names.join(", ")
        )
    }
}

/// The model's text for a search's outcome, and whether it is an error.
pub(crate) fn model_text(outcome: &Result<Vec<String>, SearchError>) -> (String, bool) {
    match outcome {
        Ok(names) => (found_text(names), false),
        Err(error) => (format!("error: {error}"), true),
    }
}

/// The `content` of the `tool_search_tool_result` block shown to the client.
pub(crate) fn client_content(outcome: &Result<Vec<String>, SearchError>) -> Value {
    match outcome {
        Ok(names) => json!({
            "type": "tool_search_tool_search_result",
            "tool_references": names
                .iter()
                .map(|name| json!({"type": "tool_reference", "tool_name": name}))
                .collect::<Vec<_>>(),
        }),
        Err(error) => json!({
            "type": "tool_search_tool_result_error",
            "error_code": error.code(),
            "error_message": error.to_string(),
        }),
    }
}

/// The tool names a shown result references (`tool_search_tool_search_result`).
fn referenced(content: &Value) -> Vec<String> {
    content
        .get("tool_references")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// The model's text for a result block a client sent back, when it is a search's.
pub(crate) fn model_text_of_shown(content: &Value) -> Option<String> {
    match content.get("type").and_then(Value::as_str)? {
        "tool_search_tool_search_result" => Some(found_text(&referenced(content))),
        "tool_search_tool_result_error" => Some(format!(
            "error: {}",
            content
                .get("error_message")
                .or_else(|| content.get("error_code"))
                .and_then(Value::as_str)
                .unwrap_or("unavailable")
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_reads_the_same_from_a_shown_result() {
        for outcome in [
            Ok(vec!["get_weather".to_owned(), "get_time".to_owned()]),
            Ok(vec![]),
            Err(SearchError::InvalidPattern("x".into())),
        ] {
            let shown = client_content(&outcome);
            assert_eq!(model_text_of_shown(&shown), Some(model_text(&outcome).0));
        }
        assert_eq!(
            model_text_of_shown(&json!({"type": "code_execution_result"})),
            None
        );
    }
}
