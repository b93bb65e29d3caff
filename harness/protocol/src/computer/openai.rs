//! OpenAI's computer-use tool (Responses API `computer_call` items).
//!
//! An item carries one `action` or a batch `actions: [...]` (run in order, then one
//! screenshot), plus `pending_safety_checks` that the next `computer_call_output` must
//! acknowledge (`acknowledged_safety_checks`). Keys are upper-case names in arrays
//! (`["CTRL", "A"]`); pointer actions may hold modifier `keys`.

use super::fields::{int_field, invalid, obj, str_field, type_text, unknown_action};
use super::keys::Key;
use super::{
    Action, Button, ComputerCall, CoordSpace, DecodeError, EncodeError, Point, ScrollDelta, Vendor,
};
use serde_json::{Map, Value, json};

const VENDOR: &str = "OpenAI";
const KNOWN: &str = "click, double_click, scroll, type, keypress, wait, move, drag, screenshot";

/// Decodes a `computer_call` item, or a bare action object.
pub fn decode_call(item: &Value) -> Result<ComputerCall, DecodeError> {
    let o = obj(item, " (a computer_call item or an action)")?;
    let is_item = o.get("type").and_then(Value::as_str) == Some("computer_call")
        || o.contains_key("action")
        || o.contains_key("actions");
    if !is_item {
        return Ok(ComputerCall {
            vendor: Vendor::OpenAi,
            call_id: None,
            actions: vec![decode_action(item)?],
            coords: CoordSpace::Display,
            safety_checks: Vec::new(),
            batched: false,
        });
    }
    let (actions, batched) = match (o.get("actions"), o.get("action")) {
        (Some(Value::Array(list)), _) => (
            list.iter()
                .map(decode_action)
                .collect::<Result<Vec<_>, _>>()?,
            true,
        ),
        (Some(_), _) => return Err(invalid("computer_call", "actions", "must be an array")),
        (None, Some(a)) => (vec![decode_action(a)?], false),
        (None, None) => {
            return Err(DecodeError::MissingField {
                action: "computer_call".into(),
                field: "action",
            });
        }
    };
    let safety_checks = match o.get("pending_safety_checks") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
            invalid(
                "computer_call",
                "pending_safety_checks",
                format!("is malformed: {e}"),
            )
        })?,
    };
    Ok(ComputerCall {
        vendor: Vendor::OpenAi,
        call_id: o.get("call_id").and_then(Value::as_str).map(str::to_owned),
        actions,
        coords: CoordSpace::Display,
        safety_checks,
        batched,
    })
}

/// Encodes a call as a `computer_call` item.
pub fn encode_call(call: &ComputerCall) -> Result<Value, EncodeError> {
    if call.coords != CoordSpace::Display {
        return Err(EncodeError::new(VENDOR, "normalized coordinates"));
    }
    let mut item = json!({"type": "computer_call"});
    if let Some(id) = &call.call_id {
        item["call_id"] = id.as_str().into();
    }
    if call.batched || call.actions.len() != 1 {
        let list = call
            .actions
            .iter()
            .map(encode_action)
            .collect::<Result<Vec<_>, _>>()?;
        item["actions"] = Value::Array(list);
    } else {
        item["action"] = encode_action(&call.actions[0])?;
    }
    item["pending_safety_checks"] = serde_json::to_value(&call.safety_checks)
        .map_err(|e| EncodeError::new(VENDOR, format!("these safety checks: {e}")))?;
    Ok(item)
}

fn keys(o: &Map<String, Value>, action: &str) -> Result<Vec<Key>, DecodeError> {
    match o.get("keys") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|k| match k.as_str() {
                Some(s) => Key::parse_openai(s),
                None => Err(invalid(action, "keys", "must be an array of strings")),
            })
            .collect(),
        Some(_) => Err(invalid(action, "keys", "must be an array of strings")),
    }
}

fn xy(o: &Map<String, Value>, action: &str) -> Result<Point, DecodeError> {
    Ok(Point {
        x: int_field(o, action, "x")?,
        y: int_field(o, action, "y")?,
    })
}

/// Decodes one action object (`{"type": "click", "button": "left", "x": 1, "y": 2}`).
pub fn decode_action(v: &Value) -> Result<Action, DecodeError> {
    let o = obj(v, " with a `type` field")?;
    let name = str_field(o, "action", "type")?;
    Ok(match name {
        "screenshot" => Action::Screenshot,
        "click" => {
            let button = match o.get("button").and_then(Value::as_str).unwrap_or("left") {
                "left" => Button::Left,
                "right" => Button::Right,
                "wheel" | "middle" => Button::Middle,
                "back" => Button::Back,
                "forward" => Button::Forward,
                other => {
                    return Err(invalid(
                        name,
                        "button",
                        format!("`{other}` is not one of left, right, wheel, back, forward"),
                    ));
                }
            };
            Action::Click {
                at: Some(xy(o, name)?),
                button,
                count: 1,
                modifiers: keys(o, name)?,
            }
        }
        "double_click" => Action::Click {
            at: Some(xy(o, name)?),
            button: Button::Left,
            count: 2,
            modifiers: keys(o, name)?,
        },
        "move" => Action::MouseMove {
            to: xy(o, name)?,
            modifiers: keys(o, name)?,
        },
        "scroll" => Action::Scroll {
            at: Some(xy(o, name)?),
            delta: ScrollDelta::Pixels {
                x: int_field(o, name, "scroll_x")?,
                y: int_field(o, name, "scroll_y")?,
            },
            modifiers: keys(o, name)?,
        },
        "drag" => {
            let path = match o.get("path") {
                Some(Value::Array(points)) => points
                    .iter()
                    .map(|p| obj(p, " ({x, y})").and_then(|p| xy(p, name)))
                    .collect::<Result<Vec<_>, _>>()?,
                _ => {
                    return Err(DecodeError::MissingField {
                        action: name.into(),
                        field: "path",
                    });
                }
            };
            if path.len() < 2 {
                return Err(invalid(name, "path", "needs at least two points"));
            }
            Action::Drag {
                path,
                modifiers: keys(o, name)?,
            }
        }
        "type" => type_text(o, name)?,
        "keypress" => {
            let chord = keys(o, name)?;
            if chord.is_empty() {
                return Err(DecodeError::MissingField {
                    action: name.into(),
                    field: "keys",
                });
            }
            Action::Key {
                chords: vec![chord],
            }
        }
        "wait" => Action::Wait {
            duration_secs: None,
        },
        other => return Err(unknown_action(VENDOR, other, KNOWN)),
    })
}

fn put_keys(o: &mut Value, modifiers: &[Key]) {
    if !modifiers.is_empty() {
        o["keys"] = modifiers
            .iter()
            .map(|k| Value::from(k.to_openai()))
            .collect();
    }
}

fn require_at(at: &Option<Point>, what: &str) -> Result<Point, EncodeError> {
    at.ok_or_else(|| EncodeError::new(VENDOR, format!("{what} without a position")))
}

/// Encodes one action object.
pub fn encode_action(action: &Action) -> Result<Value, EncodeError> {
    Ok(match action {
        Action::Screenshot => json!({"type": "screenshot"}),
        Action::Click {
            at,
            button,
            count,
            modifiers,
        } => {
            let p = require_at(at, "a click")?;
            let mut v = match (count, button) {
                (1, _) => {
                    let b = match button {
                        Button::Left => "left",
                        Button::Right => "right",
                        Button::Middle => "wheel",
                        Button::Back => "back",
                        Button::Forward => "forward",
                    };
                    json!({"type": "click", "button": b, "x": p.x, "y": p.y})
                }
                (2, Button::Left) => json!({"type": "double_click", "x": p.x, "y": p.y}),
                _ => {
                    return Err(EncodeError::new(
                        VENDOR,
                        format!("{button:?} click x{count}"),
                    ));
                }
            };
            put_keys(&mut v, modifiers);
            v
        }
        Action::MouseMove { to, modifiers } => {
            let mut v = json!({"type": "move", "x": to.x, "y": to.y});
            put_keys(&mut v, modifiers);
            v
        }
        Action::Scroll {
            at,
            delta: ScrollDelta::Pixels { x, y },
            modifiers,
        } => {
            let p = require_at(at, "a scroll")?;
            let mut v = json!({"type": "scroll", "x": p.x, "y": p.y, "scroll_x": x, "scroll_y": y});
            put_keys(&mut v, modifiers);
            v
        }
        Action::Drag { path, modifiers } => {
            let pts: Vec<Value> = path.iter().map(|p| json!({"x": p.x, "y": p.y})).collect();
            let mut v = json!({"type": "drag", "path": pts});
            put_keys(&mut v, modifiers);
            v
        }
        Action::Type {
            text,
            at: None,
            press_enter: None,
            clear_before: None,
        } => json!({"type": "type", "text": text}),
        Action::Key { chords } if chords.len() == 1 => {
            let keys: Vec<String> = chords[0].iter().map(Key::to_openai).collect();
            json!({"type": "keypress", "keys": keys})
        }
        Action::Wait {
            duration_secs: None,
        } => json!({"type": "wait"}),
        other => {
            return Err(EncodeError::new(
                VENDOR,
                format!("this `{}` action", other.kind()),
            ));
        }
    })
}
