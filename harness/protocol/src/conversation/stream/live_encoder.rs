//! The trait every client API's live encoder implements.

use super::delta::Delta;
use super::event::Event;

/// Turns canonical deltas into one client API's stream events, as they come.
///
/// Stateful: it numbers events, remembers which blocks it opened (and which it left out
/// because its API cannot carry them), and collects what its API repeats at the end
/// (Responses' `response.completed` holds the whole output). One encoder serves one
/// stream. Events are `(event name, JSON data)` like every encoder's here; Chat's have no
/// name and its terminator is `("", "[DONE]")`.
pub trait LiveEncoder: Send {
    /// Appends the events `delta` makes (often none, sometimes several) to `out`.
    fn encode(&mut self, delta: &Delta, out: &mut Vec<Event>);
}
