//! The stream vocabulary every vendor's encoder and accumulator shares: an [`Event`], the
//! [`Progress`] one event made, and the [`Accumulator`] trait.

use serde_json::Value;

use super::delta::Delta;
use crate::conversation::{ConversionError, ToolCall, Turn};

pub(super) type Result<T, E = ConversionError> = std::result::Result<T, E>;

/// A stream event: the SSE `event:` name and its `data:` JSON.
pub type Event = (String, Value);

/// What one event completed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Progress {
    /// Nothing complete yet.
    Pending,
    /// A tool-call block is complete: its arguments are final and may be validated and run.
    ToolCallComplete(ToolCall),
    /// The stream ended; [`Accumulator::finish`] gives the turn.
    Done,
}

/// Rebuilds a turn from a vendor's stream events.
pub trait Accumulator {
    /// Consume one event. An upstream `error` event is a [`ConversionError`].
    fn push(&mut self, event: &str, data: &Value) -> Result<Progress>;
    /// Consume one event like [`push`](Accumulator::push), appending to `deltas` the
    /// canonical [`Delta`]s it carries: `TurnStart` at the turn's first event, each block's
    /// start, pieces and stop (the block complete) in the order the vendor sent them, and
    /// `TurnEnd` with the event that ends the stream (whatever `Progress::Done` reports).
    ///
    /// The default yields no deltas: an accumulator without live deltas still builds turns.
    fn push_deltas(
        &mut self,
        event: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress> {
        let _ = deltas;
        self.push(event, data)
    }
    /// The completed turn (also from a stream cut short: what arrived so far).
    fn finish(self) -> Result<Turn>;
}

pub(super) fn event(name: &str, data: Value) -> Event {
    (name.to_owned(), data)
}

pub(super) fn upstream_error(data: &Value) -> ConversionError {
    let message = data
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("upstream stream error");
    ConversionError::Upstream {
        message: message.to_owned(),
    }
}
