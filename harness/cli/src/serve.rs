//! `cordon serve`: the HTTP + SSE API, with its store in SQLite.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::http::{DEFAULT_MAX_BODY_BYTES, HttpApi, HttpOptions};
use cordon_server::store::{Store, default_db_path};

/// Options of `cordon serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7420", value_name = "HOST:PORT")]
    pub addr: SocketAddr,
    /// SQLite database file [default: ~/.local/share/cordon/cordon.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Require `Authorization: Bearer <TOKEN>` on every request.
    #[arg(
        long,
        env = "CORDON_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES, value_name = "N")]
    pub max_body_bytes: usize,
    /// Live instances at once (running executions + stateful sandboxes).
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_instances: u32,
}

/// `cordon serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.addr.ip().is_loopback() && args.token.is_none() {
        bail!(
            "refusing to listen on {} without --token: anyone who can reach it could run code, \
             and `command` tools run programs on this host",
            args.addr
        );
    }
    let db = match args.db {
        Some(path) => path,
        None => default_db_path()
            .context("no home directory to keep the database in; pass --db PATH")?,
    };
    let store = Store::open(&db).with_context(|| format!("opening {}", db.display()))?;
    let sandbox = Sandbox::new(
        SandboxConfig::default()
            .preload(vec![Language::Python, Language::Javascript])
            .max_instances(args.max_instances)
            .progress(|line| eprintln!("cordon: {line}")),
    )
    .await?;
    let options = HttpOptions::default()
        .token(args.token)
        .max_body_bytes(args.max_body_bytes);
    let api = HttpApi::new(sandbox, store, options)
        .with_context(|| format!("recovering {}", db.display()))?;
    if api.expired_on_start() > 0 {
        eprintln!(
            "cordon: {} execution(s) were running when the last server stopped; they are now `expired`",
            api.expired_on_start()
        );
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let local = listener.local_addr()?;
    // Tests and supervisors read this line to learn the port (with --addr 127.0.0.1:0).
    eprintln!(
        "cordon: listening on http://{local} (database {})",
        db.display()
    );
    api.serve(listener, shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
