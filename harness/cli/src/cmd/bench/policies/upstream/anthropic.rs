//! Anthropic Messages with the computer tool: `computer_20251124` (`enable_zoom` on
//! request), `computer_toolset_20260801` (every action switched on or off by name in
//! `configs`) or `computer_20250124`, at the episode's display size; each `tool_use` of the
//! tool is one environment step, answered by a `tool_result` with the screenshot as an
//! image block. The conversation is replayed whole every turn, as the API expects.

use cordon_agent_bench::env::EnvAction;
use cordon_agent_bench::policy_env::EnvView;
use cordon_computer::image::EncodedImage;
use cordon_protocol::computer::anthropic::ACTIONS;
use cordon_protocol::conversation::{ConversionError, Request, Turn, anthropic};
use serde_json::{Map, Value, json};

use super::dialect::{CallOutcome, Dialect, ModelCall, base64_image};
use super::settings::ComputerTool;

/// The tool's name, which its calls carry.
const TOOL_NAME: &str = "computer";

/// The tokens one model turn may use.
const MAX_TOKENS: u32 = 1024;

pub(super) struct AnthropicDialect {
    model: String,
    tool: ComputerTool,
    /// Whether `zoom` is offered (and run): `--enable-zoom` on a tool that has it.
    zoom: bool,
    declaration: Value,
    messages: Vec<Value>,
}

impl AnthropicDialect {
    pub(super) fn new(model: &str, tool: ComputerTool, enable_zoom: bool) -> Self {
        AnthropicDialect {
            model: model.to_owned(),
            tool,
            zoom: enable_zoom && tool != ComputerTool::Computer20250124,
            declaration: Value::Null,
            messages: Vec::new(),
        }
    }

    /// The tool declaration at the display size the model's coordinates are in.
    fn declare(&self, view: &EnvView) -> Value {
        let mut tool = json!({
            "type": self.tool.kind(),
            "name": TOOL_NAME,
            "display_width_px": view.display.width,
            "display_height_px": view.display.height,
        });
        match self.tool {
            ComputerTool::Computer20251124 if self.zoom => tool["enable_zoom"] = json!(true),
            ComputerTool::Toolset20260801 => {
                let configs: Map<String, Value> = ACTIONS
                    .iter()
                    .map(|a| ((*a).to_owned(), json!({"enabled": self.enabled(a)})))
                    .collect();
                tool["configs"] = Value::Object(configs);
            }
            _ => {}
        }
        tool
    }

    fn enabled(&self, action: &str) -> bool {
        action != "zoom" || self.zoom
    }

    fn body(&self) -> Value {
        json!({"model": self.model, "max_tokens": MAX_TOKENS, "tools": [self.declaration],
               "messages": self.messages, "stream": false})
    }

    /// Why the tool input `input` is refused before it runs: an action the declaration
    /// leaves out.
    fn refusal(&self, input: &Value) -> Option<String> {
        let action = input.get("action").and_then(Value::as_str)?;
        if self.enabled(action) {
            return None;
        }
        let why = match self.tool {
            ComputerTool::Computer20251124 => "declared without `enable_zoom: true`",
            ComputerTool::Toolset20260801 => "declared with `configs.zoom.enabled: false`",
            ComputerTool::Computer20250124 => "a version without `zoom`",
        };
        Some(format!(
            "the action `{action}` is disabled for this tool ({} {why}); nothing was done on \
             the computer",
            self.tool.kind()
        ))
    }
}

fn image_block(image: Option<&EncodedImage>) -> Value {
    match image {
        Some(image) => {
            let (media_type, data) = base64_image(image);
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type,
                                               "data": data}})
        }
        None => json!({"type": "text", "text": "(no screenshot)"}),
    }
}

/// The `tool_result` of one call: the step's error, or its note and screenshot.
fn tool_result(call: &ModelCall, outcome: &CallOutcome) -> Value {
    let mut result = json!({"type": "tool_result", "tool_use_id": call.id});
    let (error, transition) = match outcome {
        CallOutcome::Refused(refusal) => (Some(refusal.clone()), None),
        CallOutcome::Stepped { transition, .. } => {
            (transition.info.error.clone(), Some(transition))
        }
    };
    if let Some(error) = error {
        result["is_error"] = json!(true);
        result["content"] = json!([{"type": "text", "text": error}]);
    } else if let Some(transition) = transition {
        let observation = &transition.observation;
        let mut content = Vec::new();
        if let Some(text) = &observation.text {
            content.push(json!({"type": "text", "text": text}));
        }
        content.push(image_block(observation.screenshot.as_ref()));
        result["content"] = Value::Array(content);
    }
    result
}

impl Dialect for AnthropicDialect {
    fn first_request(&mut self, instruction: &str, view: &EnvView) -> Value {
        self.declaration = self.declare(view);
        self.messages = vec![json!({"role": "user", "content": [
            {"type": "text", "text": instruction},
            image_block(view.screenshot.as_ref()),
        ]})];
        self.body()
    }

    fn decode(&self, body: &Value) -> Result<Request, ConversionError> {
        anthropic::decode_request(body)
    }

    fn take_turn(&mut self, turn: &Turn) -> Result<Vec<ModelCall>, String> {
        let reply = anthropic::encode_response(turn);
        let content = reply["content"].as_array().cloned().unwrap_or_default();
        let calls = content
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|block| {
                let name = block["name"].as_str().unwrap_or_default().to_owned();
                let input = block["input"].clone();
                let action = if name != TOOL_NAME {
                    Err(format!(
                        "there is no tool `{name}`; the computer is the tool `{TOOL_NAME}`"
                    ))
                } else if let Some(refusal) = self.refusal(&input) {
                    Err(refusal)
                } else {
                    Ok(EnvAction {
                        format: "anthropic".into(),
                        actions: vec![input],
                    })
                };
                ModelCall {
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    name,
                    action,
                    safety_checks: Vec::new(),
                }
            })
            .collect();
        self.messages
            .push(json!({"role": "assistant", "content": content}));
        Ok(calls)
    }

    fn next_request(&mut self, answers: &[(ModelCall, CallOutcome)]) -> Value {
        let results: Vec<Value> = answers
            .iter()
            .map(|(call, outcome)| tool_result(call, outcome))
            .collect();
        self.messages
            .push(json!({"role": "user", "content": results}));
        self.body()
    }
}
