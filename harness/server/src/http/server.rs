//! [`HttpApi`]: the HTTP API over a sandbox and a store — the state it builds and the tasks
//! it starts (reapers, retention sweeps, the gateway), its router with the layers every
//! request passes, and serving it until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::get;
use cordon_sandbox::Sandbox;

use super::app_state::App;
use super::auth::authenticate;
use super::computer_sessions::ComputerSessions;
use super::envs::{self, Envs};
use super::fallback::{method_not_allowed, route_not_found};
use super::gateway_mount::{self, Mount};
use super::health::health;
use super::live_sandboxes::LiveSandboxes;
use super::openapi::openapi;
use super::options::HttpOptions;
use super::{
    approvals, computers, executions, files, gateway, gateway_gemini, inert, sandboxes, session,
};
use crate::computer_pool::ComputerPool;
use crate::guard::{HostGuard, guard_requests};
use crate::periodic::spawn_periodic;
use crate::store::{Store, StoreError};
use crate::workspace_budget::Capacity;

/// The HTTP API over a sandbox and a store.
pub struct HttpApi {
    sandboxes: Arc<LiveSandboxes>,
    computers: Arc<ComputerSessions>,
    envs: Envs,
    gateway: Option<Arc<Mount>>,
    options: HttpOptions,
    expired_on_start: usize,
}

/// Stops what the API runs besides its routes (computer sessions and their Chromium);
/// see [`HttpApi::shutdown_handle`].
#[derive(Clone)]
pub struct ShutdownHandle {
    computers: Arc<ComputerSessions>,
}

impl std::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownHandle").finish_non_exhaustive()
    }
}

impl ShutdownHandle {
    /// Ends the live computer sessions (recorded `expired`, "the server shut down") and
    /// stops Chromium. Idempotent.
    pub async fn shutdown(&self) {
        self.computers.shutdown().await;
    }
}

impl std::fmt::Debug for HttpApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpApi")
            .field("options", &self.options.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl HttpApi {
    /// Builds the API. Whatever was live in `store` when its last server stopped is
    /// marked `expired` first (see [`Store::recover`]), and a Chromium that server left
    /// running is stopped. Must be called within a tokio runtime (it starts the tasks that
    /// expire idle sandboxes and computer sessions, and the retention sweep).
    pub async fn new(
        sandbox: Sandbox,
        store: Store,
        options: HttpOptions,
    ) -> Result<Self, StoreError> {
        let expired_on_start = store.recover(
            "the server stopped before this execution ended (its process exited or was killed); \
             run it again",
        ).await?;
        let store = Arc::new(store);
        let (gateway_sandbox, gateway_store) = (sandbox.clone(), store.clone());
        let capacity = Capacity {
            workspaces: options.max_sandboxes,
            bytes: options.max_workspace_bytes_total,
        };
        let sandboxes = LiveSandboxes::new(
            sandbox,
            store.clone(),
            options.connections.clone(),
            capacity,
        );
        sandboxes.spawn_reaper();
        let trajectories = options
            .trajectories
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("cordon-trajectories"));
        let computers = ComputerSessions::new(
            ComputerPool::new(options.browser.clone()),
            store,
            trajectories,
            options.max_computers,
        );
        computers.reap_orphans().await?;
        computers.spawn_reaper();
        let gateway = options.gateway.clone().map(|setup| {
            Arc::new(Mount::new(
                setup,
                gateway_sandbox,
                gateway_store,
                computers.clone(),
                options.token.is_some(),
            ))
        });
        if let (Some(mount), Some(retain)) = (&gateway, options.retain) {
            gateway_mount::spawn_retention(mount, retain);
        }
        if let Some(retain) = options.retain {
            spawn_retention(&computers, retain);
        }
        let envs = Envs::new(Some(computers.pool().launcher()));
        Ok(HttpApi {
            sandboxes,
            computers,
            envs,
            gateway,
            options,
            expired_on_start,
        })
    }

    /// A handle that stops the computer sessions and Chromium; [`Self::serve`] calls it
    /// when it returns, and a caller that gives up waiting for `serve` calls it itself.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            computers: self.computers.clone(),
        }
    }

    /// Executions found running in the store at start, now `expired`.
    pub fn expired_on_start(&self) -> usize {
        self.expired_on_start
    }

    /// The routes, ready for [`axum::serve`] on a listener bound to `bound` (its IP and
    /// port are part of the `Host` names accepted; see [`crate::guard`]).
    pub fn router(&self, bound: std::net::SocketAddr) -> Router {
        let app = Arc::new(App {
            sandboxes: self.sandboxes.clone(),
            computers: self.computers.clone(),
            envs: self.envs.clone(),
            token: self.options.token.clone(),
            host_tools: self.options.token.is_some() || self.options.allow_host_tools,
            gateway: self.gateway.clone(),
        });
        let guard = Arc::new(HostGuard::new(bound, &self.options.allowed_hosts));
        Router::new()
            .route("/openapi.json", get(openapi))
            .route("/v1/health", get(health))
            .merge(sandboxes::routes())
            .merge(executions::routes())
            .merge(approvals::routes())
            .merge(computers::routes())
            .merge(gateway::routes())
            .merge(gateway_gemini::routes())
            .merge(session::routes())
            .merge(files::routes())
            .merge(envs::routes())
            .fallback(route_not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(middleware::from_fn_with_state(app.clone(), authenticate))
            .layer(DefaultBodyLimit::max(self.options.max_body_bytes))
            // Outermost: a request naming another host or coming from another site's page
            // is refused before authentication and before its body is read.
            .layer(middleware::from_fn_with_state(guard, guard_requests))
            // Around everything, refusals included: no response is read as another type.
            .layer(middleware::map_response(inert::nosniff))
            .with_state(app)
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use axum::serve::ListenerExt;
        let router = self.router(listener.local_addr()?);
        // Without TCP_NODELAY, the small writes of an SSE stream wait for the peer's
        // delayed ACK (Nagle): 40 ms per event on Linux.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let handle = self.shutdown_handle();
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        handle.shutdown().await;
        served
    }
}

/// Deletes histories older than `retain` now and then (at start, then every
/// `retain / 4`, at least every second and at most every hour).
fn spawn_retention(computers: &Arc<ComputerSessions>, retain: Duration) {
    let every = (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let retain_ms = u64::try_from(retain.as_millis()).unwrap_or(u64::MAX);
    spawn_periodic(computers, every, move |sessions| async move {
        let cutoff = cordon_core::clock::now_ms().saturating_sub(retain_ms);
        if let Err(error) = sessions.purge(cutoff).await {
            eprintln!("cordon serve: deleting old histories failed: {error}");
        }
    });
}
