//! The stream accumulators (Anthropic Messages events, Chat Completions chunks, Responses
//! events) on any sequence of events: the input is a JSON array of `[event name, data]`
//! pairs, fed to all three. Each returns progress, a typed error or a turn and never panics
//! or aborts (a block index of 2e9 once grew a vector to that size: libFuzzer's malloc limit
//! catches such an allocation); what finishes, every vendor's event encoder takes.

#![no_main]

use cordon_protocol::conversation::stream::feed_each_accumulator;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let events: Vec<(String, Value)> = items
        .into_iter()
        .map(|item| match item {
            Value::Array(mut pair) if pair.len() == 2 => {
                let data = pair.pop().unwrap_or_default();
                let name = pair.pop().and_then(|n| n.as_str().map(str::to_owned));
                (name.unwrap_or_default(), data)
            }
            // A bare value is a Chat chunk (no event name).
            other => (String::new(), other),
        })
        .collect();
    feed_each_accumulator(&events);
});
