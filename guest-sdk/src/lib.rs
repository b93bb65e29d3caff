//! Guest side of Cordon's tool bridge: the one place that knows the ABI.
//!
//! A guest image (the Python or JavaScript interpreter compiled to `wasm32-wasip1`) talks
//! to the host through a handful of imports in the `cordon` module and two exports. This
//! crate owns every detail of that contract:
//!
//! - [`abi`]: import/export names, status codes and the binary framing of requests and
//!   responses. It is pure Rust with no dependencies, so the host (`cordon-sandbox`) uses
//!   the very same definitions to implement its side.
//! - the guest API (only on `wasm32`): [`call_tool`], [`call_batch`], [`write_output`],
//!   and the [`export_guest!`] macro that wires a [`Guest`] implementation to the exports.
//!
//! See `docs/bridge-abi.md` for the specification.
//!
//! ```
//! use cordon_guest::abi::{decode_batch_request, encode_batch_request};
//! let frame = encode_batch_request(&[("get_weather", r#"{"city":"Paris"}"#)]);
//! let calls = decode_batch_request(&frame).unwrap();
//! assert_eq!(calls, vec![("get_weather", r#"{"city":"Paris"}"#)]);
//! ```

pub mod abi;
mod guest;

#[cfg(target_family = "wasm")]
mod bridge;
#[cfg(target_family = "wasm")]
pub use bridge::*;

pub use abi::{Outcome, ToolErrorKind, ToolFailure};
pub use guest::Guest;
