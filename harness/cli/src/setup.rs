//! What the commands build before they run and how they stop: the sandbox, the tools, the
//! `--connect` MCP servers, the background preparation of the CPython image, and the
//! shutdown signal.

use std::path::Path;

use anyhow::bail;
use cordon_core::ToolRegistry;
use cordon_protocol::execution::Language;
use cordon_protocol::tool::Policy;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::Connection;

/// Loads a tools file, or no tools.
pub fn load_tools(path: Option<&Path>) -> anyhow::Result<ToolRegistry> {
    match path {
        Some(path) => Ok(ToolRegistry::from_file(path)?),
        None => Ok(ToolRegistry::empty()),
    }
}

/// The sandbox with `languages` loaded and a pool of `max_instances`, reporting one-time
/// image preparation on stderr (stdout may be a protocol channel).
pub async fn sandbox(languages: Vec<Language>, max_instances: u32) -> anyhow::Result<Sandbox> {
    let config = SandboxConfig::default()
        .preload(languages)
        .max_instances(max_instances)
        .progress(|line| eprintln!("cordon: {line}"));
    Ok(Sandbox::new(config).await?)
}

/// Loads `language`'s image in the background (a server listens meanwhile; its first
/// execution in that language waits for the image, the others do not).
pub fn prepare_in_background(sandbox: &Sandbox, language: Language) {
    let sandbox = sandbox.clone();
    tokio::spawn(async move {
        if let Err(error) = sandbox.prepare(language).await {
            eprintln!(
                "cordon: could not prepare {} (its executions will fail with this error): \
                 {error}",
                language.as_str()
            );
        }
    });
}

/// Starts every `--connect NAME=COMMAND` server and lists its tools on stderr.
pub async fn connect_all(specs: &[String]) -> anyhow::Result<Vec<Connection>> {
    let mut connections = Vec::with_capacity(specs.len());
    for spec in specs {
        let connection = Connection::start(spec).await?;
        eprintln!(
            "cordon: connected `{}`: {}",
            connection.name(),
            connection.tool_names().join(", ")
        );
        connections.push(connection);
    }
    Ok(connections)
}

/// [`connect_all`], then each `--connect-policy NAME=POLICY` becomes the default policy of
/// connection NAME's tools. A policy naming no `--connect` is an error (checked before
/// any server starts).
pub async fn connect_with_policies(
    specs: &[String],
    policies: &[(String, Policy)],
) -> anyhow::Result<Vec<Connection>> {
    let names: Vec<&str> = specs
        .iter()
        .filter_map(|spec| spec.split_once('=').map(|(name, _)| name.trim()))
        .collect();
    for (name, _) in policies {
        if !names.contains(&name.as_str()) {
            bail!(
                "--connect-policy {name}=…: there is no --connect {name}=COMMAND \
                 (connections: {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
    }
    let mut connections = connect_all(specs).await?;
    for (name, policy) in policies {
        for connection in connections.iter_mut().filter(|c| c.name() == name) {
            connection.set_default_policy(*policy);
        }
    }
    Ok(connections)
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
