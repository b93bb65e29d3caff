//! Integration tests of the sandbox: real wasmtime, real guest images, real limits.

mod common;
mod hostile;
mod javascript;
mod limits;
mod python;
mod sessions;
mod suspend;
