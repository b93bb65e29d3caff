//! Decoding and encoding a call in any vendor's shape, by [`Vendor`].

use super::action::{Action, ComputerCall, Vendor};
use super::error::{DecodeError, EncodeError};
use super::{anthropic, gemini, openai};

/// Decodes one JSON value in `vendor`'s shape. Accepts the envelope (Anthropic `tool_use`
/// block, OpenAI `computer_call` item, Gemini `function_call`) or the bare action.
pub fn decode(vendor: Vendor, value: &serde_json::Value) -> Result<ComputerCall, DecodeError> {
    match vendor {
        Vendor::Anthropic => anthropic::decode_tool_use(value, anthropic::Version::V20251124),
        Vendor::OpenAi => openai::decode_call(value),
        Vendor::Gemini => gemini::decode_function_call(value),
        Vendor::Native => decode_native(value),
    }
}

/// Encodes a call in `vendor`'s envelope shape.
pub fn encode(call: &ComputerCall, vendor: Vendor) -> Result<serde_json::Value, EncodeError> {
    match vendor {
        Vendor::Anthropic => anthropic::encode_tool_use(call),
        Vendor::OpenAi => openai::encode_call(call),
        Vendor::Gemini => gemini::encode_function_call(call),
        Vendor::Native => serde_json::to_value(call)
            .map_err(|e| EncodeError::new("native", format!("this call: {e}"))),
    }
}

/// Native shape: a [`ComputerCall`], or a bare [`Action`], or `{"actions": [...]}`.
fn decode_native(value: &serde_json::Value) -> Result<ComputerCall, DecodeError> {
    let invalid = |e: serde_json::Error| DecodeError::InvalidField {
        action: "native".into(),
        field: "kind",
        reason: e.to_string(),
    };
    if value.get("kind").is_some() {
        let action: Action = serde_json::from_value(value.clone()).map_err(invalid)?;
        return Ok(ComputerCall::native(action));
    }
    if value.get("actions").is_some() {
        let actions: Vec<Action> =
            serde_json::from_value(value["actions"].clone()).map_err(invalid)?;
        let mut call = ComputerCall::native(Action::Screenshot);
        call.actions = actions;
        if let Some(id) = value.get("call_id").and_then(|v| v.as_str()) {
            call.call_id = Some(id.to_owned());
        }
        if let Some(c) = value.get("coords") {
            call.coords = serde_json::from_value(c.clone()).map_err(invalid)?;
        }
        return Ok(call);
    }
    Err(DecodeError::NotAnObject(
        " with `kind` (one action) or `actions` (a list)",
    ))
}
