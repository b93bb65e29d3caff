//! The session protocol: a conversation Cordon keeps, for clients that keep no history (a
//! UI, an agent that restarts).
//!
//! A client creates a session with its first messages and its own tools, then continues it
//! with new messages and the answers to the calls it was handed. Each turn is a stream of
//! [`SessionEvent`]s. Three kinds of tools meet in a turn:
//!
//! - *application-side* tools, declared by the client: the call goes to the client
//!   (`tool_call`, then `turn_stop tool_use`), which answers with a `tool` message;
//! - *trusted server-side* tools (operator tools with policy `allow`, code execution): run
//!   inline, their `tool_result` is emitted, the client does nothing;
//! - *permission-required* server-side tools (operator tools with policy `ask`): the call
//!   goes to the client like an application-side one, which answers with a
//!   `tool_permission` message; granted, Cordon runs the tool.
//!
//! The state ([`SessionState`]) is plain data: the caller keeps it (the server in its
//! store) between turns. [`SessionState::check`] decides whether a client message can be
//! applied at all before anything changes or runs.

mod error;
mod event;
mod input;
mod state;
mod turn;

pub use error::SessionError;
pub use event::SessionEvent;
pub use input::SessionInput;
pub use state::{CallKind, DEFAULT_SESSION_MAX_TOKENS, PendingCall, SessionState};
