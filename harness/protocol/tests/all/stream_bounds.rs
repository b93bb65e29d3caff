//! A hostile upstream's stream against the accumulators: indices of two billion, bytes past
//! the limit, shapes that once panicked. Each is a typed error, and what the accumulator
//! allocates on the way stays small (measured by the allocator below).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use cordon_protocol::conversation::stream::{
    Accumulator, AnthropicAccumulator, ChatAccumulator, Progress, ResponsesAccumulator,
    StreamLimits,
};
use cordon_protocol::conversation::{ContentBlock, ConversionError};
use serde_json::{Value, json};

/// The system allocator, counting the bytes each thread asks for, so a test can tell how
/// much one call allocated whatever the other tests do meanwhile.
struct Metered;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to `System`; the counter is a const-initialised
// thread local without destructor, so counting never allocates.
#[allow(
    unsafe_code,
    reason = "a counting allocator, to measure what a hostile event makes an accumulator allocate"
)]
unsafe impl GlobalAlloc for Metered {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get().saturating_add(layout.size())));
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED.try_with(|n| n.set(n.get().saturating_add(new_size)));
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static METERED: Metered = Metered;

/// `push` of one event, and the bytes this thread allocated for it.
fn push_metered(
    accumulator: &mut dyn Accumulator,
    name: &str,
    data: &Value,
) -> (Result<Progress, ConversionError>, usize) {
    let before = ALLOCATED.with(Cell::get);
    let result = accumulator.push(name, data);
    (result, ALLOCATED.with(Cell::get) - before)
}

/// Refusing an event allocates an error message; growing storage to the index, as the
/// accumulators once did, tens of gigabytes.
const SMALL: usize = 64 * 1024;

const HOSTILE: u64 = 2_000_000_000;

fn assert_refused_index(result: Result<Progress, ConversionError>, allocated: usize) {
    assert!(
        matches!(
            result,
            Err(ConversionError::IndexOutOfRange { index: HOSTILE, .. })
        ),
        "{result:?}"
    );
    assert!(allocated < SMALL, "allocated {allocated} bytes");
}

#[test]
fn an_anthropic_block_index_of_two_billion_is_an_error_not_an_abort() {
    let mut acc = AnthropicAccumulator::default();
    let start = json!({"type": "content_block_start", "index": HOSTILE,
        "content_block": {"type": "text", "text": ""}});
    let (result, allocated) = push_metered(&mut acc, "content_block_start", &start);
    assert_refused_index(result, allocated);
    // Deltas and stops naming it are refused the same way.
    let delta = json!({"type": "content_block_delta", "index": HOSTILE,
        "delta": {"type": "text_delta", "text": "x"}});
    let (result, allocated) = push_metered(&mut acc, "content_block_delta", &delta);
    assert_refused_index(result, allocated);
}

#[test]
fn a_chat_tool_call_index_of_two_billion_is_an_error_not_an_abort() {
    let mut acc = ChatAccumulator::default();
    let chunk = json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": HOSTILE, "id": "call_1", "type": "function",
         "function": {"name": "f", "arguments": "{}"}}
    ]}}]});
    let (result, allocated) = push_metered(&mut acc, "", &chunk);
    assert_refused_index(result, allocated);
}

#[test]
fn a_chat_tool_call_index_skipping_calls_is_an_error() {
    let mut acc = ChatAccumulator::default();
    let call = |index: u64| {
        json!({"choices": [{"delta": {"tool_calls": [
            {"index": index, "id": format!("call_{index}"), "function": {"name": "f", "arguments": "{}"}}
        ]}}]})
    };
    acc.push("", &call(0)).unwrap();
    assert!(matches!(
        acc.push("", &call(5)),
        Err(ConversionError::IndexOutOfRange {
            index: 5,
            max: 1,
            ..
        })
    ));
}

#[test]
fn a_responses_output_index_of_two_billion_is_an_error_not_an_abort() {
    let mut acc = ResponsesAccumulator::default();
    let delta = json!({"type": "response.function_call_arguments.delta",
        "item_id": "fc_1", "output_index": HOSTILE, "delta": "{}"});
    let (result, allocated) =
        push_metered(&mut acc, "response.function_call_arguments.delta", &delta);
    assert_refused_index(result, allocated);
}

#[test]
fn bytes_past_the_turn_limit_are_refused() {
    let limits = StreamLimits {
        max_blocks: 16,
        max_bytes: 4096,
    };
    let piece = "x".repeat(1000);
    // Anthropic: text deltas into one block.
    let mut acc = AnthropicAccumulator::with_limits(limits);
    let start = json!({"index": 0, "content_block": {"type": "text", "text": ""}});
    acc.push("content_block_start", &start).unwrap();
    let delta = json!({"index": 0, "delta": {"type": "text_delta", "text": piece}});
    let refused = (0..10).find_map(|_| acc.push("content_block_delta", &delta).err());
    assert_eq!(
        refused,
        Some(ConversionError::TooLarge {
            what: "bytes of events".into(),
            max: 4096
        })
    );
    // Chat: argument pieces of one call.
    let mut acc = ChatAccumulator::with_limits(limits);
    let chunk = json!({"choices": [{"delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": piece}}
    ]}}]});
    let refused = (0..10).find_map(|_| acc.push("", &chunk).err());
    assert!(
        matches!(refused, Some(ConversionError::TooLarge { .. })),
        "{refused:?}"
    );
    // Responses: output items.
    let mut acc = ResponsesAccumulator::with_limits(limits);
    let item = json!({"output_index": 0, "item": {"type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": piece}]}});
    let refused = (0..10).find_map(|_| acc.push("response.output_item.done", &item).err());
    assert!(
        matches!(refused, Some(ConversionError::TooLarge { .. })),
        "{refused:?}"
    );
}

#[test]
fn responses_output_items_past_the_block_limit_are_refused() {
    let limits = StreamLimits {
        max_blocks: 3,
        ..StreamLimits::default()
    };
    let mut acc = ResponsesAccumulator::with_limits(limits);
    let item = json!({"item": {"type": "message", "role": "assistant", "content": []}});
    for _ in 0..3 {
        acc.push("response.output_item.done", &item).unwrap();
    }
    assert_eq!(
        acc.push("response.output_item.done", &item),
        Err(ConversionError::TooLarge {
            what: "output items".into(),
            max: 3
        })
    );
}

/// Shapes that indexed into a JSON value that was not an object, which panics.
#[test]
fn non_object_blocks_usage_and_responses_are_errors_not_panics() {
    let mut acc = AnthropicAccumulator::default();
    let start = json!({"index": 0, "content_block": 5});
    assert!(acc.push("content_block_start", &start).is_err());

    let mut acc = AnthropicAccumulator::default();
    acc.push("message_start", &json!({"message": {"usage": 5}}))
        .unwrap();
    let delta = json!({"delta": {}, "usage": {"output_tokens": 1}});
    assert!(acc.push("message_delta", &delta).is_err());

    let mut acc = ResponsesAccumulator::default();
    assert!(
        acc.push("response.created", &json!({"response": 5}))
            .is_err()
    );
    let mut acc = ResponsesAccumulator::default();
    acc.push("response.in_progress", &json!({"response": null}))
        .unwrap();
    assert!(acc.finish().is_ok());
}

/// A stopped block takes nothing more: a second stop would decode its (possibly large)
/// tool call again, once per tiny event.
#[test]
fn an_anthropic_block_is_closed_after_its_stop() {
    let mut acc = AnthropicAccumulator::default();
    let start = json!({"index": 0, "content_block": {"type": "tool_use", "id": "toolu_1",
        "name": "f", "input": {}}});
    acc.push("content_block_start", &start).unwrap();
    let delta =
        json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":1}"}});
    acc.push("content_block_delta", &delta).unwrap();
    let stop = json!({"index": 0});
    assert!(matches!(
        acc.push("content_block_stop", &stop),
        Ok(Progress::ToolCallComplete(_))
    ));
    assert!(acc.push("content_block_stop", &stop).is_err());
    assert!(acc.push("content_block_delta", &delta).is_err());
}

/// Many small text deltas are appended in place: what the accumulator allocates grows with
/// the text, not with the text times the number of pieces.
#[test]
fn anthropic_text_deltas_are_appended_in_place() {
    let mut acc = AnthropicAccumulator::default();
    let start = json!({"index": 0, "content_block": {"type": "text", "text": ""}});
    acc.push("content_block_start", &start).unwrap();
    let delta = json!({"index": 0, "delta": {"type": "text_delta", "text": "0123456789"}});
    let before = ALLOCATED.with(Cell::get);
    for _ in 0..20_000 {
        acc.push("content_block_delta", &delta).unwrap();
    }
    let allocated = ALLOCATED.with(Cell::get) - before;
    // 200 kB of text; rebuilding it on every delta would allocate about 2 GB.
    assert!(allocated < 16 * 1024 * 1024, "allocated {allocated} bytes");
    let turn = acc.finish().unwrap();
    let [ContentBlock::Text { text, .. }] = turn.content.as_slice() else {
        panic!("one text block: {:?}", turn.content);
    };
    assert_eq!(text.len(), 200_000);
}
