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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use std::sync::Arc;

    use super::*;
    use crate::{CallContext, Dispatcher, ToolRegistry};
    use cordon_protocol::tool::ToolDeclaration;
    use serde_json::json;

    #[derive(Debug)]
    struct Doubler;

    impl ToolProvider for Doubler {
        fn call<'a>(
            &'a self,
            tool: &'a str,
            input: &'a Value,
        ) -> BoxFuture<'a, Result<Value, String>> {
            Box::pin(async move {
                match input["n"].as_i64() {
                    Some(n) => Ok(json!({"tool": tool, "doubled": n * 2})),
                    None => Err("n is missing".to_owned()),
                }
            })
        }
    }

    fn remote(name: &str, tool: &str) -> ToolDeclaration {
        serde_json::from_value(json!({
            "name": name,
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "handler": {"kind": "mcp", "server": "calc", "tool": tool}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn connected_tools_are_validated_and_run_by_their_provider() {
        // One tool declared in a file before the server connects, one brought by it.
        let mut registry = ToolRegistry::new(vec![remote("double", "double")]).unwrap();
        let unconnected = Dispatcher::new(Arc::new(registry.clone()));
        registry
            .connect(
                "calc",
                vec![remote("calc.double", "double")],
                Arc::new(Doubler),
            )
            .unwrap();
        let dispatcher = Dispatcher::new(Arc::new(registry));
        let ctx = CallContext::new("exec_1");
        let calls = vec![
            ("calc.double".to_owned(), r#"{"n": 21}"#.to_owned()),
            ("double".to_owned(), r#"{"n": 2}"#.to_owned()),
            ("calc.double".to_owned(), r#"{"n": "x"}"#.to_owned()),
            ("calc.double".to_owned(), r#"{}"#.to_owned()),
        ];
        let results = dispatcher.call_batch(&ctx, calls).await;
        let value = |index: usize| -> Value {
            serde_json::from_str(results[index].result.as_ref().unwrap()).unwrap()
        };
        assert_eq!(value(0), json!({"tool": "double", "doubled": 42}));
        assert_eq!(value(1), json!({"tool": "double", "doubled": 4}));
        let invalid = results[2].result.clone().unwrap_err();
        assert!(invalid.message.contains("not of type"), "{invalid:?}");
        assert_eq!(
            results[3].result.clone().unwrap_err().message,
            "n is missing"
        );

        let results = unconnected
            .call_batch(&ctx, vec![("double".to_owned(), "{}".to_owned())])
            .await;
        let failure = results[0].result.clone().unwrap_err();
        assert!(failure.message.contains("--connect calc="), "{failure:?}");
    }
}
