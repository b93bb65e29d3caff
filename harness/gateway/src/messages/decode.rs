//! A client request read into canonical form from the API it speaks (a Responses request
//! with the chain its `previous_response_id` continues), and a turn written back in it.

use cordon_protocol::conversation::{Request, Turn, anthropic, chat, gemini, responses};
use serde_json::{Value, json};

use super::failure::{Fail, bad_request};
use super::request_reply::MessagesCall;
use crate::gateway::Inner;
use crate::upstream::Api;

pub(super) fn encode_response(api: Api, turn: &Turn) -> Value {
    match api {
        Api::Anthropic => anthropic::encode_response(turn),
        Api::OpenaiChat => chat::encode_response(turn),
        Api::OpenaiResponses => responses::encode_response(turn),
        Api::Gemini => gemini::encode_response(turn),
    }
}

/// The container a Responses client names: its `code_interpreter` tool's `container` (an
/// id), else the container of the last code call in its input (a `code_interpreter_call`'s
/// `container_id`, a `program`'s `fingerprint`).
pub(super) fn responses_container(body: &Value) -> Option<String> {
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
            .filter(|item| {
                matches!(
                    item["type"].as_str(),
                    Some("code_interpreter_call" | "program")
                )
            })
            .find_map(|item| {
                // A `program` item's `fingerprint` is the container it ran in.
                item["container_id"]
                    .as_str()
                    .or_else(|| item["fingerprint"].as_str())
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
            })
    })
}

/// Responses one `previous_response_id` chain may go back through.
const MAX_RESPONSE_CHAIN: usize = 10_000;

/// A Responses request's `input` as items (a string is one user message).
pub(super) fn input_items(body: &Value) -> Vec<Value> {
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

/// The client's request in canonical form (a Responses request with the history its
/// `previous_response_id` continues).
pub(super) fn decode(gw: &Inner, call: &MessagesCall) -> Result<Request, Fail> {
    match call.api {
        Api::Anthropic => anthropic::decode_request(&call.body),
        Api::OpenaiChat => chat::decode_request(&call.body),
        Api::Gemini => gemini::decode_request(&call.body),
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
