//! Gemini `generateContent` with the `computerUse` tool (`ENVIRONMENT_BROWSER`; on a
//! desktop the browser-only functions are excluded). Each `functionCall` of a model turn
//! (`click_at`, `type_text_at`, `navigate`, `scroll_document`, `drag_and_drop`,
//! `key_combination`, … on the 0–999 grid) is one environment step in Gemini's own shape;
//! it is answered by a `functionResponse` with `{"url"}` and the screenshot as an
//! `inlineData` part. A call's `safety_decision` (`require_confirmation`) goes through the
//! gates (answered by `--safety-checks`): the response says `safety_acknowledgement:
//! "true"` only when the gate approved, and a denied one ends the episode. The
//! conversation (`contents`) is replayed whole every turn, thought signatures included.

use cordon_agent_bench::env::EnvAction;
use cordon_agent_bench::policy_env::{EnvView, Surface};
use cordon_computer::image::EncodedImage;
use cordon_protocol::computer::gemini::decode_function_call;
use cordon_protocol::conversation::gemini::{self, is_synthesized_call_id};
use cordon_protocol::conversation::{ConversionError, Request, Turn};
use serde_json::{Value, json};

use super::dialect::{CallOutcome, Dialect, ModelCall, base64_image};

/// The functions a desktop cannot run (there is no page to load or go back from).
const BROWSER_ONLY: &[&str] = &[
    "open_web_browser",
    "search",
    "navigate",
    "go_back",
    "go_forward",
];

pub(super) struct GeminiDialect {
    model: String,
    tool: Value,
    contents: Vec<Value>,
}

impl GeminiDialect {
    pub(super) fn new(model: &str) -> Self {
        GeminiDialect {
            model: model.to_owned(),
            tool: Value::Null,
            contents: Vec::new(),
        }
    }

    fn body(&self) -> Value {
        json!({"model": self.model, "contents": self.contents, "tools": [self.tool]})
    }
}

fn inline_image(image: &EncodedImage) -> Value {
    let (media_type, data) = base64_image(image);
    json!({"inlineData": {"mimeType": media_type, "data": data}})
}

/// The `functionResponse` part of one call.
fn function_response(call: &ModelCall, outcome: &CallOutcome) -> Value {
    let mut response = json!({});
    let mut parts = Vec::new();
    match outcome {
        CallOutcome::Refused(refusal) => response["error"] = json!(refusal),
        CallOutcome::Stepped {
            transition,
            acknowledged,
        } => {
            let observation = &transition.observation;
            if !observation.url.is_empty() {
                response["url"] = json!(observation.url);
            }
            if let Some(error) = &transition.info.error {
                response["error"] = json!(error);
            }
            if *acknowledged && !call.safety_checks.is_empty() {
                response["safety_acknowledgement"] = json!("true");
            }
            if let Some(image) = &observation.screenshot {
                parts.push(inline_image(image));
            }
        }
    }
    let mut inner = json!({"name": call.name, "response": response});
    // Ids Cordon made for calls that had none never go to Gemini.
    if !call.id.is_empty() && !is_synthesized_call_id(&call.id) {
        inner["id"] = json!(call.id);
    }
    if !parts.is_empty() {
        inner["parts"] = Value::Array(parts);
    }
    json!({"functionResponse": inner})
}

impl Dialect for GeminiDialect {
    fn first_request(&mut self, instruction: &str, view: &EnvView) -> Value {
        let mut computer_use = json!({"environment": "ENVIRONMENT_BROWSER"});
        if view.surface == Surface::Desktop {
            computer_use["excludedPredefinedFunctions"] = json!(BROWSER_ONLY);
        }
        self.tool = json!({"computerUse": computer_use});
        let mut parts = vec![json!({"text": instruction})];
        if let Some(image) = &view.screenshot {
            parts.push(inline_image(image));
        }
        self.contents = vec![json!({"role": "user", "parts": parts})];
        self.body()
    }

    fn decode(&self, body: &Value) -> Result<Request, ConversionError> {
        gemini::decode_request(body)
    }

    fn take_turn(&mut self, turn: &Turn) -> Result<Vec<ModelCall>, String> {
        let reply = gemini::encode_response(turn);
        let content = reply["candidates"][0]["content"].clone();
        let parts = content["parts"].as_array().cloned().unwrap_or_default();
        let calls = parts
            .iter()
            .filter_map(|part| part.get("functionCall"))
            .map(|call| {
                let name = call["name"].as_str().unwrap_or_default().to_owned();
                let id = call["id"].as_str().unwrap_or_default().to_owned();
                let wrapped = json!({"functionCall": call});
                // A call that does not decode still goes to the environment, which says
                // what is wrong with it in the step.
                let safety_checks = decode_function_call(&wrapped)
                    .map(|decoded| decoded.safety_checks)
                    .unwrap_or_default();
                ModelCall {
                    id,
                    name,
                    action: Ok(EnvAction {
                        format: "gemini".into(),
                        actions: vec![wrapped],
                    }),
                    safety_checks,
                }
            })
            .collect();
        if content.is_object() {
            self.contents.push(content);
        }
        Ok(calls)
    }

    fn next_request(&mut self, answers: &[(ModelCall, CallOutcome)]) -> Value {
        let parts: Vec<Value> = answers
            .iter()
            .map(|(call, outcome)| function_response(call, outcome))
            .collect();
        self.contents.push(json!({"role": "user", "parts": parts}));
        self.body()
    }
}
