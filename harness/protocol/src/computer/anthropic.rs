//! Anthropic's `computer` tool (`computer_20250124`, `computer_20251124`).
//!
//! Input shape: `{"action": "left_click", "coordinate": [x, y], "text": "shift"}`; keys are
//! xdotool keysyms (`ctrl+a`, `Return`). `computer_20251124` adds `zoom` with
//! `region: [x0, y0, x1, y1]`.

use super::fields::{
    int_field, invalid, obj, opt_f64, opt_str, pair, str_field, type_text, unknown_action,
};
use super::keys::{Key, chord_xdotool};
use super::{
    Action, Button, ComputerCall, CoordSpace, DecodeError, Direction, EncodeError, Point, Region,
    ScrollDelta, Vendor,
};
use serde_json::{Map, Value, json};

const VENDOR: &str = "Anthropic";
const KNOWN: &str = "key, type, mouse_move, left_click, right_click, middle_click, \
    double_click, triple_click, left_click_drag, left_mouse_down, left_mouse_up, scroll, \
    hold_key, wait, screenshot, cursor_position, zoom (computer_20251124)";

/// Every action of Anthropic's computer tool (the tool input's `action`), as a toolset's
/// `configs` names them; `zoom` only from `computer_20251124`.
pub const ACTIONS: &[&str] = &[
    "screenshot",
    "left_click",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "mouse_move",
    "left_click_drag",
    "left_mouse_down",
    "left_mouse_up",
    "type",
    "key",
    "hold_key",
    "scroll",
    "wait",
    "cursor_position",
    "zoom",
];

/// The tool version, which decides the action set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Version {
    V20250124,
    V20251124,
}

impl Version {
    /// The tool `type` string.
    pub fn tool_type(self) -> &'static str {
        match self {
            Self::V20250124 => "computer_20250124",
            Self::V20251124 => "computer_20251124",
        }
    }
}

/// Decodes a `tool_use` block (`{"type": "tool_use", "id", "name", "input"}`) or a bare input.
pub fn decode_tool_use(block: &Value, version: Version) -> Result<ComputerCall, DecodeError> {
    let o = obj(block, " (a tool_use block or its input)")?;
    let (input, id) = match o.get("input") {
        Some(input) => (
            input,
            o.get("id").and_then(Value::as_str).map(str::to_owned),
        ),
        None => (block, None),
    };
    Ok(ComputerCall {
        vendor: Vendor::Anthropic,
        call_id: id,
        actions: vec![decode_input(input, version)?],
        coords: CoordSpace::Display,
        safety_checks: Vec::new(),
        batched: false,
    })
}

/// Encodes a call as a `tool_use` block. Anthropic carries one action per call.
pub fn encode_tool_use(call: &ComputerCall) -> Result<Value, EncodeError> {
    let [action] = call.actions.as_slice() else {
        return Err(EncodeError::new(
            VENDOR,
            "more than one action per tool_use",
        ));
    };
    if call.coords != CoordSpace::Display {
        return Err(EncodeError::new(VENDOR, "normalized coordinates"));
    }
    let mut block = json!({"type": "tool_use", "name": "computer", "input": encode_input(action)?});
    if let Some(id) = &call.call_id {
        block["id"] = Value::from(id.as_str());
    }
    Ok(block)
}

fn modifiers(o: &Map<String, Value>, action: &str) -> Result<Vec<Key>, DecodeError> {
    match opt_str(o, action, "text")? {
        None => Ok(Vec::new()),
        Some(s) => Key::parse_chord(s),
    }
}

fn coordinate(o: &Map<String, Value>, action: &str) -> Result<Option<Point>, DecodeError> {
    match o.get("coordinate") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => pair(v, action, "coordinate").map(Some),
    }
}

fn required_coordinate(o: &Map<String, Value>, action: &str) -> Result<Point, DecodeError> {
    coordinate(o, action)?.ok_or(DecodeError::MissingField {
        action: action.into(),
        field: "coordinate",
    })
}

/// Decodes the tool input (`{"action": ..., ...}`).
pub fn decode_input(input: &Value, version: Version) -> Result<Action, DecodeError> {
    let o = obj(input, " with an `action` field")?;
    let name = str_field(o, "computer", "action")?;
    let click = |button, count| -> Result<Action, DecodeError> {
        Ok(Action::Click {
            at: coordinate(o, name)?,
            button,
            count,
            modifiers: modifiers(o, name)?,
        })
    };
    Ok(match name {
        "screenshot" => Action::Screenshot,
        "cursor_position" => Action::CursorPosition,
        "left_click" => click(Button::Left, 1)?,
        "right_click" => click(Button::Right, 1)?,
        "middle_click" => click(Button::Middle, 1)?,
        "double_click" => click(Button::Left, 2)?,
        "triple_click" => click(Button::Left, 3)?,
        "mouse_move" => Action::MouseMove {
            to: required_coordinate(o, name)?,
            modifiers: modifiers(o, name)?,
        },
        "left_mouse_down" => Action::MouseDown {
            at: coordinate(o, name)?,
            button: Button::Left,
        },
        "left_mouse_up" => Action::MouseUp {
            at: coordinate(o, name)?,
            button: Button::Left,
        },
        "left_click_drag" => {
            let start = match o.get("start_coordinate") {
                Some(v) => pair(v, name, "start_coordinate")?,
                None => {
                    return Err(DecodeError::MissingField {
                        action: name.into(),
                        field: "start_coordinate",
                    });
                }
            };
            Action::Drag {
                path: vec![start, required_coordinate(o, name)?],
                modifiers: modifiers(o, name)?,
            }
        }
        "scroll" => {
            let dir = str_field(o, name, "scroll_direction")?;
            let direction = Direction::parse(dir).ok_or_else(|| {
                invalid(name, "scroll_direction", "must be up, down, left or right")
            })?;
            let amount = int_field(o, name, "scroll_amount")?;
            let amount = u32::try_from(amount)
                .map_err(|_| invalid(name, "scroll_amount", "must be a non-negative integer"))?;
            Action::Scroll {
                at: coordinate(o, name)?,
                delta: ScrollDelta::Ticks { direction, amount },
                modifiers: modifiers(o, name)?,
            }
        }
        "type" => type_text(o, name)?,
        "key" => {
            let text = str_field(o, name, "text")?;
            // xdotool takes several chords separated by spaces: "ctrl+a Delete".
            let chords = text
                .split_whitespace()
                .map(Key::parse_chord)
                .collect::<Result<Vec<_>, _>>()?;
            if chords.is_empty() {
                return Err(invalid(name, "text", "names no key"));
            }
            Action::Key { chords }
        }
        "hold_key" => Action::HoldKey {
            keys: Key::parse_chord(str_field(o, name, "text")?)?,
            duration_secs: opt_f64(o, name, "duration")?.ok_or(DecodeError::MissingField {
                action: name.into(),
                field: "duration",
            })?,
        },
        "wait" => Action::Wait {
            duration_secs: opt_f64(o, name, "duration")?,
        },
        "zoom" if version == Version::V20251124 => {
            let region = o.get("region").ok_or(DecodeError::MissingField {
                action: name.into(),
                field: "region",
            })?;
            match region.as_array().map(Vec::as_slice) {
                Some([a, b, c, d]) => {
                    let n = |v: &Value| super::fields::int(v, name, "region");
                    Action::Zoom {
                        region: Region {
                            x0: n(a)?,
                            y0: n(b)?,
                            x1: n(c)?,
                            y1: n(d)?,
                        },
                    }
                }
                _ => return Err(invalid(name, "region", "must be [x0, y0, x1, y1]")),
            }
        }
        other => return Err(unknown_action(VENDOR, other, KNOWN)),
    })
}

fn point(p: Point) -> Value {
    json!([p.x, p.y])
}

/// Encodes one action as the tool input.
pub fn encode_input(action: &Action) -> Result<Value, EncodeError> {
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_owned(), v);
    };
    match action {
        Action::Screenshot => put("action", "screenshot".into()),
        Action::CursorPosition => put("action", "cursor_position".into()),
        Action::Click {
            at,
            button,
            count,
            modifiers,
        } => {
            let name = match (button, count) {
                (Button::Left, 1) => "left_click",
                (Button::Right, 1) => "right_click",
                (Button::Middle, 1) => "middle_click",
                (Button::Left, 2) => "double_click",
                (Button::Left, 3) => "triple_click",
                _ => {
                    return Err(EncodeError::new(
                        VENDOR,
                        format!("{button:?} click x{count}"),
                    ));
                }
            };
            put("action", name.into());
            if let Some(p) = at {
                put("coordinate", point(*p));
            }
            if !modifiers.is_empty() {
                put("text", chord_xdotool(modifiers).into());
            }
        }
        Action::MouseDown { at, button } | Action::MouseUp { at, button } => {
            if *button != Button::Left {
                return Err(EncodeError::new(
                    VENDOR,
                    "mouse down/up of a non-left button",
                ));
            }
            let name = if matches!(action, Action::MouseDown { .. }) {
                "left_mouse_down"
            } else {
                "left_mouse_up"
            };
            put("action", name.into());
            if let Some(p) = at {
                put("coordinate", point(*p));
            }
        }
        Action::MouseMove { to, modifiers } => {
            put("action", "mouse_move".into());
            put("coordinate", point(*to));
            if !modifiers.is_empty() {
                put("text", chord_xdotool(modifiers).into());
            }
        }
        Action::Drag { path, modifiers } => {
            let [start, end] = path.as_slice() else {
                return Err(EncodeError::new(
                    VENDOR,
                    "a drag path of other than 2 points",
                ));
            };
            put("action", "left_click_drag".into());
            put("start_coordinate", point(*start));
            put("coordinate", point(*end));
            if !modifiers.is_empty() {
                put("text", chord_xdotool(modifiers).into());
            }
        }
        Action::Scroll {
            at,
            delta,
            modifiers,
        } => {
            let (direction, amount) = match *delta {
                ScrollDelta::Ticks { direction, amount } => (direction, amount),
                _ => return Err(EncodeError::new(VENDOR, "scrolling other than in ticks")),
            };
            put("action", "scroll".into());
            if let Some(p) = at {
                put("coordinate", point(*p));
            }
            put("scroll_direction", direction.as_str().into());
            put("scroll_amount", amount.into());
            if !modifiers.is_empty() {
                put("text", chord_xdotool(modifiers).into());
            }
        }
        Action::Type {
            text,
            at,
            press_enter,
            clear_before,
        } => {
            if at.is_some() || press_enter.is_some() || clear_before.is_some() {
                return Err(EncodeError::new(VENDOR, "typing at a point"));
            }
            put("action", "type".into());
            put("text", text.as_str().into());
        }
        Action::Key { chords } => {
            put("action", "key".into());
            let text: Vec<String> = chords.iter().map(|c| chord_xdotool(c)).collect();
            put("text", text.join(" ").into());
        }
        Action::HoldKey {
            keys,
            duration_secs,
        } => {
            put("action", "hold_key".into());
            put("text", chord_xdotool(keys).into());
            put("duration", super::fields::num(*duration_secs));
        }
        Action::Wait { duration_secs } => {
            put("action", "wait".into());
            if let Some(d) = duration_secs {
                put("duration", super::fields::num(*d));
            }
        }
        Action::Zoom { region } => {
            put("action", "zoom".into());
            put(
                "region",
                json!([region.x0, region.y0, region.x1, region.y1]),
            );
        }
        other => return Err(EncodeError::new(VENDOR, format!("`{}`", other.kind()))),
    }
    Ok(Value::Object(o))
}
