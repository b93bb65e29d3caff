//! Gemini's computer use on a bound Cordon computer: a Gemini upstream is offered its own
//! `computerUse` tool, and the model's predefined functions (`click_at`, `type_text_at`,
//! `navigate`, … on the 0–999 grid) run on the computer as Gemini actions, so the
//! computer engine scales them and its gates ask as for any vendor's actions. What the
//! model gets back is what Gemini expects: a function response holding the page's `url`
//! (and `safety_acknowledgement: "true"` when the client approved a call that carried a
//! `safety_decision`), with the screenshot as its inline image.

use cordon_protocol::conversation::{
    ContentBlock, Extra, ImageSource, ToolCall, ToolDefinition, ToolResult, ToolResultContent,
    Vendor, gemini,
};
use serde_json::{Value, json};

/// The functions Gemini's computer-use tool predefines.
const PREDEFINED: &[&str] = &[
    "open_web_browser",
    "wait_5_seconds",
    "go_back",
    "go_forward",
    "search",
    "navigate",
    "click_at",
    "hover_at",
    "type_text_at",
    "key_combination",
    "scroll_document",
    "scroll_at",
    "drag_and_drop",
];

/// Gemini's computer-use tool driving a bound computer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GeminiComputer {
    /// Predefined functions the client's declaration leaves out.
    excluded: Vec<String>,
}

impl GeminiComputer {
    /// The tool for a client's declaration: a Gemini `computerUse` tool (`data`, whose
    /// `excludedPredefinedFunctions` it keeps), or any other vendor's computer tool.
    pub(super) fn of(data: &Value) -> Self {
        let inner = data
            .get(gemini::COMPUTER_USE)
            .or_else(|| data.get("computer_use"));
        let excluded = inner
            .and_then(|c| {
                c.get("excludedPredefinedFunctions")
                    .or_else(|| c.get("excluded_predefined_functions"))
            })
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        GeminiComputer { excluded }
    }

    /// The `computerUse` tool the upstream is offered.
    pub(super) fn declaration(&self) -> ToolDefinition {
        let mut computer_use = json!({"environment": "ENVIRONMENT_BROWSER"});
        if !self.excluded.is_empty() {
            computer_use["excludedPredefinedFunctions"] = json!(self.excluded);
        }
        ToolDefinition::BuiltIn {
            vendor: Vendor::Gemini,
            kind: gemini::COMPUTER_USE.to_owned(),
            data: json!({ gemini::COMPUTER_USE: computer_use }),
        }
    }

    /// Whether the model's `call` is one of the tool's functions.
    pub(super) fn drives(&self, call: &ToolCall) -> bool {
        PREDEFINED.contains(&call.name.as_str())
    }

    /// The action the computer runs for `call`: the Gemini function call itself. `Err` is
    /// the model's to read (a function the declaration excludes), and nothing runs.
    pub(super) fn action_of(&self, call: &ToolCall) -> Result<Value, String> {
        if self.excluded.contains(&call.name) {
            return Err(format!(
                "`{}` is excluded from this computer-use tool \
                 (`excludedPredefinedFunctions`); nothing was done on the computer",
                call.name
            ));
        }
        Ok(json!({"name": call.name, "args": call.input}))
    }

    /// The function response Gemini expects for `call`: `{"url"}` (and the safety
    /// acknowledgement of an `approved` call that asked for one) with the screenshot, or
    /// the error the model reads.
    pub(super) fn result(
        call: &ToolCall,
        approved: bool,
        screenshot: Option<(String, String)>,
        text: Option<String>,
        is_error: bool,
        url: Option<String>,
    ) -> ToolResult {
        let mut response = json!({"url": url.unwrap_or_default()});
        if is_error {
            response["error"] = json!(text.unwrap_or_else(|| "the action failed".to_owned()));
        } else if let Some(text) = text {
            response["output"] = json!(text);
        }
        if approved && call.input.get("safety_decision").is_some() {
            response["safety_acknowledgement"] = json!("true");
        }
        let mut blocks = vec![ContentBlock::text(response.to_string())];
        if let Some((media_type, data)) = screenshot {
            blocks.push(ContentBlock::Image {
                source: ImageSource::Base64 { media_type, data },
                extra: Extra::new(),
            });
        }
        ToolResult {
            call_id: call.id.clone(),
            content: ToolResultContent::Blocks(blocks),
            // The error rides in the response object, beside the URL and screenshot.
            is_error: false,
            extra: Extra::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: Value) -> ToolCall {
        ToolCall {
            id: "gcall_1".into(),
            name: name.into(),
            input,
            caller: None,
            extra: Extra::new(),
        }
    }

    #[test]
    fn excluded_functions_are_refused_and_left_out_of_the_declaration() {
        let tool = GeminiComputer::of(&json!({"computerUse": {
            "environment": "ENVIRONMENT_BROWSER", "excludedPredefinedFunctions": ["drag_and_drop"]}}));
        assert!(tool.drives(&call("click_at", json!({}))));
        assert!(!tool.drives(&call("get_weather", json!({}))));
        let refused = tool.action_of(&call("drag_and_drop", json!({})));
        assert!(refused.is_err_and(|e| e.contains("excluded")));
        assert_eq!(
            tool.action_of(&call("click_at", json!({"x": 1, "y": 2}))),
            Ok(json!({"name": "click_at", "args": {"x": 1, "y": 2}}))
        );
        let ToolDefinition::BuiltIn { data, .. } = tool.declaration() else {
            panic!("a built-in");
        };
        assert_eq!(
            data["computerUse"]["excludedPredefinedFunctions"],
            json!(["drag_and_drop"])
        );
    }

    #[test]
    fn an_approved_safety_decision_is_acknowledged() {
        let risky = call(
            "click_at",
            json!({"x": 1, "y": 2, "safety_decision": {"decision": "require_confirmation"}}),
        );
        let result = GeminiComputer::result(
            &risky,
            true,
            Some(("image/png".into(), "AAAA".into())),
            None,
            false,
            Some("http://page/".into()),
        );
        let ToolResultContent::Blocks(blocks) = &result.content else {
            panic!("blocks");
        };
        let ContentBlock::Text { text, .. } = &blocks[0] else {
            panic!("text first");
        };
        let response: Value = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(
            response,
            json!({"url": "http://page/", "safety_acknowledgement": "true"})
        );
        assert!(matches!(blocks[1], ContentBlock::Image { .. }));
    }
}
