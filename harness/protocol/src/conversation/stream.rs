//! Streams: a turn as each vendor's event sequence, and accumulators that rebuild the turn
//! from events one at a time.
//!
//! Events are `(event name, JSON data)` pairs; writing them as SSE is the caller's job.
//! Chat chunks have no event name (`""`), and Chat's terminator is `("", "[DONE]")`,
//! written as `data: [DONE]`. Accumulators keep partial tool arguments as strings and
//! report a tool call only once its block is complete.
//!
//! Live streams: each accumulator also yields the canonical [`Delta`]s of the events it
//! consumes ([`Accumulator::push_deltas`]), and a [`LiveEncoder`] per client API turns
//! deltas into that API's events as they come (see [`delta`](self::Delta)).
//!
//! The events come from an upstream that is not trusted: every accumulator keeps to its
//! [`StreamLimits`] (block indices, blocks and bytes per turn) and refuses a stream past
//! them with a typed error, fatal to that turn only.

mod anthropic;
mod chat;
mod delta;
mod event;
mod feed;
mod gemini;
mod limits;
mod live;
mod live_anthropic;
mod live_chat;
mod live_encoder;
mod live_gemini;
mod live_responses;
mod responses;
mod turn_deltas;

pub use anthropic::{AnthropicAccumulator, anthropic_events};
pub use chat::{ChatAccumulator, chat_events};
pub use delta::{BlockKind, Delta, DeltaSink};
pub use event::{Accumulator, Event, Progress};
pub use feed::feed_each_accumulator;
pub use gemini::{GeminiAccumulator, gemini_events};
pub use limits::{MAX_BLOCKS, MAX_TURN_BYTES, StreamLimits};
pub use live::live_encoder;
pub use live_anthropic::AnthropicLiveEncoder;
pub use live_chat::ChatLiveEncoder;
pub use live_encoder::LiveEncoder;
pub use live_gemini::GeminiLiveEncoder;
pub use live_responses::ResponsesLiveEncoder;
pub use responses::{ResponsesAccumulator, responses_events};
pub use turn_deltas::{block_deltas, block_kind, turn_deltas};
