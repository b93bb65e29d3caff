//! `user_ask` under `cordon mcp`: the question becomes a form elicitation to the client's
//! user, and the answer the call's result (`{"answer", "is_freeform"}`).

use cordon_protocol::execution::ClientToolResult;
use rmcp::model::ElicitationSchema;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};

use super::form::accepted_form;

/// Asks `input.question` (with `input.options`) and returns the result to submit.
pub(super) async fn answer(
    peer: &Peer<RoleServer>,
    elicitation: bool,
    call_id: String,
    input: &Value,
) -> ClientToolResult {
    let refused = |why: &str| ClientToolResult {
        call_id: call_id.clone(),
        output: json!(why),
        is_error: true,
    };
    if !elicitation {
        return refused("nobody could be asked: this MCP client does not support elicitation");
    }
    let question = input
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let options: Vec<String> = input
        .get("options")
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut message = format!("Code running in Cordon's sandbox asks you:\n{question}");
    if !options.is_empty() {
        message.push_str(&format!("\nSuggested answers: {}", options.join(" / ")));
    }
    let Ok(schema) = ElicitationSchema::builder()
        .required_string_property("answer", |schema| schema.description("Your answer"))
        .build()
    else {
        return refused("the question could not be put to the user");
    };
    let Some(content) = accepted_form(peer, message, schema).await else {
        return refused("the user did not answer");
    };
    let answer = content
        .get("answer")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let is_freeform = !options.contains(&answer);
    ClientToolResult {
        call_id,
        output: json!({"answer": answer, "is_freeform": is_freeform}),
        is_error: false,
    }
}
