//! Cordon's servers: the two interfaces agent frameworks hand execution to.
//!
//! - [`http`]: the HTTP + SSE API (`cordon serve`) — sandboxes, executions whose events
//!   stream over SSE and resume with `Last-Event-ID`, client tool results, approvals —
//!   with every event persisted in a SQLite [`store`] before it is sent.
//!   Computer sessions (`/v1/computers`) drive isolated browser contexts with any vendor's
//!   computer-use actions; their steps and trajectories are stored too.
//! - [`mcp`]: an MCP server (`cordon mcp`, stdio or Streamable HTTP) with an
//!   `execute_code` tool and the computer tools `computer_open`, `computer`,
//!   `computer_close`.
//! - [`guard`]: the Host/Origin check both HTTP listeners run before anything else
//!   (DNS-rebinding and cross-site protection).
//! - [`computer_pool`]: what both servers share for computer use: one lazily started
//!   Chromium and the tasks its sessions run on.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cordon_sandbox::{Sandbox, SandboxConfig};
//! use cordon_server::http::{HttpApi, HttpOptions};
//! use cordon_server::store::Store;
//!
//! let sandbox = Sandbox::new(SandboxConfig::default()).await?;
//! let store = Store::open(std::path::Path::new("/tmp/cordon.db"))?;
//! let api = HttpApi::new(sandbox, store, HttpOptions::default()).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7420").await?;
//! api.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```

pub mod api;
pub mod computer_pool;
pub mod error;
pub mod guard;
pub mod http;
pub mod mcp;
pub mod mcp_client;
pub mod objects;
mod periodic;
mod setters;
pub mod store;
mod workspace_budget;

pub use error::ApiError;
pub use http::{HttpApi, HttpOptions};
pub use mcp::{McpOptions, McpServer};
pub use mcp_client::Connection;
pub use store::{Store, StoreError};
