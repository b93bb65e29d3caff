//! OpenAI Responses with the GA `computer` tool (`{"type": "computer"}`: no display size,
//! the screenshots say it). Each `computer_call` item — one `action` or a batch of
//! `actions`, run in order, then one screenshot — is one environment step, in OpenAI's own
//! shape; it is answered by a `computer_call_output` with `{"type": "computer_screenshot",
//! "image_url": "data:…"}`. Its `pending_safety_checks` go through the gates (answered by
//! `--safety-checks`): they are acknowledged in `acknowledged_safety_checks` only when the
//! gate approved, and a denied one ends the episode.
//!
//! The conversation lives on the API's side: every request is stored (`store: true`) and
//! the next one names it in `previous_response_id`, carrying only the new outputs.

use cordon_agent_bench::env::EnvAction;
use cordon_agent_bench::policy_env::EnvView;
use cordon_protocol::computer::SafetyCheck;
use cordon_protocol::conversation::{ConversionError, Request, Turn, responses};
use serde_json::{Value, json};

use super::dialect::{CallOutcome, Dialect, ModelCall, base64_image};

pub(super) struct OpenaiDialect {
    model: String,
    /// The response the next request continues.
    previous: Option<String>,
}

impl OpenaiDialect {
    pub(super) fn new(model: &str) -> Self {
        OpenaiDialect {
            model: model.to_owned(),
            previous: None,
        }
    }

    fn body(&self, input: Value) -> Value {
        let mut body = json!({"model": self.model, "tools": [{"type": "computer"}],
                              "input": input, "store": true});
        if let Some(id) = &self.previous {
            body["previous_response_id"] = json!(id);
        }
        body
    }
}

fn data_url(image: &cordon_computer::image::EncodedImage) -> String {
    let (media_type, data) = base64_image(image);
    format!("data:{media_type};base64,{data}")
}

/// The `computer_call_output` of one call: the screenshot after it, and the checks the
/// gate approved.
fn call_output(call: &ModelCall, outcome: &CallOutcome) -> Option<Value> {
    let CallOutcome::Stepped {
        transition,
        acknowledged,
    } = outcome
    else {
        return None;
    };
    let mut output = json!({"type": "computer_screenshot"});
    if let Some(image) = &transition.observation.screenshot {
        output["image_url"] = json!(data_url(image));
    }
    let mut item = json!({"type": "computer_call_output", "call_id": call.id, "output": output});
    if *acknowledged && !call.safety_checks.is_empty() {
        item["acknowledged_safety_checks"] = json!(call.safety_checks);
    }
    Some(item)
}

impl Dialect for OpenaiDialect {
    fn first_request(&mut self, instruction: &str, view: &EnvView) -> Value {
        let mut content = vec![json!({"type": "input_text", "text": instruction})];
        if let Some(image) = &view.screenshot {
            content.push(json!({"type": "input_image", "image_url": data_url(image)}));
        }
        self.previous = None;
        self.body(json!([{"role": "user", "content": content}]))
    }

    fn decode(&self, body: &Value) -> Result<Request, ConversionError> {
        responses::decode_request(body)
    }

    fn take_turn(&mut self, turn: &Turn) -> Result<Vec<ModelCall>, String> {
        if turn.id.is_empty() {
            return Err("the Responses answer has no `id` to continue from".into());
        }
        self.previous = Some(turn.id.clone());
        let reply = responses::encode_response(turn);
        let items = reply["output"].as_array().cloned().unwrap_or_default();
        let calls = items
            .into_iter()
            .filter(|item| item["type"] == "computer_call")
            .map(|item| {
                let safety_checks: Vec<SafetyCheck> =
                    serde_json::from_value(item["pending_safety_checks"].clone())
                        .unwrap_or_default();
                ModelCall {
                    id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                    name: "computer".into(),
                    // The whole item: the environment decodes `action` or the batch
                    // `actions`, and the pending checks with them.
                    action: Ok(EnvAction {
                        format: "openai".into(),
                        actions: vec![item],
                    }),
                    safety_checks,
                }
            })
            .collect();
        Ok(calls)
    }

    fn next_request(&mut self, answers: &[(ModelCall, CallOutcome)]) -> Value {
        let outputs: Vec<Value> = answers
            .iter()
            .filter_map(|(call, outcome)| call_output(call, outcome))
            .collect();
        self.body(Value::Array(outputs))
    }
}
