//! What a trajectory hides: text typed into a password field becomes [`REDACTED`] in the
//! recorded call and in the vendor JSON as sent.

use cordon_protocol::computer::{Action, ComputerCall};
use serde_json::Value;

/// What a trajectory shows instead of text typed into a password field.
pub const REDACTED: &str = "[redacted]";

/// `call` as a trajectory records it: the text of each `type` action at the indices in
/// `redacted` (the gate saw it go into a password field) replaced by [`REDACTED`].
pub fn redact_call(call: &ComputerCall, redacted: &[usize]) -> ComputerCall {
    let mut call = call.clone();
    for &index in redacted {
        if let Some(Action::Type { text, .. }) = call.actions.get_mut(index) {
            *text = REDACTED.to_owned();
        }
    }
    call
}

/// The typed texts [`redact_call`] hides (non-empty ones only).
pub fn secrets<'a>(call: &'a ComputerCall, redacted: &[usize]) -> Vec<&'a str> {
    redacted
        .iter()
        .filter_map(|&index| match call.actions.get(index) {
            Some(Action::Type { text, .. }) if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Replaces every occurrence of each secret in the strings (and keys) of `value`, such as
/// the vendor JSON a call arrived in, whose shape differs per vendor.
pub fn redact_value(value: &mut Value, secrets: &[&str]) {
    if secrets.is_empty() {
        return;
    }
    let scrub = |text: &str| {
        secrets.iter().fold(text.to_owned(), |text, secret| {
            text.replace(secret, REDACTED)
        })
    };
    match value {
        Value::String(text) => {
            if secrets.iter().any(|secret| text.contains(secret)) {
                *text = scrub(text);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| redact_value(item, secrets)),
        Value::Object(map) => {
            let keyed = map
                .keys()
                .any(|key| secrets.iter().any(|s| key.contains(s)));
            if keyed {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(key, value)| (scrub(&key), value))
                    .collect();
            }
            map.values_mut()
                .for_each(|item| redact_value(item, secrets));
        }
        _ => {}
    }
}
