//! Cordon's model gateway: the loop between a client speaking the Anthropic Messages API
//! and any upstream model (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses,
//! Gemini, or a recorded script).
//!
//! The gateway decodes the client's request into the canonical conversation
//! (`cordon_protocol::conversation`), checks tool-call pairing before anything runs, asks
//! the upstream in its own API, and runs server tools itself:
//!
//! - operator tools (a tools file): `allow` inline, `ask` handed to the client for
//!   approval (a `cordon_approval` block answers), validation errors back to the model;
//! - code execution (`code_execution_20250825` / `_20260120` / `_20260521`) in Cordon's
//!   sandbox, with client tools callable from the program: the program suspends on them,
//!   the client answers, the program resumes in its container;
//! - computer use, when the caller binds a computer ([`Computers`]).
//!
//! Client tools go back to the client as `tool_use` blocks. At most
//! [`GatewayOptions::max_tool_rounds`] model turns run per client request.
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use cordon_gateway::{Gateway, GatewayOptions, MessagesCall, script::ScriptUpstream};
//!
//! let script = ScriptUpstream::parse(r#"{"content": [{"type": "text", "text": "hi"}]}"#, "demo")
//!     .expect("a valid script");
//! let gateway = Gateway::new(Arc::new(script), GatewayOptions::default());
//! let reply = gateway
//!     .messages(MessagesCall::new(serde_json::json!({
//!         "model": "m", "max_tokens": 100,
//!         "messages": [{"role": "user", "content": "Hello"}],
//!     })))
//!     .await;
//! assert_eq!(reply.status, 200);
//! assert_eq!(reply.body["content"][0]["text"], "hi");
//! # }
//! ```

mod asked_calls;
mod bounded_map;
mod call_ids;
mod code_output;
mod computer;
mod container_record;
mod containers;
mod continuation;
mod gateway;
pub mod gateway_store;
mod gemini_upstream;
mod messages;
mod options;
pub mod record;
pub mod script;
pub mod session;
mod set_aside;
pub mod sse;
mod tool_calls;
mod tool_search;
pub mod upstream;

pub use computer::{ComputerOutcome, Computers};
pub use containers::{ContainerError, ProgramCall};
pub use gateway::Gateway;
pub use gateway_store::{GatewayStore, GatewayStoreError, MemoryGatewayStore};
pub use messages::{LiveStream, MessagesAnswer, MessagesCall, MessagesReply, StreamHead};
pub use options::{
    DEFAULT_CONTAINER_TTL, DEFAULT_MAX_CONTAINERS, DEFAULT_MAX_TOOL_ROUNDS, DEFAULT_PROGRAM_WAIT,
    GatewayOptions,
};
pub use record::{Entry, MemoryRecorder, NoRecorder, Recorder};
pub use upstream::{Api, Credential, HttpUpstream, Upstream, UpstreamError};
