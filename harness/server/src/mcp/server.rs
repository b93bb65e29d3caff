//! [`McpServer`]: the sandbox, the declared tools and the computer pool one `cordon mcp`
//! serves, the REPL sessions of each connection (bounded across connections), and the
//! dispatch of `tools/list` and `tools/call`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use cordon_computer::browser::BrowserOptions;
use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{Language, Limits};
use cordon_sandbox::{Quota, Sandbox, Session, SessionSpec, Workspace};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::computer_tools::{self, ComputerTable, ComputerTools};
use super::options::{McpOptions, McpSetupError, unanswerable_client_tool};
use crate::computer_pool::ComputerPool;
use crate::workspace_budget::{Budget, BudgetError, Capacity, Reservation};

/// Sessions kept at once; the oldest is dropped beyond this (each holds an instance).
pub const MAX_SESSIONS: usize = 64;

/// The protocol versions this server speaks.
pub fn protocol_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
}

/// The MCP server. Cheap to clone: each Streamable HTTP session gets a clone, and all
/// share the sandbox and the REPL sessions.
#[derive(Clone)]
pub struct McpServer {
    pub(super) inner: Arc<Inner>,
    /// REPL sessions by `session_id`: one table per MCP connection, so two clients of
    /// a Streamable HTTP server never see each other's variables.
    sessions: Arc<Mutex<SessionTable>>,
    /// Computer sessions, also one table per MCP connection.
    computers: Arc<ComputerTable>,
}

pub(super) struct Inner {
    pub(super) sandbox: Sandbox,
    pub(super) dispatcher: Dispatcher,
    pub(super) limits: Limits,
    /// `None`: the computer tools are not offered.
    pool: Option<Arc<ComputerPool>>,
    /// Approval rules of computer sessions (`None`: the default rules).
    computer_rules: Option<Value>,
    /// Where computer sessions record their trajectories (`None`: not recorded).
    trajectories: Option<PathBuf>,
    /// Host names Streamable HTTP serves besides loopback and the bound address.
    pub(super) allowed_hosts: Vec<String>,
    /// REPL sessions live across all connections: each connection has its own table, so
    /// without this many connections would hold unbounded workspaces between them.
    budget: Arc<Budget>,
}

#[derive(Default)]
struct SessionTable {
    /// Each session with its place in the server-wide budget, given back when it goes.
    by_id: HashMap<String, (Language, Session, Reservation)>,
    order: Vec<String>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server running code in `sandbox` with the tools of `registry` and `limits`, and
    /// the computer tools with the default [`McpOptions`].
    pub fn new(
        sandbox: Sandbox,
        registry: ToolRegistry,
        limits: Limits,
    ) -> Result<Self, McpSetupError> {
        McpServer::with_options(sandbox, registry, limits, McpOptions::default())
    }

    /// [`Self::new`] with [`McpOptions`].
    pub fn with_options(
        sandbox: Sandbox,
        registry: ToolRegistry,
        limits: Limits,
        options: McpOptions,
    ) -> Result<Self, McpSetupError> {
        if let Some(tool) = unanswerable_client_tool(&registry) {
            // `user_ask` is answered by the client's user (elicitation).
            return Err(McpSetupError::ClientTool(tool.to_owned()));
        }
        if let Some(rules) = &options.computer_rules {
            let body = json!({"url": "about:blank", "rules": rules});
            let checked = serde_json::from_value(body)
                .map_err(|error| McpSetupError::ComputerRules(error.to_string()))
                .and_then(|body| {
                    crate::computer_pool::Setup::parse(&body)
                        .map_err(|error| McpSetupError::ComputerRules(error.to_string()))
                });
            checked?;
        }
        let pool = options
            .browser
            .map(|browser| Arc::new(ComputerPool::new(browser)));
        let computers = ComputerTable::new(
            pool.clone()
                .unwrap_or_else(|| Arc::new(ComputerPool::new(BrowserOptions::default()))),
            options.trajectories.clone(),
        );
        Ok(McpServer {
            inner: Arc::new(Inner {
                sandbox,
                dispatcher: Dispatcher::new(Arc::new(registry)),
                limits,
                pool,
                computer_rules: options.computer_rules,
                trajectories: options.trajectories,
                allowed_hosts: options.allowed_hosts,
                // All sessions declare the operator's one quota: the count bounds the bytes.
                budget: Budget::new(Capacity {
                    workspaces: options.max_sessions_total,
                    bytes: u64::MAX,
                }),
            }),
            sessions: Arc::default(),
            computers,
        })
    }

    /// The same server with empty session tables (for a new MCP connection).
    pub fn with_own_sessions(&self) -> McpServer {
        McpServer {
            inner: self.inner.clone(),
            sessions: Arc::default(),
            computers: ComputerTable::new(self.computer_pool(), self.inner.trajectories.clone()),
        }
    }

    fn computer_pool(&self) -> Arc<ComputerPool> {
        match &self.inner.pool {
            Some(pool) => pool.clone(),
            None => Arc::new(ComputerPool::new(BrowserOptions::default())),
        }
    }

    /// Stops Chromium if the computer tools started it (every computer session ends).
    pub async fn shutdown(&self) {
        if let Some(pool) = &self.inner.pool {
            pool.shutdown().await;
        }
    }

    pub(super) fn session(&self, id: &str, language: Language) -> Result<Session, String> {
        let mut table = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((existing, session, _)) = table.by_id.get(id) {
            if *existing != language {
                return Err(format!(
                    "session {id:?} runs {}, not {}; use another session_id",
                    existing.as_str(),
                    language.as_str()
                ));
            }
            return Ok(session.clone());
        }
        if table.order.len() >= MAX_SESSIONS {
            let oldest = table.order.remove(0);
            table.by_id.remove(&oldest);
        }
        let reservation = self
            .inner
            .budget
            .reserve(self.inner.limits.workspace_bytes)
            .map_err(|error| match error {
                BudgetError::TooMany { max } => format!(
                    "this server keeps at most {max} REPL sessions across all its connections, \
                     and they are all in use; reuse a session_id you already have, or run \
                     without session_id (a fresh workspace each call)"
                ),
                other => format!("cannot start session {id:?}: {other}"),
            })?;
        let spec = SessionSpec::new(language, self.inner.dispatcher.clone())
            .limits(self.inner.limits)
            .workspace(self.new_workspace());
        let session = self.inner.sandbox.session(spec);
        table
            .by_id
            .insert(id.to_owned(), (language, session.clone(), reservation));
        table.order.push(id.to_owned());
        Ok(session)
    }

    pub(super) fn new_workspace(&self) -> Workspace {
        Workspace::new(Quota {
            bytes: self.inner.limits.workspace_bytes,
            files: self.inner.limits.workspace_files,
        })
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.inner.pool.is_some() {
                "Cordon runs code in a WebAssembly sandbox and drives isolated browsers. Use \
                 execute_code to run Python or JavaScript; the last expression is the result; \
                 declared tools are async functions the code can await. Use computer_open to \
                 open a browser at a URL, computer to click, type, scroll and read the next \
                 screenshot, and computer_close when done."
            } else {
                "Cordon runs code in a WebAssembly sandbox. Use execute_code to run Python or \
                 JavaScript; the last expression is the result; declared tools are async \
                 functions the code can await."
            })
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(protocol_versions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut tools = vec![self.execute_code_tool()];
        if self.inner.pool.is_some() {
            tools.extend(computer_tools::tools());
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let computers = ComputerTools {
            table: &self.computers,
            rules: &self.inner.computer_rules,
        };
        let computing = self.inner.pool.is_some();
        match request.name.as_ref() {
            "execute_code" => self
                .execute_code(arguments, context)
                .await
                .map(CallToolResponse::from),
            "computer_open" if computing => Ok(CallToolResponse::from(
                computers.open(arguments, &context).await,
            )),
            "computer" if computing => Ok(CallToolResponse::from(
                computers.act(arguments, &context).await,
            )),
            "computer_close" if computing => {
                Ok(CallToolResponse::from(computers.close(arguments).await))
            }
            other => Err(McpError::invalid_params(
                if computing {
                    format!(
                        "unknown tool `{other}`; this server has execute_code, computer_open, \
                         computer and computer_close"
                    )
                } else {
                    format!("unknown tool `{other}`; this server has execute_code")
                },
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each connection has its own session table: many connections together still cannot
    /// keep more sessions (and workspaces) than the server-wide cap, and a connection that
    /// goes gives its sessions' places back.
    #[tokio::test]
    async fn repl_sessions_are_capped_across_connections() -> Result<(), Box<dyn std::error::Error>>
    {
        let sandbox =
            Sandbox::new(cordon_sandbox::SandboxConfig::default().preload(Vec::new())).await?;
        let options = McpOptions::default().browser(None).max_sessions_total(2);
        let server = McpServer::with_options(
            sandbox,
            ToolRegistry::new(Vec::new())?,
            Limits::default(),
            options,
        )?;
        let (first, second, third) = (
            server.with_own_sessions(),
            server.with_own_sessions(),
            server.with_own_sessions(),
        );
        assert!(first.session("a", Language::Javascript).is_ok());
        assert!(second.session("b", Language::Javascript).is_ok());
        let refused = third
            .session("c", Language::Javascript)
            .err()
            .unwrap_or_default();
        assert!(refused.contains("at most 2 REPL sessions"), "{refused}");
        assert!(
            first.session("a", Language::Javascript).is_ok(),
            "its own session is kept"
        );
        drop(second);
        assert!(third.session("c", Language::Javascript).is_ok());
        Ok(())
    }

    #[test]
    fn offers_only_handshake_era_versions() {
        let versions: Vec<&str> = protocol_versions().iter().map(|v| v.as_str()).collect();
        assert_eq!(
            versions,
            ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
        );
    }
}
