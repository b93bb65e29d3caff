//! Integration tests of `cordon-protocol` (one binary, see STYLE.md).

#![allow(clippy::unwrap_used, reason = "tests")]

mod conversation;
mod gemini;
mod properties;
mod stream_bounds;
mod stream_corpus;
