//! Cordon as an MCP *client*: `--connect NAME=COMMAND` starts an MCP server (stdio), lists
//! its tools, and makes each callable from sandbox code as `await NAME.tool(...)`.
//!
//! Connected tools are ordinary registry entries (handler `{"kind": "mcp", "server":
//! NAME, "tool": …}`): inputs are checked against the server's own input schema, policy and
//! limits apply, and results count against `max_payload_bytes` — so large intermediate
//! results stay inside the sandbox and only what the code returns reaches the model.

use std::sync::Arc;
use std::time::Duration;

use cordon_core::{RegistryError, ToolProvider, ToolRegistry};
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

/// How long one call to a connected tool may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a connected server may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A failure connecting to an MCP server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The option is not `NAME=COMMAND` with a usable name.
    #[error(
        "--connect {0:?}: expected NAME=COMMAND, where NAME is letters, digits and _ \
         (not starting with a digit), e.g. --connect files='npx @modelcontextprotocol/server-filesystem /tmp'"
    )]
    Spec(String),
    /// The command could not be started.
    #[error("--connect {name}: could not start `{command}`: {source}")]
    Spawn {
        /// The connection's name.
        name: String,
        /// The command.
        command: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake or the tool listing failed.
    #[error("--connect {name}: {message}")]
    Protocol {
        /// The connection's name.
        name: String,
        /// What failed.
        message: String,
    },
}

/// A connected MCP server: its tools as declarations, and the client that calls them.
#[derive(Debug, Clone)]
pub struct Connection {
    name: String,
    declarations: Vec<ToolDeclaration>,
    provider: Arc<McpProvider>,
}

struct McpProvider {
    name: String,
    service: RunningService<RoleClient, ()>,
}

impl std::fmt::Debug for McpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpProvider")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A tool name code can call: characters the registry does not accept become `_`.
fn callable(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Connection {
    /// Parses `NAME=COMMAND`, starts `COMMAND` with `sh -c` (its stderr goes to ours),
    /// and lists its tools.
    pub async fn start(spec: &str) -> Result<Connection, ConnectError> {
        let Some((name, command)) = spec.split_once('=') else {
            return Err(ConnectError::Spec(spec.to_owned()));
        };
        let (name, command) = (name.trim(), command.trim());
        if !valid_name(name) || command.is_empty() {
            return Err(ConnectError::Spec(spec.to_owned()));
        }
        let mut process = tokio::process::Command::new("sh");
        process.arg("-c").arg(command);
        let transport = TokioChildProcess::new(process).map_err(|source| ConnectError::Spawn {
            name: name.to_owned(),
            command: command.to_owned(),
            source,
        })?;
        let protocol = |message: String| ConnectError::Protocol {
            name: name.to_owned(),
            message,
        };
        let started = tokio::time::timeout(START_TIMEOUT, async {
            let service = ()
                .serve(transport)
                .await
                .map_err(|error| protocol(format!("MCP handshake failed: {error}")))?;
            let tools = service
                .list_all_tools()
                .await
                .map_err(|error| protocol(format!("listing tools failed: {error}")))?;
            Ok::<_, ConnectError>((service, tools))
        })
        .await
        .map_err(|_| protocol(format!("no answer within {} s", START_TIMEOUT.as_secs())))?;
        let (service, tools) = started?;
        let declarations = tools
            .into_iter()
            .map(|tool| ToolDeclaration {
                name: format!("{name}.{}", callable(&tool.name)),
                description: tool.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
                policy: Policy::Allow,
                defer_loading: false,
                handler: HandlerSpec::Mcp {
                    server: name.to_owned(),
                    tool: tool.name.into_owned(),
                },
            })
            .collect();
        Ok(Connection {
            name: name.to_owned(),
            declarations,
            provider: Arc::new(McpProvider {
                name: name.to_owned(),
                service,
            }),
        })
    }

    /// The connection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Names code calls the tools by (`NAME.tool`).
    pub fn tool_names(&self) -> Vec<&str> {
        self.declarations
            .iter()
            .map(|decl| decl.name.as_str())
            .collect()
    }

    /// Makes `policy` the policy of every tool of this connection (`--connect-policy`;
    /// the automatic one is `allow`). A declaration of the same name in the registry it
    /// joins can make a tool's policy stricter, never looser (see
    /// [`ToolRegistry::connect`]).
    pub fn set_default_policy(&mut self, policy: Policy) {
        for declaration in &mut self.declarations {
            declaration.policy = policy;
        }
    }

    /// Adds this server's tools to `registry`.
    pub fn attach(&self, registry: &mut ToolRegistry) -> Result<(), RegistryError> {
        registry.connect(&self.name, self.declarations.clone(), self.provider.clone())
    }
}

impl ToolProvider for McpProvider {
    fn call<'a>(&'a self, tool: &'a str, input: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let arguments = match input {
                Value::Object(map) => map.clone(),
                _ => Map::new(),
            };
            let request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            let result = tokio::time::timeout(CALL_TIMEOUT, self.service.call_tool(request))
                .await
                .map_err(|_| {
                    format!(
                        "MCP server `{}` did not answer `{tool}` within {} s",
                        self.name,
                        CALL_TIMEOUT.as_secs()
                    )
                })?
                .map_err(|error| format!("MCP server `{}` failed `{tool}`: {error}", self.name))?;
            let is_error = result.is_error == Some(true);
            let value = result_value(result);
            if is_error {
                Err(match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                })
            } else {
                Ok(value)
            }
        })
    }
}

/// What the guest receives: `structuredContent` when the server sent it, else the text
/// content (parsed as JSON when it is JSON), else the content blocks as JSON.
fn result_value(result: CallToolResult) -> Value {
    if let Some(structured) = result.structured_content {
        return structured;
    }
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect();
    if texts.len() == result.content.len() {
        let text = texts.concat();
        return serde_json::from_str(&text).unwrap_or(Value::String(text));
    }
    serde_json::to_value(&result.content).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_tool_names_made_callable() {
        assert!(valid_name("files") && valid_name("_x1"));
        assert!(!valid_name("1x") && !valid_name("a.b") && !valid_name(""));
        assert_eq!(callable("read file/v2"), "read_file_v2");
    }
}
