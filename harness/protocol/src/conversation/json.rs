//! Small helpers over `serde_json` maps.

use serde_json::{Map, Value};

use super::{ConversionError, Extra};

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

/// Removes `key` when it is `null`, which the vendors' APIs treat as absent. Kept in the
/// map, it would be written back after the encoder's own value for that key and replace it.
fn drop_null(map: &mut Map<String, Value>, key: &str) {
    if map.get(key).is_some_and(Value::is_null) {
        map.remove(key);
    }
}

/// Remove and return `key` if it is a string (`null` is removed; anything else stays in
/// the map).
pub(crate) fn take_str(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    drop_null(map, key);
    match map.get(key) {
        Some(Value::String(_)) => map.remove(key).and_then(|v| v.as_str().map(str::to_owned)),
        _ => None,
    }
}

pub(crate) fn take_u64(map: &mut Map<String, Value>, key: &str) -> Option<u64> {
    drop_null(map, key);
    let n = map.get(key).and_then(Value::as_u64)?;
    map.remove(key);
    Some(n)
}

pub(crate) fn take_f64(map: &mut Map<String, Value>, key: &str) -> Option<f64> {
    drop_null(map, key);
    let n = map.get(key).and_then(Value::as_f64)?;
    map.remove(key);
    Some(n)
}

pub(crate) fn take_bool(map: &mut Map<String, Value>, key: &str) -> Option<bool> {
    drop_null(map, key);
    let b = map.get(key).and_then(Value::as_bool)?;
    map.remove(key);
    Some(b)
}

/// The strings of a JSON array, other items skipped; anything but an array has none.
pub(crate) fn strings(value: Option<Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Copy `extra` into `map` when it came from this vendor (`same`).
pub(crate) fn extend(map: &mut Map<String, Value>, extra: &Extra, same: bool) {
    if !same {
        return;
    }
    for (k, v) in extra {
        map.insert(k.clone(), v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by the property tests: `"instructions": null` beside a system message in
    /// `input` replaced the encoded instructions on the way back.
    #[test]
    fn null_is_taken_as_absent() {
        let mut map = obj(json!({"a": null, "b": null, "c": null, "d": null, "e": 1}));
        assert_eq!(take_str(&mut map, "a"), None);
        assert_eq!(take_u64(&mut map, "b"), None);
        assert_eq!(take_f64(&mut map, "c"), None);
        assert_eq!(take_bool(&mut map, "d"), None);
        assert_eq!(take_str(&mut map, "e"), None);
        assert_eq!(Value::Object(map), json!({"e": 1}));
    }
}
