//! Tool declarations: what a tool is called, what it accepts, who may call it, what runs it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tools file: `{"tools": [ToolDeclaration, ...]}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    /// The declared tools; names are unique.
    pub tools: Vec<ToolDeclaration>,
}

/// One tool, exactly as written in a tools file or an API request.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDeclaration {
    /// Name code calls it by (`get_weather`, or `server.tool` for connected servers).
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema of the input object; checked before every dispatch.
    #[serde(default = "any_object_schema")]
    pub input_schema: Value,
    /// Who decides whether a call runs.
    #[serde(default)]
    pub policy: Policy,
    /// What runs the call.
    pub handler: HandlerSpec,
    /// Kept from the model until a tool search finds it (the gateway's
    /// `tool_search_tool_*`): saves the model's context when there are many tools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defer_loading: bool,
}

fn any_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

/// Whether a call may run. When several rules apply, deny beats ask beats allow.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Runs without asking.
    #[default]
    Allow,
    /// A human (or the caller) approves each call first.
    Ask,
    /// Never runs; the guest gets a `ToolError` of kind `denied`.
    Deny,
}

impl Policy {
    /// Combines two applicable policies: the stricter wins.
    pub fn strictest(self, other: Policy) -> Policy {
        self.max(other)
    }
}

/// What executes a call.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum HandlerSpec {
    /// Returns a fixed JSON value (fixtures, tests, benchmarks).
    Static {
        /// The result of every call.
        result: Value,
    },
    /// Runs `argv` on the host, outside the sandbox: JSON input on stdin, JSON result on
    /// stdout. A non-zero exit is a tool error carrying stderr.
    ///
    /// The program starts with an empty environment plus `env`, the variables named in
    /// `inherit_env`, and `PATH=/usr/local/bin:/usr/bin:/bin` unless either sets `PATH`.
    /// It runs in its own process group, which is killed when the call ends.
    Command {
        /// Program and arguments; no shell is involved.
        argv: Vec<String>,
        /// Kill the program after this long.
        #[serde(default = "default_command_timeout_ms")]
        timeout_ms: u64,
        /// Environment variables to set, `NAME: value`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Names of Cordon's own environment variables to pass through when set (e.g.
        /// `HOME`, `LANG`); `env` wins over them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        inherit_env: Vec<String>,
    },
    /// POSTs the JSON input to `url`; the JSON response body is the result.
    Http {
        /// Endpoint (http or https).
        url: String,
        /// Give up after this long.
        #[serde(default = "default_command_timeout_ms")]
        timeout_ms: u64,
    },
    /// Handed to the caller of Cordon: the execution suspends until the caller posts the
    /// result (or the client-tool deadline passes).
    Client {},
    /// A tool of a connected MCP server (`--connect NAME=COMMAND`), called through Cordon's
    /// MCP client; the call fails if no server of that name is connected.
    Mcp {
        /// The connection's name (`NAME` of `--connect`).
        server: String,
        /// The tool's name on that server.
        tool: String,
    },
}

fn default_command_timeout_ms() -> u64 {
    30_000
}

impl HandlerSpec {
    /// Where calls to this tool run.
    pub fn locus(&self) -> Locus {
        match self {
            HandlerSpec::Client {} => Locus::Client,
            _ => Locus::Host,
        }
    }
}

/// Where a tool call runs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Locus {
    /// Inside Cordon's process (static, command, http handlers).
    Host,
    /// By whoever called Cordon, while the execution waits.
    Client,
}
