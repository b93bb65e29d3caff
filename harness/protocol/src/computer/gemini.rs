//! Gemini's computer-use tool: one `function_call` per action, coordinates on a 0–999 grid
//! (see [`super::GEMINI_GRID`]), keys as `Control+C`. A risky call carries
//! `args.safety_decision = {"decision": "require_confirmation", "explanation"}`; the
//! function response then says `safety_acknowledgement: "true"`.

use super::fields::{int_field, invalid, obj, opt_bool, str_field, unknown_action};
use super::keys::Key;
use super::{
    Action, Button, ComputerCall, DecodeError, Direction, EncodeError, GEMINI_GRID, Point,
    SafetyCheck, ScrollDelta, Vendor,
};
use serde_json::{Map, Value, json};

const VENDOR: &str = "Gemini";
const KNOWN: &str = "open_web_browser, wait_5_seconds, go_back, go_forward, search, navigate, \
    click_at, hover_at, type_text_at, key_combination, scroll_document, scroll_at, drag_and_drop";

/// The [`SafetyCheck::id`] given to a Gemini `safety_decision` (Gemini has no check ids).
pub const SAFETY_CHECK_ID: &str = "gemini_safety_decision";

/// Decodes `{"name", "args", "id"?}`, also wrapped as `{"function_call": ...}` or
/// `{"functionCall": ...}`.
pub fn decode_function_call(v: &Value) -> Result<ComputerCall, DecodeError> {
    let o = obj(v, " (a function_call)")?;
    if let Some(inner) = o.get("function_call").or_else(|| o.get("functionCall")) {
        return decode_function_call(inner);
    }
    let name = str_field(o, "function_call", "name")?;
    let empty = Map::new();
    let args = match o.get("args") {
        None | Some(Value::Null) => &empty,
        Some(a) => obj(a, " (`args`)")?,
    };
    let mut safety_checks = Vec::new();
    if let Some(sd) = args.get("safety_decision") {
        let sd = obj(sd, " (`safety_decision`)")?;
        safety_checks.push(SafetyCheck {
            id: SAFETY_CHECK_ID.into(),
            code: sd
                .get("decision")
                .and_then(Value::as_str)
                .map(str::to_owned),
            message: sd
                .get("explanation")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
    }
    Ok(ComputerCall {
        vendor: Vendor::Gemini,
        call_id: o.get("id").and_then(Value::as_str).map(str::to_owned),
        actions: vec![decode_action(name, args)?],
        coords: GEMINI_GRID,
        safety_checks,
        batched: false,
    })
}

fn xy(a: &Map<String, Value>, name: &str) -> Result<Point, DecodeError> {
    Ok(Point {
        x: int_field(a, name, "x")?,
        y: int_field(a, name, "y")?,
    })
}

fn direction(a: &Map<String, Value>, name: &str) -> Result<Direction, DecodeError> {
    Direction::parse(str_field(a, name, "direction")?)
        .ok_or_else(|| invalid(name, "direction", "must be up, down, left or right"))
}

/// Decodes one function by name and args.
pub fn decode_action(name: &str, a: &Map<String, Value>) -> Result<Action, DecodeError> {
    Ok(match name {
        "open_web_browser" => Action::OpenWebBrowser,
        "wait_5_seconds" => Action::Wait {
            duration_secs: Some(5.0),
        },
        "go_back" => Action::GoBack,
        "go_forward" => Action::GoForward,
        "search" => Action::Search,
        "navigate" => Action::Navigate {
            url: str_field(a, name, "url")?.to_owned(),
        },
        "click_at" => Action::Click {
            at: Some(xy(a, name)?),
            button: Button::Left,
            count: 1,
            modifiers: Vec::new(),
        },
        "hover_at" => Action::MouseMove {
            to: xy(a, name)?,
            modifiers: Vec::new(),
        },
        "type_text_at" => Action::Type {
            text: str_field(a, name, "text")?.to_owned(),
            at: Some(xy(a, name)?),
            press_enter: opt_bool(a, name, "press_enter")?,
            clear_before: opt_bool(a, name, "clear_before_typing")?,
        },
        "key_combination" => {
            let keys = str_field(a, name, "keys")?;
            Action::Key {
                chords: vec![Key::parse_chord(keys)?],
            }
        }
        "scroll_document" => Action::Scroll {
            at: None,
            delta: ScrollDelta::Page {
                direction: direction(a, name)?,
            },
            modifiers: Vec::new(),
        },
        "scroll_at" => {
            let magnitude = match a.get("magnitude") {
                None | Some(Value::Null) => None,
                Some(_) => Some(
                    u32::try_from(int_field(a, name, "magnitude")?)
                        .map_err(|_| invalid(name, "magnitude", "must be 0..=999"))?,
                ),
            };
            Action::Scroll {
                at: Some(xy(a, name)?),
                delta: ScrollDelta::Grid {
                    direction: direction(a, name)?,
                    magnitude,
                },
                modifiers: Vec::new(),
            }
        }
        "drag_and_drop" => Action::Drag {
            path: vec![
                xy(a, name)?,
                Point {
                    x: int_field(a, name, "destination_x")?,
                    y: int_field(a, name, "destination_y")?,
                },
            ],
            modifiers: Vec::new(),
        },
        other => return Err(unknown_action(VENDOR, other, KNOWN)),
    })
}

/// Encodes a one-action call as a `function_call` (`{"name", "args", "id"?}`).
pub fn encode_function_call(call: &ComputerCall) -> Result<Value, EncodeError> {
    let [action] = call.actions.as_slice() else {
        return Err(EncodeError::new(
            VENDOR,
            "more than one action per function_call",
        ));
    };
    if call.coords != GEMINI_GRID {
        return Err(EncodeError::new(
            VENDOR,
            "coordinates outside its 0-999 grid",
        ));
    }
    let (name, mut args) = encode_action(action)?;
    if let Some(check) = call.safety_checks.iter().find(|c| c.id == SAFETY_CHECK_ID) {
        let mut sd = Map::new();
        if let Some(code) = &check.code {
            sd.insert("decision".into(), code.as_str().into());
        }
        if let Some(msg) = &check.message {
            sd.insert("explanation".into(), msg.as_str().into());
        }
        args.insert("safety_decision".into(), Value::Object(sd));
    }
    let mut v = json!({"name": name, "args": Value::Object(args)});
    if let Some(id) = &call.call_id {
        v["id"] = id.as_str().into();
    }
    Ok(v)
}

/// Encodes one action as `(function name, args)`.
pub fn encode_action(action: &Action) -> Result<(&'static str, Map<String, Value>), EncodeError> {
    let mut a = Map::new();
    let xy = |a: &mut Map<String, Value>, p: &Point| {
        a.insert("x".into(), p.x.into());
        a.insert("y".into(), p.y.into());
    };
    let name = match action {
        Action::OpenWebBrowser => "open_web_browser",
        Action::Wait {
            duration_secs: None | Some(5.0),
        } => "wait_5_seconds",
        Action::GoBack => "go_back",
        Action::GoForward => "go_forward",
        Action::Search => "search",
        Action::Navigate { url } => {
            a.insert("url".into(), url.as_str().into());
            "navigate"
        }
        Action::Click {
            at: Some(p),
            button: Button::Left,
            count: 1,
            modifiers,
        } if modifiers.is_empty() => {
            xy(&mut a, p);
            "click_at"
        }
        Action::MouseMove { to, modifiers } if modifiers.is_empty() => {
            xy(&mut a, to);
            "hover_at"
        }
        Action::Type {
            text,
            at: Some(p),
            press_enter,
            clear_before,
        } => {
            xy(&mut a, p);
            a.insert("text".into(), text.as_str().into());
            if let Some(b) = press_enter {
                a.insert("press_enter".into(), (*b).into());
            }
            if let Some(b) = clear_before {
                a.insert("clear_before_typing".into(), (*b).into());
            }
            "type_text_at"
        }
        Action::Key { chords } if chords.len() == 1 => {
            let keys: Vec<String> = chords[0].iter().map(Key::to_gemini).collect();
            a.insert("keys".into(), keys.join("+").into());
            "key_combination"
        }
        Action::Scroll {
            at: None,
            delta: ScrollDelta::Page { direction },
            modifiers,
        } if modifiers.is_empty() => {
            a.insert("direction".into(), direction.as_str().into());
            "scroll_document"
        }
        Action::Scroll {
            at: Some(p),
            delta:
                ScrollDelta::Grid {
                    direction,
                    magnitude,
                },
            modifiers,
        } if modifiers.is_empty() => {
            xy(&mut a, p);
            a.insert("direction".into(), direction.as_str().into());
            if let Some(m) = magnitude {
                a.insert("magnitude".into(), (*m).into());
            }
            "scroll_at"
        }
        Action::Drag { path, modifiers } if path.len() == 2 && modifiers.is_empty() => {
            xy(&mut a, &path[0]);
            a.insert("destination_x".into(), path[1].x.into());
            a.insert("destination_y".into(), path[1].y.into());
            "drag_and_drop"
        }
        other => {
            return Err(EncodeError::new(
                VENDOR,
                format!("this `{}` action", other.kind()),
            ));
        }
    };
    Ok((name, a))
}
