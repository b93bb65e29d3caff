//! The guest images Cordon embeds in its binary: the RustPython interpreter (language
//! `python-lite`) and QuickJS (`javascript`), compiled for `wasm32-wasip1` by this crate's
//! build script from `sandboxes/`.
//!
//! They sit in a crate of their own, with no dependencies, so the guest build (the longest
//! single step of a first build) need not wait for any other crate and runs beside the
//! host's dependencies; only `cordon-sandbox` waits for it. An image is empty when the build was told to skip
//! guests (`CORDON_SKIP_GUESTS`); the sandbox then reports the image as missing.

/// The RustPython guest image (`python-lite`).
pub static PYTHON_LITE: &[u8] = include_bytes!(env!("CORDON_GUEST_PYTHON_LITE"));

/// The QuickJS guest image (`javascript`).
pub static JAVASCRIPT: &[u8] = include_bytes!(env!("CORDON_GUEST_JAVASCRIPT"));
