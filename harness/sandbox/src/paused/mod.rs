//! Pausing a session and resuming it elsewhere: [`Session::pause`](crate::Session::pause)
//! gives a [`PausedSession`] (bytes with [`PausedSession::to_bytes`]) and frees the
//! instance; [`Sandbox::resume`](crate::Sandbox::resume) brings it back into a fresh
//! instance of the same image. `docs/sandbox.md` ("Pausing and resuming sessions") has
//! the mechanism and the format.
//!
//! Leaves first: `error`, `codec` (fields), `state` (what is held), `memory` (changed
//! chunks), `trees` (folders), `body` and `blob` (bytes), then `capture` and `restore`;
//! `workspace_only` pauses files without a session.

mod blob;
mod body;
mod capture;
mod codec;
mod error;
mod memory;
mod restore;
mod state;
mod trees;
mod workspace_only;

pub use error::{BlobError, PauseError, ResumeError};
pub use state::PausedSession;
