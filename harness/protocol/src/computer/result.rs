//! The continuation: what a computer call produced, encoded as each vendor's result item.

use super::{ComputerCall, SafetyCheck, gemini};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An encoded screenshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Screenshot {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    #[serde(with = "b64")]
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(serde::de::Error::custom)
    }
}

/// The outcome of a [`ComputerCall`], ready to encode for the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ComputerOutput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screenshot: Option<Screenshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_url: Option<String>,
    /// A model-visible error (bad coordinates, action denied, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Text output of actions that answer with text (`cursor_position`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The vendor checks the user acknowledged for this call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acknowledged_safety_checks: Vec<SafetyCheck>,
}

impl ComputerOutput {
    fn data_url(&self) -> Option<String> {
        self.screenshot.as_ref().map(|s| {
            format!(
                "data:{};base64,{}",
                s.media_type,
                base64::engine::general_purpose::STANDARD.encode(&s.data)
            )
        })
    }

    /// Anthropic `tool_result` block.
    pub fn to_anthropic(&self, call: &ComputerCall) -> Value {
        let mut content = Vec::new();
        if let Some(e) = &self.error {
            content.push(json!({"type": "text", "text": e}));
        }
        if let Some(t) = &self.text {
            content.push(json!({"type": "text", "text": t}));
        }
        if let Some(s) = &self.screenshot {
            content.push(json!({"type": "image", "source": {
                "type": "base64",
                "media_type": s.media_type,
                "data": base64::engine::general_purpose::STANDARD.encode(&s.data),
            }}));
        }
        let mut v = json!({"type": "tool_result", "content": content});
        if let Some(id) = &call.call_id {
            v["tool_use_id"] = id.as_str().into();
        }
        if self.error.is_some() {
            v["is_error"] = true.into();
        }
        v
    }

    /// OpenAI `computer_call_output` item (carrying `acknowledged_safety_checks`).
    pub fn to_openai(&self, call: &ComputerCall) -> Value {
        let mut output = json!({"type": "computer_screenshot"});
        if let Some(url) = self.data_url() {
            output["image_url"] = url.into();
        }
        if let Some(u) = &self.current_url {
            output["current_url"] = u.as_str().into();
        }
        let mut v = json!({
            "type": "computer_call_output",
            "output": output,
            "acknowledged_safety_checks": self.acknowledged_safety_checks,
        });
        if let Some(id) = &call.call_id {
            v["call_id"] = id.as_str().into();
        }
        v
    }

    /// Gemini `function_response` (with `safety_acknowledgement: "true"` when the call's
    /// `safety_decision` was acknowledged).
    pub fn to_gemini(&self, call: &ComputerCall) -> Value {
        let name = call
            .actions
            .first()
            .and_then(|a| gemini::encode_action(a).ok())
            .map_or("computer_use", |(n, _)| n);
        let mut response = json!({});
        if let Some(u) = &self.current_url {
            response["url"] = u.as_str().into();
        }
        if let Some(e) = &self.error {
            response["error"] = e.as_str().into();
        }
        if self
            .acknowledged_safety_checks
            .iter()
            .any(|c| c.id == gemini::SAFETY_CHECK_ID)
        {
            response["safety_acknowledgement"] = "true".into();
        }
        let mut fr = json!({"name": name, "response": response});
        if let Some(id) = &call.call_id {
            fr["id"] = id.as_str().into();
        }
        if let Some(s) = &self.screenshot {
            fr["parts"] = json!([{"inline_data": {
                "mime_type": s.media_type,
                "data": base64::engine::general_purpose::STANDARD.encode(&s.data),
            }}]);
        }
        json!({"function_response": fr})
    }
}
