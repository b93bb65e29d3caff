//! Cordon's tool layer: the registry of declared tools, input validation against their
//! JSON Schemas, policy (`allow` / `ask` / `deny`), approvals, the host handlers
//! (`static`, `command`, `http`) and the hand-off of `client` calls to the caller.
//!
//! The sandbox calls [`Dispatcher::call_batch`] with the raw `(name, input JSON)` pairs the
//! guest sent; every problem the model could fix (unknown tool, bad arguments, denied,
//! handler failure, timeout) comes back as a [`ToolFailure`](cordon_guest::abi::ToolFailure)
//! result, never as a host error or a panic.
//!
//! ```
//! use std::sync::Arc;
//! use cordon_core::{CallContext, Dispatcher, ToolRegistry};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = ToolRegistry::from_json(
//!     r#"{"tools": [{
//!         "name": "get_weather",
//!         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
//!                          "required": ["city"]},
//!         "handler": {"kind": "static", "result": {"temp_c": 21}}
//!     }]}"#,
//!     "tools.json",
//! )?;
//! let dispatcher = Dispatcher::new(Arc::new(registry));
//! let ctx = CallContext::new("exec_1");
//!
//! let calls = vec![
//!     ("get_weather".to_owned(), r#"{"city": "Paris"}"#.to_owned()),
//!     ("get_weather".to_owned(), r#"{"city": 5}"#.to_owned()),
//! ];
//! let results = dispatcher.call_batch(&ctx, calls).await;
//! assert_eq!(results[0].result, Ok(r#"{"temp_c":21}"#.to_owned()));
//! let failure = results[1].result.clone().unwrap_err();
//! assert!(failure.message.contains(r#"/city: 5 is not of type "string""#));
//! # Ok(())
//! # }
//! ```

pub mod broker;
pub mod clock;
pub mod dispatch;
mod handlers;
mod host_process;
pub mod ids;
pub mod packs;
pub mod provider;
pub mod registry;
mod truncate;

pub use broker::{
    ApprovalBroker, ApprovalRequest, ApproveListed, Approver, ClientCallBroker, SubmitError,
    UnknownApproval,
};
pub use dispatch::{CallContext, DispatchedCall, Dispatcher, EventSink};
pub use handlers::PAYLOAD_TOO_LARGE;
pub use host_process::DEFAULT_COMMAND_PATH;
pub use provider::ToolProvider;
pub use registry::{RegisteredTool, RegistryError, ToolRegistry};

/// Any error of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Tool declarations that cannot be used.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A rejected client result submission.
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// A decision on an approval nobody waits for.
    #[error(transparent)]
    Approval(#[from] UnknownApproval),
}

/// Result with this crate's [`Error`] by default.
pub type Result<T, E = Error> = std::result::Result<T, E>;
