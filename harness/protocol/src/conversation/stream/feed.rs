//! Any event sequence through every accumulator, for checks that must hold on hostile input.

use super::{
    Accumulator, AnthropicAccumulator, ChatAccumulator, Event, GeminiAccumulator,
    ResponsesAccumulator, anthropic_events, chat_events, gemini_events, responses_events,
};

/// Feeds a sequence of raw events to each accumulator; used by the property tests and the
/// fuzz target, which only require that nothing panics or aborts.
///
/// Each accumulator takes events until its first error (fatal to the turn, as in the
/// gateway), then finishes; a turn it finishes is encoded as every vendor's events, so
/// whatever an accumulator accepts the encoders take too.
pub fn feed_each_accumulator(events: &[Event]) {
    feed(AnthropicAccumulator::default(), events);
    feed(ChatAccumulator::default(), events);
    feed(ResponsesAccumulator::default(), events);
    feed(GeminiAccumulator::default(), events);
}

fn feed<A: Accumulator>(mut accumulator: A, events: &[Event]) {
    for (name, data) in events {
        if accumulator.push(name, data).is_err() {
            return;
        }
    }
    if let Ok(turn) = accumulator.finish() {
        let _ = anthropic_events(&turn);
        let _ = chat_events(&turn);
        let _ = responses_events(&turn);
        let _ = gemini_events(&turn);
    }
}
