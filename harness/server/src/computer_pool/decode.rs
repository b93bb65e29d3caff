//! Model calls in any vendor's shape: the `format` name, and a list of vendor-shaped
//! actions decoded into one call.

use cordon_protocol::computer::{ComputerCall, Vendor, decode};
use serde_json::Value;

/// Parses `anthropic | openai | gemini | native` (default `anthropic`).
pub fn parse_format(format: Option<&str>) -> Result<Vendor, String> {
    match format {
        None => Ok(Vendor::Anthropic),
        Some(name) => Vendor::parse(name).ok_or_else(|| {
            format!("unknown format {name:?}; use anthropic, openai, gemini or native")
        }),
    }
}

/// Decodes a model call given as a list of vendor-shaped actions into one call: run in
/// order, then one screenshot. `Err` is model-visible (the model wrote an action that does
/// not decode).
pub fn decode_actions(
    vendor: Vendor,
    actions: &[Value],
    call_id: Option<String>,
) -> Result<ComputerCall, String> {
    let mut merged: Option<ComputerCall> = None;
    for (index, value) in actions.iter().enumerate() {
        let call = decode(vendor, value).map_err(|error| {
            if actions.len() > 1 {
                format!("actions[{index}]: {error}")
            } else {
                error.to_string()
            }
        })?;
        match &mut merged {
            None => merged = Some(call),
            Some(into) => {
                if into.coords != call.coords {
                    return Err(format!(
                        "actions[{index}] uses another coordinate space than actions[0]; send \
                         them as separate calls"
                    ));
                }
                into.actions.extend(call.actions);
                into.safety_checks.extend(call.safety_checks);
                if into.call_id.is_none() {
                    into.call_id = call.call_id;
                }
            }
        }
    }
    let mut call = merged.ok_or_else(|| "`actions` is empty".to_owned())?;
    if vendor == Vendor::OpenAi && call.actions.len() > 1 {
        call.batched = true;
    }
    if call_id.is_some() {
        call.call_id = call_id;
    }
    Ok(call)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_of_actions_is_one_call() {
        let call = decode_actions(
            Vendor::OpenAi,
            &[
                json!({"type": "click", "x": 10, "y": 20, "button": "left"}),
                json!({"type": "type", "text": "hi"}),
            ],
            Some("call_1".into()),
        )
        .unwrap();
        assert_eq!(call.actions.len(), 2);
        assert!(call.batched);
        assert_eq!(call.call_id.as_deref(), Some("call_1"));
        let call = decode_actions(
            Vendor::Anthropic,
            &[
                json!({"type": "tool_use", "id": "toolu_1", "name": "computer",
                     "input": {"action": "left_click", "coordinate": [1, 2]}}),
            ],
            None,
        )
        .unwrap();
        assert_eq!(call.call_id.as_deref(), Some("toolu_1"));
        let error = decode_actions(
            Vendor::Anthropic,
            &[json!({"action": "screenshot"}), json!({"action": "fly"})],
            None,
        )
        .unwrap_err();
        assert!(
            error.starts_with("actions[1]: unknown action `fly`"),
            "{error}"
        );
    }
}
