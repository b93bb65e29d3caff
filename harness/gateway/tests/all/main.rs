//! The gateway's loop against a stand-in upstream over real HTTP on 127.0.0.1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed test should stop right there"
)]

mod browser_toolset;
mod call_ids;
mod common;
mod computer;
mod errors;
mod gemini;
mod loop_;
mod operator;
mod programmatic_calls;
mod programmatic_javascript;
mod restarts;
mod session;
mod streaming;
mod tool_search;
mod upstreams;
