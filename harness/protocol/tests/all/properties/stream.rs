//! Property tests of the stream accumulators: on any sequence of events, in the vendors'
//! vocabulary or not, each accumulator returns progress, a typed error or a turn, and never
//! panics; what it finishes, every vendor's event encoder takes.

use cordon_protocol::conversation::stream::{
    Accumulator, AnthropicAccumulator, ChatAccumulator, ResponsesAccumulator, feed_each_accumulator,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{config, json, word};

const EVENT_NAMES: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "",
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.output_item.done",
    "response.function_call_arguments.delta",
    "response.completed",
    "response.incomplete",
    "response.failed",
];

const FIELDS: &[&str] = &[
    "index",
    "output_index",
    "content_block",
    "delta",
    "choices",
    "item",
    "response",
    "message",
    "usage",
    "error",
    "finish_reason",
];

/// A block index: mostly small, sometimes huge or not a number at all.
fn index() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0u64..4).prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => Just(json!(2_000_000_000u64)),
        1 => json(),
    ]
}

/// A field's value: a fragment of some vendor's events (with an index of any kind where
/// one belongs), or any JSON.
fn fragment() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "text", "text": ""})),
        Just(json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}})),
        Just(json!({"type": "thinking", "thinking": "", "signature": ""})),
        Just(json!({"type": "text_delta", "text": "hi"})),
        Just(json!({"type": "input_json_delta", "partial_json": "{\"a\":"})),
        Just(json!({"type": "input_json_delta", "partial_json": "1}"})),
        Just(json!({"type": "signature_delta", "signature": "s"})),
        Just(json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})),
        Just(json!({"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "hi"}]})),
        Just(json!({"id": "resp_1", "output": [], "status": "completed"})),
        Just(json!({"id": "msg_1", "content": [], "usage": {"input_tokens": 1}})),
        Just(json!({"input_tokens": 1, "output_tokens": 2})),
        Just(json!([{"delta": {"content": "hi"}, "finish_reason": "stop"}])),
        (index(), word()).prop_map(|(i, arguments)| json!([{"delta": {"tool_calls": [
            {"index": i, "id": "call_1", "function": {"name": "f", "arguments": arguments}}
        ]}}])),
        json(),
    ]
}

/// One event: a vendor's name with fields of its vocabulary, Chat's terminator, or noise.
fn event() -> impl Strategy<Value = (String, Value)> {
    let fields = prop::collection::vec((prop::sample::select(FIELDS), fragment(), index()), 0..5);
    let structured = (prop::sample::select(EVENT_NAMES), fields).prop_map(|(name, fields)| {
        let mut data = Map::new();
        data.insert("type".into(), json!(name));
        for (field, fragment, index) in fields {
            let value = if field.ends_with("index") {
                index
            } else {
                fragment
            };
            data.insert(field.into(), value);
        }
        (name.to_owned(), Value::Object(data))
    });
    prop_oneof![
        8 => structured,
        1 => Just((String::new(), json!("[DONE]"))),
        1 => (word(), json()),
    ]
}

/// The vendors' own streams of the conversation fixtures (the snapshots of
/// `conversation.rs`), to mutate.
fn vendor_streams() -> [Vec<(String, Value)>; 3] {
    [
        include_str!("../snapshots/anthropic_stream.json"),
        include_str!("../snapshots/chat_stream.json"),
        include_str!("../snapshots/responses_stream.json"),
    ]
    .map(|text| serde_json::from_str(text).unwrap())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn stream_accumulators_never_panic_on_arbitrary_events(
        events in prop::collection::vec(event(), 0..24)
    ) {
        feed_each_accumulator(&events);
    }

    #[test]
    fn stream_accumulators_never_panic_on_mutated_vendor_streams(
        which in 0..3usize,
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0..4u8, prop::sample::select(FIELDS), fragment(), index()),
            1..5,
        ),
    ) {
        let mut events = vendor_streams()[which].clone();
        for (at, kind, field, fragment, index) in edits {
            if events.is_empty() {
                break;
            }
            let at = at.index(events.len());
            match kind {
                0 => {
                    let value = if field.ends_with("index") { index } else { fragment };
                    if let Some(data) = events[at].1.as_object_mut() {
                        data.insert(field.into(), value);
                    }
                }
                1 => {
                    events.remove(at);
                }
                2 => {
                    let copy = events[at].clone();
                    events.insert(at, copy);
                }
                _ => {
                    let moved = events.remove(at);
                    events.push(moved);
                }
            }
        }
        feed_each_accumulator(&events);
    }
}

/// The unmutated streams decode; the mutated ones above start from something real.
#[test]
fn the_vendor_streams_accumulate() {
    let [anthropic, chat, responses] = vendor_streams();
    let mut accumulator = AnthropicAccumulator::default();
    for (name, data) in &anthropic {
        accumulator.push(name, data).unwrap();
    }
    accumulator.finish().unwrap();
    let mut accumulator = ChatAccumulator::default();
    for (name, data) in &chat {
        accumulator.push(name, data).unwrap();
    }
    accumulator.finish().unwrap();
    let mut accumulator = ResponsesAccumulator::default();
    for (name, data) in &responses {
        accumulator.push(name, data).unwrap();
    }
    accumulator.finish().unwrap();
}

/// The hostile seeds of the `stream_accumulators` fuzz target: indices of 2e9 and shapes
/// that once panicked.
#[test]
fn the_fuzz_targets_hostile_seeds_keep_the_properties() {
    for text in [
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/hostile_anthropic_index.json"
        ),
        include_str!("../../../../../tests/fuzz/seeds/stream_accumulators/hostile_chat_index.json"),
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/hostile_responses_index.json"
        ),
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/hostile_non_object_block.json"
        ),
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/hostile_non_object_usage.json"
        ),
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/hostile_non_object_response.json"
        ),
        include_str!(
            "../../../../../tests/fuzz/seeds/stream_accumulators/anthropic_stop_twice.json"
        ),
    ] {
        let events: Vec<(String, Value)> = serde_json::from_str(text).unwrap();
        feed_each_accumulator(&events);
    }
}
