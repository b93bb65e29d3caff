//! What `cordon mcp` configures in the MCP server ([`McpOptions`]), and what it refuses at
//! start ([`McpSetupError`]).

use std::path::PathBuf;

use cordon_computer::browser::BrowserOptions;
use cordon_core::ToolRegistry;
use cordon_protocol::tool::Locus;
use serde_json::Value;

use crate::workspace_budget::DEFAULT_MAX_SANDBOXES;

/// A problem with the server's own configuration (not a guest's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpSetupError {
    /// A declared tool has a `client` handler: an MCP client cannot answer those.
    #[error(
        "tool `{0}` has a `client` handler, which an MCP client cannot answer; use `static`, \
         `command` or `http` (client tools need the HTTP API, `cordon serve`)"
    )]
    ClientTool(String),
    /// The computer approval rules do not parse.
    #[error("computer approval rules: {0}")]
    ComputerRules(String),
}

/// The first tool of `registry` that only an API caller can answer: a `client` handler
/// other than `user_ask`, which a person answers (through elicitation here, on the terminal
/// under `cordon run`). A front end with no such caller refuses it at start; otherwise its
/// calls would wait, unanswered, until the client-tool timeout.
pub fn unanswerable_client_tool(registry: &ToolRegistry) -> Option<&str> {
    registry
        .iter()
        .find(|tool| tool.declaration.handler.locus() == Locus::Client && tool.name() != "user_ask")
        .map(|tool| tool.name())
}

/// Options of the MCP server beyond the sandbox.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpOptions {
    /// How the computer tools start Chromium (on the first `computer_open`); `None` leaves
    /// the computer tools out.
    pub browser: Option<BrowserOptions>,
    /// Approval rules of computer sessions, as `{"rules": [...]}` or a list (`None`: ask
    /// before passwords, payment fields, buy/delete-like buttons, uploads, new origins).
    pub computer_rules: Option<Value>,
    /// Each computer session records its trajectory (JSONL + screenshots, replayable with
    /// `cordon replay`) in `<dir>/<id>`; `None`: not recorded.
    pub trajectories: Option<PathBuf>,
    /// Host names Streamable HTTP serves besides loopback and the bound address
    /// (`--allow-host`), as [`crate::guard::parse_allowed_host`] returns them.
    pub allowed_hosts: Vec<String>,
    /// REPL sessions (`session_id`) live at once across all connections; a new one beyond
    /// is refused with an error result. Each connection also keeps at most
    /// [`MAX_SESSIONS`], dropping its oldest. Every session declares the same
    /// `workspace_bytes`, so this also bounds their workspace memory.
    pub max_sessions_total: usize,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            browser: Some(BrowserOptions::default()),
            computer_rules: None,
            trajectories: None,
            allowed_hosts: Vec::new(),
            max_sessions_total: DEFAULT_MAX_SANDBOXES,
        }
    }
}

impl McpOptions {
    crate::setters::setters! {
        browser: Option<BrowserOptions>,
        computer_rules: Option<Value>,
        trajectories: Option<PathBuf>,
        allowed_hosts: Vec<String>,
        max_sessions_total: usize,
    }
}
