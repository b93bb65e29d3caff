//! Anthropic's `browser_toolset_20260801` on a Cordon computer (a browser): which of its
//! member tools the declaration enables (`configs: {<member>: {enabled}}`), which Cordon's
//! browser can run, and each member's input as an action of the computer vocabulary.
//!
//! Cordon runs the members its computer engine has an action for: `navigate` (a URL, `back`,
//! `forward`), `screenshot`, `zoom`, the clicks, `hover`, `mouse_move`, `left_click_drag`,
//! `left_mouse_down`/`_up`, `scroll`, `type`, `key`, `hold_key` and `wait`, with coordinate
//! targets. The members that read the page or manage tabs (`read_page`, `find`,
//! `form_input`, `get_page_text`, `scroll_to`, `*_tab`, `list_tabs`, `read_console`,
//! `read_network`, `file_upload`, `javascript_exec`) have no such action: enabling one
//! explicitly is a 400, and they are switched off in what the model is offered.

use cordon_protocol::conversation::{Extra, FunctionTool, ToolCall, ToolDefinition};
use serde_json::{Map, Value, json};

/// Every member of `browser_toolset_20260801`: its name, whether it is on when the
/// declaration does not say, and whether Cordon's browser can run it.
const MEMBERS: &[(&str, bool, bool)] = &[
    ("navigate", true, true),
    ("list_tabs", true, false),
    ("new_tab", true, false),
    ("switch_tab", true, false),
    ("close_tab", true, false),
    ("read_page", true, false),
    ("get_page_text", true, false),
    ("read_console", false, false),
    ("read_network", false, false),
    ("find", true, false),
    ("form_input", true, false),
    ("file_upload", false, false),
    ("scroll_to", true, false),
    ("screenshot", true, true),
    ("zoom", true, true),
    ("left_click", true, true),
    ("right_click", true, true),
    ("middle_click", true, true),
    ("double_click", true, true),
    ("triple_click", true, true),
    ("hover", true, true),
    ("left_click_drag", true, true),
    ("left_mouse_down", true, true),
    ("left_mouse_up", true, true),
    ("mouse_move", true, true),
    ("scroll", true, true),
    ("type", true, true),
    ("key", true, true),
    ("hold_key", true, true),
    ("wait", true, true),
    ("javascript_exec", false, false),
];

/// The name the browser's calls carry (`toolset_name`) and the function tool's name.
pub(super) const BROWSER: &str = "browser";

/// Fields a browser toolset declaration may have.
const KNOWN_FIELDS: &[&str] = &["type", "configs", "cache_control"];

/// Times a `key` member's `repeat` may press its keys.
const MAX_REPEAT: u64 = 100;

/// The names a bound browser's calls may carry: the function's and every member's.
pub(super) fn browser_call_names() -> impl Iterator<Item = &'static str> {
    std::iter::once(BROWSER).chain(MEMBERS.iter().map(|(name, _, _)| *name))
}

/// Whether a tool type is Anthropic's browser toolset.
pub(super) fn is_browser_toolset(kind: &str) -> bool {
    kind.starts_with("browser_toolset_")
}

/// What a browser toolset declaration enables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BrowserTool {
    kind: String,
    /// The members the model may call (enabled and runnable), in [`MEMBERS`] order.
    enabled: Vec<&'static str>,
}

fn member(name: &str) -> Option<&'static (&'static str, bool, bool)> {
    MEMBERS.iter().find(|(m, _, _)| *m == name)
}

impl BrowserTool {
    /// The declaration `data` of type `kind` read and checked: `Err` is the 400's message
    /// (an unknown field or member, a config that is not `{"enabled": bool}`, or, when
    /// Cordon `runs_it`, a member its browser cannot run switched on explicitly).
    pub(super) fn read(kind: &str, data: &Value, runs_it: bool) -> Result<Self, String> {
        let fields = data
            .as_object()
            .ok_or_else(|| format!("`{kind}` must be an object"))?;
        if let Some(unknown) = fields.keys().find(|k| !KNOWN_FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "`{kind}` has no field `{unknown}` (known: {})",
                KNOWN_FIELDS.join(", ")
            ));
        }
        let mut switches: Map<String, Value> = Map::new();
        match fields.get("configs") {
            None | Some(Value::Null) => {}
            Some(Value::Object(configs)) => switches = configs.clone(),
            Some(_) => return Err(format!("`{kind}`: `configs` must be an object")),
        }
        let mut explicit: Vec<(&'static str, bool)> = Vec::new();
        for (name, config) in &switches {
            let Some((name, _, runnable)) = member(name) else {
                let names: Vec<&str> = MEMBERS.iter().map(|m| m.0).collect();
                return Err(format!(
                    "`{kind}`: `configs.{name}` names no member of the toolset (members: {})",
                    names.join(", ")
                ));
            };
            let enabled = match config {
                Value::Null => continue,
                Value::Object(c) => match c.get("enabled") {
                    None | Some(Value::Null) => continue,
                    Some(Value::Bool(on)) => *on,
                    Some(_) => {
                        return Err(format!(
                            "`{kind}`: `configs.{name}.enabled` must be true or false"
                        ));
                    }
                },
                _ => return Err(format!("`{kind}`: `configs.{name}` must be an object")),
            };
            if enabled && !runnable && runs_it {
                return Err(format!(
                    "`{kind}`: `configs.{name}.enabled: true`, but Cordon's browser cannot run \
                     `{name}` (it has no such action); switch it off or drop the key"
                ));
            }
            explicit.push((name, enabled));
        }
        let enabled = MEMBERS
            .iter()
            .filter(|(name, default, runnable)| {
                let on = explicit
                    .iter()
                    .find(|(m, _)| m == name)
                    .map_or(*default, |(_, on)| *on);
                on && *runnable
            })
            .map(|(name, _, _)| *name)
            .collect();
        Ok(BrowserTool {
            kind: kind.to_owned(),
            enabled,
        })
    }

    /// The declaration as an Anthropic upstream gets it: every member the model may not
    /// call switched off, so it is not offered them.
    pub(super) fn upstream_declaration(&self, data: &Value) -> Value {
        let mut declaration = data.clone();
        let configs: Map<String, Value> = MEMBERS
            .iter()
            .map(|(name, _, _)| {
                let on = self.enabled.contains(name);
                ((*name).to_owned(), json!({"enabled": on}))
            })
            .collect();
        declaration["configs"] = Value::Object(configs);
        declaration
    }

    /// The toolset as a function tool, for upstreams without it: `action` names the member.
    pub(super) fn function(&self) -> ToolDefinition {
        let point = json!({"type": "object", "properties": {
            "type": {"type": "string", "enum": ["coordinate"]},
            "x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["type", "x", "y"]});
        ToolDefinition::Function(FunctionTool {
            name: BROWSER.to_owned(),
            description: Some(
                "Use a web browser through screenshots and mouse and keyboard actions. \
                 `action` is what to do; coordinates are viewport pixels of the last \
                 screenshot. `navigate` takes `url` (or `back` / `forward`). Every action \
                 returns a screenshot."
                    .to_owned(),
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": self.enabled},
                    "url": {"type": "string"},
                    "target": point,
                    "from": point,
                    "text": {"type": "string"},
                    "modifiers": {"type": "string"},
                    "repeat": {"type": "integer"},
                    "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
                    "scroll_amount": {"type": "integer"},
                    "duration": {"type": "number"},
                    "region": {"type": "array", "items": {"type": "integer"}}
                },
                "required": ["action"]
            }),
            allowed_callers: Vec::new(),
            extra: Extra::new(),
        })
    }

    /// Whether `call` is for the browser: the toolset's member calls (`toolset_name:
    /// "browser"`) or the function tool's.
    pub(super) fn drives(call: &ToolCall) -> bool {
        call.name == BROWSER || call.extra.get("toolset_name") == Some(&json!(BROWSER))
    }

    /// The computer action `call` asks for, as the computer engine takes it (Anthropic's
    /// computer-tool input, or Cordon's own `{"kind": …}` for navigation). `Err` is what
    /// the model reads: a disabled member, one Cordon's browser cannot run, bad input.
    pub(super) fn action_of(&self, call: &ToolCall) -> Result<Value, String> {
        let input = &call.input;
        let name = if call.name == BROWSER {
            input
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or_default()
        } else {
            call.name.as_str()
        };
        let Some((name, _, runnable)) = member(name) else {
            return Err(format!(
                "`{name}` is no browser action; use one of: {}",
                self.enabled.join(", ")
            ));
        };
        if !runnable {
            return Err(format!(
                "`{name}` cannot run on Cordon's browser (it has no such action); nothing was \
                 done. Available: {}",
                self.enabled.join(", ")
            ));
        }
        if !self.enabled.contains(name) {
            return Err(format!(
                "the action `{name}` is disabled for this tool (`{}` with `configs.{name}.enabled: \
                 false`); nothing was done on the browser. Enabled actions: {}",
                self.kind,
                self.enabled.join(", ")
            ));
        }
        translate(name, input)
    }
}

/// `[x, y]` of a coordinate target (`{"type": "coordinate", x, y}`).
fn point(input: &Value, field: &str, member: &str) -> Result<Value, String> {
    let target = input
        .get(field)
        .ok_or_else(|| format!("`{member}` needs `{field}`"))?;
    if target.get("type").and_then(Value::as_str) == Some("ref") {
        return Err(format!(
            "`{member}`: element references (`ref`) are not supported by Cordon's browser; \
             give a coordinate target ({{\"type\": \"coordinate\", \"x\", \"y\"}}) read from a \
             screenshot"
        ));
    }
    match (
        target.get("x").and_then(Value::as_i64),
        target.get("y").and_then(Value::as_i64),
    ) {
        (Some(x), Some(y)) => Ok(json!([x, y])),
        _ => Err(format!(
            "`{member}`: `{field}` must be {{\"type\": \"coordinate\", \"x\": int, \"y\": int}}"
        )),
    }
}

fn text(input: &Value, member: &str) -> Result<String, String> {
    input
        .get("text")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("`{member}` needs `text` (a string)"))
}

/// A member's input as a computer action.
fn translate(member: &str, input: &Value) -> Result<Value, String> {
    let mut action = json!({"action": member});
    match member {
        "navigate" => {
            let url = input
                .get("url")
                .and_then(Value::as_str)
                .ok_or("`navigate` needs `url` (a string)")?;
            return match url {
                "back" => Ok(json!({"kind": "go_back"})),
                "forward" => Ok(json!({"kind": "go_forward"})),
                "reload" => Err(
                    "`navigate` to `reload` is not supported by Cordon's browser; \
                                 navigate to the page's URL instead"
                        .to_owned(),
                ),
                url if url.contains("://") => Ok(json!({"kind": "navigate", "url": url})),
                url => Ok(json!({"kind": "navigate", "url": format!("https://{url}")})),
            };
        }
        "screenshot" => {}
        "left_click" | "right_click" | "middle_click" | "double_click" | "triple_click" => {
            action["coordinate"] = point(input, "target", member)?;
            if let Some(modifiers) = input.get("modifiers").and_then(Value::as_str) {
                action["text"] = json!(modifiers);
            }
        }
        "hover" | "mouse_move" => {
            action["action"] = json!("mouse_move");
            action["coordinate"] = point(input, "target", member)?;
        }
        "left_mouse_down" | "left_mouse_up" => {
            if input.get("target").is_some() {
                action["coordinate"] = point(input, "target", member)?;
            }
        }
        "left_click_drag" => {
            action["start_coordinate"] = point(input, "from", member)?;
            action["coordinate"] = point(input, "target", member)?;
        }
        "scroll" => {
            action["coordinate"] = point(input, "target", member)?;
            action["scroll_direction"] = input
                .get("scroll_direction")
                .cloned()
                .ok_or("`scroll` needs `scroll_direction`")?;
            action["scroll_amount"] = input.get("scroll_amount").cloned().unwrap_or(json!(3));
        }
        "type" => action["text"] = json!(text(input, member)?),
        "key" => {
            let keys = text(input, member)?;
            let repeat = input.get("repeat").and_then(Value::as_u64).unwrap_or(1);
            if !(1..=MAX_REPEAT).contains(&repeat) {
                return Err(format!("`key`: `repeat` must be 1 to {MAX_REPEAT}"));
            }
            let presses: Vec<&str> = std::iter::repeat_n(keys.as_str(), repeat as usize).collect();
            action["text"] = json!(presses.join(" "));
        }
        "hold_key" => {
            action["text"] = json!(text(input, member)?);
            action["duration"] = input.get("duration").cloned().unwrap_or(Value::Null);
        }
        "wait" => action["duration"] = input.get("duration").cloned().unwrap_or(json!(1)),
        "zoom" => {
            action["region"] = input
                .get("region")
                .cloned()
                .ok_or("`zoom` needs `region` ([x0, y0, x1, y1])")?;
        }
        other => return Err(format!("`{other}` cannot run on Cordon's browser")),
    }
    Ok(action)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, input: Value) -> ToolCall {
        let mut extra = Extra::new();
        extra.insert("toolset_name".into(), json!("browser"));
        ToolCall {
            id: "toolu_1".into(),
            name: name.into(),
            input,
            caller: None,
            extra,
        }
    }

    #[test]
    fn members_become_computer_actions() {
        let tool = BrowserTool::read("browser_toolset_20260801", &json!({}), true).unwrap();
        let click = call(
            "left_click",
            json!({"target": {"type": "coordinate", "x": 5, "y": 7}}),
        );
        assert!(BrowserTool::drives(&click));
        assert_eq!(
            tool.action_of(&click).unwrap(),
            json!({"action": "left_click", "coordinate": [5, 7]})
        );
        let go = call("navigate", json!({"url": "example.com"}));
        assert_eq!(
            tool.action_of(&go).unwrap(),
            json!({"kind": "navigate", "url": "https://example.com"})
        );
        let back = call("browser", json!({"action": "navigate", "url": "back"}));
        assert_eq!(tool.action_of(&back).unwrap(), json!({"kind": "go_back"}));
        let key = call("key", json!({"text": "Tab", "repeat": 3}));
        assert_eq!(
            tool.action_of(&key).unwrap(),
            json!({"action": "key", "text": "Tab Tab Tab"})
        );
        let by_ref = call(
            "left_click",
            json!({"target": {"type": "ref", "ref": "ref_1"}}),
        );
        assert!(tool.action_of(&by_ref).unwrap_err().contains("`ref`"));
        let read = call("read_page", json!({}));
        assert!(tool.action_of(&read).unwrap_err().contains("cannot run"));
        assert!(!tool.enabled.contains(&"read_page"));
    }

    #[test]
    fn configs_are_checked_and_disable_members() {
        let kind = "browser_toolset_20260801";
        let off = json!({"configs": {"left_click": {"enabled": false}}});
        let tool = BrowserTool::read(kind, &off, true).unwrap();
        let click = call(
            "left_click",
            json!({"target": {"type": "coordinate", "x": 1, "y": 1}}),
        );
        assert!(tool.action_of(&click).unwrap_err().contains("disabled"));
        let declared = tool.upstream_declaration(&off);
        assert_eq!(declared["configs"]["left_click"]["enabled"], false);
        assert_eq!(declared["configs"]["find"]["enabled"], false);
        assert_eq!(declared["configs"]["navigate"]["enabled"], true);
        let unknown =
            BrowserTool::read(kind, &json!({"configs": {"fly": {"enabled": true}}}), true);
        assert!(unknown.unwrap_err().contains("`configs.fly`"));
        let find = json!({"configs": {"find": {"enabled": true}}});
        let cannot = BrowserTool::read(kind, &find, true);
        assert!(cannot.unwrap_err().contains("cannot run `find`"));
        // Unbound, the client runs `find`: the declaration stands.
        assert!(BrowserTool::read(kind, &find, false).is_ok());
        let bad = BrowserTool::read(
            kind,
            &json!({"configs": {"type": {"enabled": "yes"}}}),
            true,
        );
        assert!(bad.unwrap_err().contains("true or false"));
        let field = BrowserTool::read(kind, &json!({"name": "b"}), false);
        assert!(field.unwrap_err().contains("no field `name`"));
    }
}
