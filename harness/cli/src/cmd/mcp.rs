//! `cordon mcp`: an MCP server with `execute_code` and the computer tools, on stdio or
//! Streamable HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use cordon_protocol::execution::Language;

use cordon_computer::browser::BrowserOptions;
use cordon_protocol::tool::Policy;
use cordon_server::guard::parse_allowed_host;
use cordon_server::http::DEFAULT_MAX_SANDBOXES;
use cordon_server::{McpOptions, McpServer};

use crate::flags::{BrowserFlags, LimitArgs, parse_connect_policy};
use crate::setup::{
    connect_with_policies, load_tools, prepare_in_background, sandbox, shutdown_signal,
};

/// Options of `cordon mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio.
    #[arg(long, value_name = "HOST:PORT")]
    pub http: Option<SocketAddr>,
    /// With --http: also answer requests that name this server NAME (`Host`, and `Origin`
    /// of web pages); loopback names and the --http IP are always served (repeatable).
    #[arg(long = "allow-host", value_name = "NAME", value_parser = parse_allowed_host, requires = "http")]
    pub allow_host: Vec<String>,
    /// Tools file; its tools are callable from the code (`client` handlers are refused).
    #[arg(long, value_name = "FILE")]
    pub tools: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Connect to an MCP server (stdio) and make its tools callable from the code as
    /// `await NAME.tool(...)`; COMMAND runs with `sh -c` (repeatable).
    #[arg(long = "connect", value_name = "NAME=COMMAND")]
    pub connect: Vec<String>,
    /// Policy of the tools of connection NAME unless a --tools declaration of the same
    /// name says stricter: allow (default), ask or deny (repeatable).
    #[arg(long = "connect-policy", value_name = "NAME=POLICY", value_parser = parse_connect_policy)]
    pub connect_policy: Vec<(String, Policy)>,
    /// Live instances at once (running executions + sessions).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_instances: u32,
    /// REPL sessions (`session_id`) live at once across all connections (each holds a
    /// workspace in memory); a new one beyond is refused with an error result.
    #[arg(long, default_value_t = DEFAULT_MAX_SANDBOXES, value_name = "N")]
    pub max_sessions: usize,
    /// Chromium for the computer tools (started on the first `computer_open`).
    #[arg(long, value_name = "PATH", env = "CORDON_CHROMIUM")]
    pub chromium: Option<PathBuf>,
    /// Leave out the computer tools (computer_open, computer, computer_close).
    #[arg(long, conflicts_with_all = ["chromium", "computer_rules"])]
    pub no_computer: bool,
    /// Approval rules of computer sessions (JSON: {"rules": [...]}, as `cordon computer
    /// --rules`); default: ask before passwords, payment fields, buy/delete-like buttons,
    /// uploads and new origins.
    #[arg(long, value_name = "FILE")]
    pub computer_rules: Option<PathBuf>,
    /// Record each computer session's trajectory (JSONL + screenshots) in DIR/<id>,
    /// replayable with `cordon replay`.
    #[arg(long, value_name = "DIR", conflicts_with = "no_computer")]
    pub trajectories: Option<PathBuf>,
    #[command(flatten)]
    pub browser: BrowserFlags,
}

/// `cordon mcp`.
pub async fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let mut registry = load_tools(args.tools.as_deref())?;
    for connection in connect_with_policies(&args.connect, &args.connect_policy).await? {
        connection.attach(&mut registry)?;
    }
    // stdout is the protocol channel on stdio: progress goes to stderr only.
    let sandbox = sandbox(
        vec![Language::PythonLite, Language::Javascript],
        args.max_instances,
    )
    .await?;
    // The CPython image can take minutes the first time: the server answers meanwhile.
    prepare_in_background(&sandbox, Language::Python);
    let rules = match &args.computer_rules {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Some(
                serde_json::from_str::<serde_json::Value>(&text)
                    .with_context(|| format!("{}: not JSON", path.display()))?,
            )
        }
        None => None,
    };
    let browser = if args.no_computer {
        None
    } else {
        let mut browser = args.browser.apply(BrowserOptions::default())?;
        if let Some(path) = args.chromium {
            browser = browser.executable(path);
        }
        Some(browser)
    };
    let options = McpOptions::default()
        .browser(browser)
        .computer_rules(rules)
        .trajectories(args.trajectories)
        .allowed_hosts(args.allow_host)
        .max_sessions_total(args.max_sessions);
    let server = McpServer::with_options(sandbox, registry, args.limits.limits(), options)?;
    match args.http {
        None => {
            // SIGTERM must not leave Chromium behind: stop it, then exit.
            let stopper = server.clone();
            tokio::select! {
                served = server.serve_stdio() => served?,
                () = shutdown_signal() => stopper.shutdown().await,
            }
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
