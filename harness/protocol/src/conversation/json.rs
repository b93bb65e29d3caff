//! Small helpers over `serde_json` maps.

use serde_json::{Map, Value};

use super::ConversionError;

pub(crate) fn to_object(value: &Value, field: &str) -> Result<Map<String, Value>, ConversionError> {
    value
        .as_object()
        .cloned()
        .ok_or_else(|| ConversionError::field(field))
}

/// The object inside a `json!({...})` literal.
pub(crate) fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Remove and return `key` if it is a string (anything else stays in the map).
pub(crate) fn take_str(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key) {
        Some(Value::String(_)) => map.remove(key).and_then(|v| v.as_str().map(str::to_owned)),
        _ => None,
    }
}

pub(crate) fn take_u64(map: &mut Map<String, Value>, key: &str) -> Option<u64> {
    let n = map.get(key).and_then(Value::as_u64)?;
    map.remove(key);
    Some(n)
}

pub(crate) fn take_f64(map: &mut Map<String, Value>, key: &str) -> Option<f64> {
    let n = map.get(key).and_then(Value::as_f64)?;
    map.remove(key);
    Some(n)
}

pub(crate) fn take_bool(map: &mut Map<String, Value>, key: &str) -> Option<bool> {
    let b = map.get(key).and_then(Value::as_bool)?;
    map.remove(key);
    Some(b)
}
