//! Integration tests of the sandbox: real wasmtime, real guest images, real limits.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a failed test should stop right there"
)]

mod cache;
mod common;
mod cpython;
mod hostile;
mod javascript;
mod limits;
mod paused;
mod python;
mod sessions;
mod suspend;
mod workspace;
