//! `cordon mcp`: an MCP server with an `execute_code` tool, on stdio or Streamable HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use cordon_protocol::execution::Language;

use cordon_server::McpServer;

use crate::run::{LimitArgs, load_tools};
use crate::serve::shutdown_signal;

/// Options of `cordon mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<SocketAddr>,
    /// Tools file; its tools are callable from the code (`client` handlers are refused).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Connect to an MCP server (stdio) and make its tools callable from the code as
    /// `await NAME.tool(...)`; COMMAND runs with `sh -c` (repeatable).
    #[arg(long = "connect", value_name = "NAME=COMMAND")]
    pub connect: Vec<String>,
    /// Live instances at once (running executions + sessions).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_instances: u32,
}

/// `cordon mcp`.
pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let mut registry = load_tools(args.tools.as_deref())?;
    for connection in crate::serve::connect_all(&args.connect).await? {
        connection.attach(&mut registry)?;
    }
    // stdout is the protocol channel on stdio: progress goes to stderr only.
    let sandbox = crate::run::sandbox(
        vec![Language::Python, Language::Javascript],
        args.max_instances,
    )
    .await?;
    let server = McpServer::new(sandbox, registry, args.limits.limits())?;
    match args.http {
        None => {
            server.serve_stdio().await?;
        }
        Some(addr) => {
            if !addr.ip().is_loopback() {
                bail!(
                    "refusing to serve MCP on {addr}: Streamable HTTP has no authentication here; \
                     listen on loopback and put an authenticating proxy in front"
                );
            }
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on {addr}"))?;
            eprintln!(
                "cordon: MCP listening on http://{}/mcp",
                listener.local_addr()?
            );
            server.serve_http(listener, shutdown_signal()).await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
