//! Tests of benchmark mode: the suite format, and the gym-style interface over a real
//! Chromium (pages served on 127.0.0.1).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed test should stop right there"
)]

mod env;
mod miniwob;
mod miniwob_in_place;
mod reuse;
mod summary;
mod tasks;
