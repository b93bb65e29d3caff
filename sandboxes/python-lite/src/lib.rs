//! Cordon's `python-lite` guest image: RustPython compiled to `wasm32-wasip1`, wired to
//! the tool bridge of `cordon-guest`.
//!
//! The interesting code exists only for `wasm`; on the host this crate is empty, so a plain
//! `cargo build` of the workspace never compiles an interpreter for x86_64. The image is
//! built by `cordon-sandbox`'s build script and pre-initialized (the interpreter, the
//! standard modules models use and the `tools` runtime in `runtime.py` are loaded once and
//! snapshotted).

#[cfg(target_family = "wasm")]
mod interpreter;
#[cfg(target_family = "wasm")]
mod json;
