//! Tools that live outside Cordon: a [`ToolProvider`] runs the calls of tools whose
//! handler is `{"kind": "mcp", "server", "tool"}` — today the tools of MCP servers Cordon
//! connects to as a client (`--connect NAME=COMMAND`, in `cordon-server`).
//!
//! The provider only runs calls: names, schemas, policy and limits are the registry's and
//! the dispatcher's, exactly as for every other tool, so a connected tool is validated and
//! gated like a declared one. Arrows point one way: the server crate implements this trait,
//! core only calls it.
//!
//! ```
//! use std::sync::Arc;
//! use cordon_core::{ToolProvider, ToolRegistry};
//! use cordon_protocol::tool::{HandlerSpec, ToolDeclaration};
//! use futures::future::BoxFuture;
//! use serde_json::{json, Value};
//!
//! #[derive(Debug)]
//! struct Echo;
//! impl ToolProvider for Echo {
//!     fn call<'a>(&'a self, _tool: &'a str, input: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
//!         Box::pin(async move { Ok(input.clone()) })
//!     }
//! }
//!
//! let echo: ToolDeclaration = serde_json::from_value(json!({
//!     "name": "remote.echo",
//!     "handler": {"kind": "mcp", "server": "remote", "tool": "echo"}
//! })).unwrap();
//! let mut registry = ToolRegistry::empty();
//! registry.connect("remote", vec![echo], Arc::new(Echo)).unwrap();
//! assert_eq!(registry.names(), ["remote.echo"]);
//! ```

use std::fmt;

use futures::future::BoxFuture;
use serde_json::Value;

/// Runs calls for tools served elsewhere.
pub trait ToolProvider: Send + Sync + fmt::Debug {
    /// Calls `tool` (the provider's own name for it) with an input that already passed
    /// schema and policy checks. `Err` is a message the guest receives as a `ToolError`
    /// of kind `failed`.
    fn call<'a>(&'a self, tool: &'a str, input: &'a Value) -> BoxFuture<'a, Result<Value, String>>;
}
