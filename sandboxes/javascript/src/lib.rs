//! Cordon's JavaScript guest image: QuickJS (through `rquickjs`) compiled to
//! `wasm32-wasip1`, wired to the tool bridge of `cordon-guest`.
//!
//! The interesting code exists only for `wasm`; on the host this crate is empty, so a plain
//! `cargo build` of the workspace never compiles a JavaScript engine for x86_64. The image
//! is built by `cordon-sandbox`'s build script (see this crate's README for the exact
//! environment) and pre-initialized: the runtime, the context and the JavaScript half of
//! the runtime in `runtime.js` are created once and snapshotted.
//!
//! What guest code sees: every declared tool as a global `async` function taking one
//! object (`await get_weather({city: "Paris"})`, `await server.tool({...})`), a `tools`
//! object with the same functions plus `tools.call(name, args)` (synchronous) and
//! `tools.ToolError`, top-level `await`, `console`, `setTimeout`/`setInterval`,
//! `structuredClone`, and `fs` (node-like synchronous file functions over `/workspace`).
//! Tool calls awaited together (`Promise.all`) leave as one batch.

// Every module exists only for wasm (see above).
#[cfg(target_family = "wasm")]
mod bridge;
#[cfg(target_family = "wasm")]
mod driver;
#[cfg(target_family = "wasm")]
mod exception;
#[cfg(target_family = "wasm")]
mod fs;
#[cfg(target_family = "wasm")]
mod globals;
#[cfg(target_family = "wasm")]
mod guest;
#[cfg(target_family = "wasm")]
mod json;
#[cfg(target_family = "wasm")]
mod native_call;
#[cfg(target_family = "wasm")]
mod random;
#[cfg(target_family = "wasm")]
mod runtime_js;
#[cfg(target_family = "wasm")]
mod saved;
#[cfg(target_family = "wasm")]
mod stack_limit;
#[cfg(target_family = "wasm")]
mod tool_bindings;
