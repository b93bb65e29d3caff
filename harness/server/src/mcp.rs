//! The MCP server (`cordon mcp`): `execute_code`, and the computer tools `computer_open`,
//! `computer` and `computer_close` (see `computer_tools`), over stdio or Streamable HTTP,
//! built on the official Rust SDK (`rmcp`).
//!
//! Protocol versions: 2024-11-05, 2025-03-26, 2025-06-18 and 2025-11-25 (the `initialize`
//! handshake era). 2026-07-28 is not offered: it forbids server-to-client requests, and
//! approvals are elicitation requests sent while the tool call runs.
//!
//! - Guest exceptions and limits are tool results with `isError: true` (the model can
//!   read and fix them); only malformed calls (unknown tool, bad arguments) are JSON-RPC
//!   errors.
//! - `notifications/cancelled` for a running call cancels the execution (at the next
//!   epoch tick if the guest is running, at once if it waits).
//! - With a `progressToken`, a progress notification goes out every second of the run.
//! - Calls to tools with policy `ask` become a form elicitation when the client declared
//!   the `elicitation` capability, and are refused (the guest gets a `ToolError`, and the
//!   result says why) when it did not. Computer actions whose approval rule says `ask` go
//!   the same way.
//!
//! - `options`: [`McpOptions`] and the checks at start ([`McpSetupError`]).
//! - `server`: [`McpServer`], its REPL session table and the tool dispatch.
//! - `execute_code`: the `execute_code` tool; `files` its workspace files in and out;
//!   `user_ask` the questions code asks the client's user.
//! - `approval`: `ask` calls and steps put to the client's user as elicitations.
//! - `computer_tools`: `computer_open`, `computer` and `computer_close`.
//! - `transport`: serving over stdio or Streamable HTTP ([`McpServeError`]).

mod approval;
mod computer_tools;
mod execute_code;
mod files;
mod form;
mod options;
mod server;
mod transport;
mod user_ask;

pub use options::{McpOptions, McpSetupError, unanswerable_client_tool};
pub use server::{MAX_SESSIONS, McpServer, protocol_versions};
pub use transport::McpServeError;
