//! Streams: a turn as each vendor's event sequence, and accumulators that rebuild the turn
//! from events one at a time.
//!
//! Events are `(event name, JSON data)` pairs; writing them as SSE is the caller's job.
//! Chat chunks have no event name (`""`), and Chat's terminator is `("", "[DONE]")`,
//! written as `data: [DONE]`. Accumulators keep partial tool arguments as strings and
//! report a tool call only once its block is complete.
//!
//! The events come from an upstream that is not trusted: every accumulator keeps to its
//! [`StreamLimits`] (block indices, blocks and bytes per turn) and refuses a stream past
//! them with a typed error, fatal to that turn only.

mod anthropic;
mod chat;
mod event;
mod feed;
mod limits;
mod responses;

pub use anthropic::{AnthropicAccumulator, anthropic_events};
pub use chat::{ChatAccumulator, chat_events};
pub use event::{Accumulator, Event, Progress};
pub use feed::feed_each_accumulator;
pub use limits::{MAX_BLOCKS, MAX_TURN_BYTES, StreamLimits};
pub use responses::{ResponsesAccumulator, responses_events};
