//! A computer tool bound to a Cordon computer, and which of Anthropic's actions its
//! declaration enables: a `computer_toolset_*`'s `configs` (over its `default_config`),
//! `zoom` on `computer_20251124` only with `enable_zoom: true` (never on the earlier
//! versions). A disabled action is refused to the model before anything runs: the
//! declaration is the client's word on what the model may do with the computer.

use std::collections::BTreeMap;

use cordon_protocol::computer::anthropic::ACTIONS;
use cordon_protocol::conversation::ToolCall;
use serde_json::Value;

use super::browser_tool::BrowserTool;
use super::gemini_computer::GeminiComputer;

/// Which actions a computer tool's declaration enables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ComputerActions {
    /// The tool's `type`, named in refusals.
    kind: String,
    /// Actions the declaration switches on or off by name.
    switches: BTreeMap<String, bool>,
    /// Whether an action the declaration does not name is enabled.
    default_enabled: bool,
}

/// A toolset config's `enabled` (`{"enabled": false}`), when it says.
fn enabled_of(config: &Value) -> Option<bool> {
    config.get("enabled").and_then(Value::as_bool)
}

fn is_toolset(kind: &str) -> bool {
    kind.starts_with("computer_toolset_")
}

impl ComputerActions {
    /// The actions the tool declaration `data` of type `kind` enables. A type without
    /// switches (OpenAI's computer tools) enables every action.
    pub(super) fn of(kind: &str, data: &Value) -> Self {
        let mut switches = BTreeMap::new();
        let mut default_enabled = true;
        if is_toolset(kind) {
            default_enabled = enabled_of(&data["default_config"]).unwrap_or(true);
            if let Some(configs) = data["configs"].as_object() {
                for (action, config) in configs {
                    if let Some(on) = enabled_of(config) {
                        switches.insert(action.clone(), on);
                    }
                }
            }
        } else if kind == "computer_20251124" {
            let zoom = data["enable_zoom"].as_bool().unwrap_or(false);
            switches.insert("zoom".to_owned(), zoom);
        } else if kind == "computer_20250124" || kind == "computer_20241022" {
            switches.insert("zoom".to_owned(), false);
        }
        Self {
            kind: kind.to_owned(),
            switches,
            default_enabled,
        }
    }

    /// Whether the model may run `action`.
    pub(super) fn enabled(&self, action: &str) -> bool {
        self.switches
            .get(action)
            .copied()
            .unwrap_or(self.default_enabled)
    }

    /// The known actions enabled, in the order the function tool lists them.
    pub(super) fn offered(&self) -> Vec<&'static str> {
        ACTIONS
            .iter()
            .copied()
            .filter(|a| self.enabled(a))
            .collect()
    }

    /// What the model reads when the tool input `input` asks for a disabled action: the
    /// action, that it is disabled for this tool and why, and the actions it may use.
    /// `None` when the action may run (an unknown one is the computer's to refuse).
    pub(super) fn refusal(&self, input: &Value) -> Option<String> {
        let action = input.get("action").and_then(Value::as_str)?;
        if self.enabled(action) {
            return None;
        }
        let kind = &self.kind;
        let why = if is_toolset(kind) && self.switches.contains_key(action) {
            format!("`{kind}` with `configs.{action}.enabled: false`")
        } else if is_toolset(kind) {
            format!("`{kind}` with `default_config.enabled: false`")
        } else if kind == "computer_20251124" {
            format!("`{kind}` without `enable_zoom: true`")
        } else {
            format!("`{kind}` has no `{action}`")
        };
        Some(format!(
            "the action `{action}` is disabled for this tool ({why}); nothing was done on the \
             computer. Enabled actions: {}",
            self.offered().join(", ")
        ))
    }
}

/// The computer a request binds (`x-cordon-computer`) and the tool that drives it.
#[derive(Debug, Clone)]
pub(super) struct BoundComputer {
    /// The computer's `cmp_…` id.
    pub(super) id: String,
    /// The tool's name, which the model's calls use.
    pub(super) name: String,
    /// What its declaration lets the model do.
    pub(super) actions: ComputerActions,
    /// The browser toolset driving it, when that is the tool (its calls are named by
    /// member, or `browser` as a function).
    pub(super) browser: Option<BrowserTool>,
    /// Gemini's computer-use functions driving it, when the upstream is Gemini.
    pub(super) gemini: Option<GeminiComputer>,
}

impl BoundComputer {
    /// Whether the model's `call` is for this computer's tool.
    pub(super) fn drives(&self, call: &ToolCall) -> bool {
        if let Some(gemini) = &self.gemini {
            return gemini.drives(call);
        }
        match &self.browser {
            Some(_) => BrowserTool::drives(call),
            None => call.name == self.name,
        }
    }

    /// The action the computer engine runs for `call` (the tool input, or the browser
    /// member's input translated); `Err` is the model's to read, and nothing runs.
    pub(super) fn action_of(&self, call: &ToolCall) -> Result<Value, String> {
        if let Some(gemini) = &self.gemini {
            return gemini.action_of(call);
        }
        match &self.browser {
            Some(browser) => browser.action_of(call),
            None => match self.actions.refusal(&call.input) {
                Some(refusal) => Err(refusal),
                None => Ok(call.input.clone()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_toolset_disables_what_its_configs_say() {
        let data = json!({"type": "computer_toolset_20260801", "name": "computer",
                          "configs": {"left_click": {"enabled": false}, "type": {"enabled": true}}});
        let actions = ComputerActions::of("computer_toolset_20260801", &data);
        assert!(!actions.enabled("left_click"));
        assert!(actions.enabled("type") && actions.enabled("zoom"));
        let refusal = actions
            .refusal(&json!({"action": "left_click"}))
            .unwrap_or_default();
        assert!(
            refusal.contains("`left_click` is disabled for this tool"),
            "{refusal}"
        );
        assert!(!actions.offered().contains(&"left_click"));

        let closed = json!({"default_config": {"enabled": false},
                            "configs": {"screenshot": {"enabled": true}}});
        let actions = ComputerActions::of("computer_toolset_20260801", &closed);
        assert_eq!(actions.offered(), vec!["screenshot"]);
    }

    #[test]
    fn zoom_needs_enable_zoom_on_computer_20251124_only() {
        let off = ComputerActions::of("computer_20251124", &json!({}));
        let on = ComputerActions::of("computer_20251124", &json!({"enable_zoom": true}));
        let old = ComputerActions::of("computer_20250124", &json!({"enable_zoom": true}));
        let openai = ComputerActions::of("computer_use_preview", &json!({}));
        let zoom = json!({"action": "zoom", "region": [0, 0, 10, 10]});
        assert!(off.refusal(&zoom).is_some() && old.refusal(&zoom).is_some());
        assert_eq!(on.refusal(&zoom), None);
        assert_eq!(openai.refusal(&zoom), None);
        assert_eq!(off.refusal(&json!({"action": "screenshot"})), None);
    }
}
