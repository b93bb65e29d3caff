//! Reading and writing the fields of vendor JSON, shared by the vendor codecs: objects,
//! strings, whole-number coordinates, `[x, y]` pairs, each failing with a [`DecodeError`]
//! that names the action and field.

use super::action::{Action, Point};
use super::error::DecodeError;
use serde_json::{Map, Value};

pub fn obj<'a>(v: &'a Value, what: &'static str) -> Result<&'a Map<String, Value>, DecodeError> {
    v.as_object().ok_or(DecodeError::NotAnObject(what))
}

pub fn str_field<'a>(
    o: &'a Map<String, Value>,
    action: &str,
    field: &'static str,
) -> Result<&'a str, DecodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Err(DecodeError::MissingField {
            action: action.into(),
            field,
        }),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(invalid(action, field, "must be a string")),
    }
}

pub fn opt_str<'a>(
    o: &'a Map<String, Value>,
    action: &str,
    field: &'static str,
) -> Result<Option<&'a str>, DecodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(action, field, "must be a string")),
    }
}

pub fn invalid(action: &str, field: &'static str, reason: impl Into<String>) -> DecodeError {
    DecodeError::InvalidField {
        action: action.into(),
        field,
        reason: reason.into(),
    }
}

/// An action name the vendor's codec does not know; `known` lists the ones it does.
pub fn unknown_action(vendor: &'static str, action: &str, known: &'static str) -> DecodeError {
    DecodeError::UnknownAction {
        vendor,
        action: action.into(),
        known,
    }
}

/// A `type` action as Anthropic and OpenAI spell it: the `text` alone, typed where the
/// focus is.
pub fn type_text(o: &Map<String, Value>, action: &str) -> Result<Action, DecodeError> {
    Ok(Action::Type {
        text: str_field(o, action, "text")?.to_owned(),
        at: None,
        press_enter: None,
        clear_before: None,
    })
}

/// An integer coordinate. Models sometimes send `12.0`; whole floats are accepted,
/// fractional ones are rejected rather than silently rounded.
pub fn int(v: &Value, action: &str, field: &'static str) -> Result<i64, DecodeError> {
    if let Some(i) = v.as_i64() {
        return Ok(i);
    }
    match v.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => Ok(f as i64),
        Some(f) => Err(invalid(
            action,
            field,
            format!("must be a whole number, got {f}"),
        )),
        None => Err(invalid(action, field, "must be a number")),
    }
}

pub fn int_field(
    o: &Map<String, Value>,
    action: &str,
    field: &'static str,
) -> Result<i64, DecodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Err(DecodeError::MissingField {
            action: action.into(),
            field,
        }),
        Some(v) => int(v, action, field),
    }
}

pub fn opt_f64(
    o: &Map<String, Value>,
    action: &str,
    field: &'static str,
) -> Result<Option<f64>, DecodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(Some(f)),
            _ => Err(invalid(action, field, "must be a non-negative number")),
        },
    }
}

pub fn opt_bool(
    o: &Map<String, Value>,
    action: &str,
    field: &'static str,
) -> Result<Option<bool>, DecodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(invalid(action, field, "must be true or false")),
    }
}

/// `[x, y]`
pub fn pair(v: &Value, action: &str, field: &'static str) -> Result<Point, DecodeError> {
    match v.as_array().map(Vec::as_slice) {
        Some([x, y]) => Ok(Point {
            x: int(x, action, field)?,
            y: int(y, action, field)?,
        }),
        _ => Err(invalid(action, field, "must be [x, y]")),
    }
}

/// A number as JSON, integral when it is a whole number (so `5.0` seconds re-encodes as `5`
/// only if it was sent as `5`; we keep what serde_json parsed).
pub fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}
