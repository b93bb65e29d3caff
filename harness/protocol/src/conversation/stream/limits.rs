//! Bounds on what a stream accumulator takes from one upstream turn.
//!
//! An upstream model server is not trusted: it may send a block index of two billion, a
//! tool call's arguments in a million pieces, or events that never end. Each accumulator
//! checks every index against [`StreamLimits::max_blocks`] before it stores anything under
//! it, and counts every event's size against [`StreamLimits::max_bytes`], so what it holds
//! stays proportional to what it was allowed to read. Breaking a bound is a typed
//! [`ConversionError`], fatal to that turn only.

use serde_json::Value;

use crate::conversation::ConversionError;

/// Blocks per turn by default: Anthropic content blocks, Chat tool calls, Responses output
/// items. Real turns have a handful.
pub const MAX_BLOCKS: usize = 4096;

/// Bytes of events per turn by default (JSON text, roughly as sent). The gateway reads at
/// most 32 MiB of an upstream's answer; this bounds an accumulator used on its own.
pub const MAX_TURN_BYTES: usize = 64 * 1024 * 1024;

/// The bounds one accumulator enforces on one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Blocks per turn; a block index must be below it.
    pub max_blocks: usize,
    /// Bytes of event JSON per turn, all events counted.
    pub max_bytes: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            max_blocks: MAX_BLOCKS,
            max_bytes: MAX_TURN_BYTES,
        }
    }
}

/// The limits and what one turn has used of them so far.
#[derive(Debug, Default)]
pub(super) struct Budget {
    pub(super) limits: StreamLimits,
    used: usize,
}

impl Budget {
    pub(super) fn new(limits: StreamLimits) -> Self {
        Budget { limits, used: 0 }
    }

    /// Counts `data` against the turn's bytes. Each event is counted once whatever the
    /// accumulator keeps of it, which bounds what it keeps.
    pub(super) fn charge(&mut self, data: &Value) -> Result<(), ConversionError> {
        self.used = self.used.saturating_add(json_size(data));
        if self.used > self.limits.max_bytes {
            return Err(ConversionError::TooLarge {
                what: "bytes of events".into(),
                max: self.limits.max_bytes,
            });
        }
        Ok(())
    }

    /// The block index in `value` (`None` when absent or `null`), refused unless it is an
    /// integer below the block limit.
    pub(super) fn index(
        &self,
        value: Option<&Value>,
        field: &str,
    ) -> Result<Option<usize>, ConversionError> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let index = value
            .as_u64()
            .ok_or_else(|| ConversionError::field(field))?;
        match usize::try_from(index) {
            Ok(i) if i < self.limits.max_blocks => Ok(Some(i)),
            _ => Err(ConversionError::IndexOutOfRange {
                field: field.to_owned(),
                index,
                max: self.limits.max_blocks.saturating_sub(1) as u64,
            }),
        }
    }
}

/// About how many bytes `value` takes as JSON text. Iterative, so a deeply nested value
/// built by a caller cannot overflow the stack here.
pub(super) fn json_size(value: &Value) -> usize {
    let mut size = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        let own = match value {
            Value::Null | Value::Bool(_) => 5,
            // At most 20 digits and a sign, exponent or point.
            Value::Number(_) => 24,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                pending.extend(items);
                items.len() + 2
            }
            Value::Object(map) => {
                let mut keys = 2usize;
                for (key, item) in map {
                    keys = keys.saturating_add(key.len() + 4);
                    pending.push(item);
                }
                keys
            }
        };
        size = size.saturating_add(own);
    }
    size
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn json_size_is_about_the_text_length() {
        let value = json!({"type": "text_delta", "text": "hello", "index": [1, 2, null]});
        let text = value.to_string().len();
        let size = json_size(&value);
        assert!(size >= text && size <= 4 * text, "{size} vs {text}");
    }

    #[test]
    fn json_size_of_a_deep_value_does_not_recurse() {
        let mut value = Value::Null;
        for _ in 0..200_000 {
            value = Value::Array(vec![value]);
        }
        assert!(json_size(&value) > 200_000);
        // Dropping it recursively would overflow the stack: take it apart iteratively.
        let mut pending = vec![value];
        while let Some(mut value) = pending.pop() {
            if let Value::Array(items) = &mut value {
                pending.append(items);
            }
        }
    }

    #[test]
    fn an_index_past_the_limit_is_refused_before_use() {
        let budget = Budget::default();
        assert_eq!(budget.index(Some(&json!(3)), "index"), Ok(Some(3)));
        assert_eq!(budget.index(Some(&Value::Null), "index"), Ok(None));
        assert_eq!(budget.index(None, "index"), Ok(None));
        assert!(matches!(
            budget.index(Some(&json!(2_000_000_000u64)), "index"),
            Err(ConversionError::IndexOutOfRange {
                index: 2_000_000_000,
                max: 4095,
                ..
            })
        ));
        assert!(matches!(
            budget.index(Some(&json!(-1)), "index"),
            Err(ConversionError::Field { .. })
        ));
    }
}
