//! cordon-core integration tests: one binary, one module per area.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

#[path = "../common/mod.rs"]
mod common;

mod bash_policy;
mod batch;
mod bounds;
mod client;
mod handlers;
mod packs;
mod policy;
mod properties;
mod registry;
mod validation;
