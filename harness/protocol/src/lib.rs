//! Cordon's canonical wire types, shared by every other crate and by tests.
//!
//! - [`tool`]: tool declarations (the tools file), policies and handler kinds.
//! - [`execution`]: limits, execution events, results and client-tool round trips.
//! - [`conversation`]: one canonical model conversation and pure converters to and from
//!   Anthropic Messages, OpenAI Chat Completions and OpenAI Responses.
//! - [`time`]: timestamps as the APIs print them (RFC 3339 UTC).
//!
//! This crate does no I/O and depends on nothing of Cordon's, so anything can speak the
//! protocol.
//!
//! ```
//! use cordon_protocol::tool::ToolsFile;
//! let file: ToolsFile = serde_json::from_str(r#"{"tools": [{
//!     "name": "get_weather",
//!     "input_schema": {"type": "object"},
//!     "handler": {"kind": "static", "result": {"temp_c": 21}}
//! }]}"#).unwrap();
//! assert_eq!(file.tools[0].name, "get_weather");
//! ```

pub mod computer;
pub mod conversation;
pub mod execution;
pub mod time;
pub mod tool;
