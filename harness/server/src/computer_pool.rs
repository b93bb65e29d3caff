//! What both servers share for computer use: one Chromium per server, started on first use
//! and shared by every session (each gets its own BrowserContext), sessions set up from a
//! [`CreateComputer`](crate::api::CreateComputer) body, and model calls decoded from any
//! vendor's shape.
//!
//! Every job on a session (open, step, decide, close) is a task of its own on the server's
//! multi-threaded runtime, so sessions step on every core; a session's own jobs are
//! serialized by its lock. A job runs to its end even if its caller stops waiting (an
//! HTTP client that hangs up mid-step): a step is never cut in half.
//!
//! - `error`: [`ComputerError`], why a computer request could not be served.
//! - `setup`: [`Setup`], a session's checked set-up.
//! - `decode`: [`decode_actions`] and [`parse_format`], model calls in any vendor's shape.
//! - `live_computer`: [`LiveComputer`], one open session, and what a step produced.
//! - `pool`: [`ComputerPool`], the one Chromium and the tasks sessions run on.
//! - `orphans`: [`reap_orphaned_chromium`], the Chromium a killed server left behind, and
//!   [`chromium_pid_key`], where a server records its own.

mod decode;
mod error;
mod live_computer;
mod orphans;
mod pool;
mod setup;

pub use decode::{decode_actions, parse_format};
pub use error::ComputerError;
pub use live_computer::{LiveComputer, SharedComputer, Stepped};
pub use orphans::{chromium_pid_key, reap_orphaned_chromium};
pub use pool::ComputerPool;
pub use setup::{DEFAULT_COMPUTER_TTL, MAX_COMPUTER_TTL, Setup};
