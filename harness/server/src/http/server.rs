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
use super::forward::{forward, stamp_replica};
use super::gateway_mount::{self, Mount};
use super::health::health;
use super::live_sandboxes::LiveSandboxes;
use super::openapi::openapi;
use super::options::HttpOptions;
use super::replica::Replica;
use super::unread_body::close_after_refusal;
use super::{
    approvals, computers, executions, files, gateway, gateway_gemini, inert, sandboxes, session,
};
use crate::computer_pool::ComputerPool;
use crate::guard::{HostGuard, guard_requests};
use crate::objects::Objects;
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
    replica: Arc<Replica>,
}

/// Stops what the API runs besides its routes (pauses the idle sandboxes, ends the
/// computer sessions and their Chromium); see [`HttpApi::shutdown_handle`].
#[derive(Clone)]
pub struct ShutdownHandle {
    sandboxes: Arc<LiveSandboxes>,
    computers: Arc<ComputerSessions>,
    replica: Arc<Replica>,
}

impl std::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownHandle").finish_non_exhaustive()
    }
}

impl ShutdownHandle {
    /// Pauses every idle live sandbox (their state goes to the object store, so the next
    /// server brings them back), ends the live computer sessions (recorded `expired`, "the
    /// server shut down") and stops Chromium. Idempotent.
    pub async fn shutdown(&self) {
        let paused = self.sandboxes.pause_all_idle().await;
        if paused > 0 {
            eprintln!("cordon serve: paused {paused} idle sandbox(es) before stopping");
        }
        self.computers.shutdown().await;
        // Last: the other replicas end what this one still owns at their next beat.
        self.replica.retire(&self.sandboxes.store).await;
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
    /// Builds the API. Whatever was live in `store` and is owned by no live replica is
    /// ended first (see [`Store::recover`]; executions `interrupted`), and a Chromium that server left
    /// running is stopped. Must be called within a tokio runtime (it starts the tasks that
    /// expire idle sandboxes and computer sessions, and the retention sweep).
    pub async fn new(
        sandbox: Sandbox,
        store: Store,
        options: HttpOptions,
    ) -> Result<Self, StoreError> {
        let replica = Replica::new(options.replica_address.clone(), options.replica_lease)
            .map_err(|error| StoreError::Io {
                path: "the HTTP client that forwards to other replicas".to_owned(),
                source: std::io::Error::other(error),
            })?;
        let replica = Arc::new(replica);
        let expired_on_start = replica.start(&store).await?;
        let store = Arc::new(store);
        replica.spawn_heartbeat(store.clone());
        let (gateway_sandbox, gateway_store) = (sandbox.clone(), store.clone());
        let env_store = store.clone();
        let capacity = Capacity {
            workspaces: options.max_sandboxes,
            bytes: options.max_workspace_bytes_total,
        };
        let objects = options.objects.clone().unwrap_or_else(Objects::in_memory);
        let sandboxes = LiveSandboxes::new(
            sandbox,
            store.clone(),
            options.connections.clone(),
            capacity,
            objects,
            options.pause_after,
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
            options.replica_address.as_deref(),
        );
        computers.reap_orphans().await?;
        computers.spawn_reaper();
        let gateway = options.gateway.clone().map(|setup| {
            Arc::new(Mount::new(
                setup,
                gateway_sandbox,
                gateway_store,
                options.objects.clone().unwrap_or_else(Objects::in_memory),
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
        let envs = Envs::recorded(computers.pool().launcher(), env_store);
        if let Some(retain) = options.retain {
            envs.spawn_retention(retain);
        }
        Ok(HttpApi {
            sandboxes,
            computers,
            envs,
            gateway,
            options,
            expired_on_start,
            replica,
        })
    }

    /// A handle that stops the computer sessions and Chromium; [`Self::serve`] calls it
    /// when it returns, and a caller that gives up waiting for `serve` calls it itself.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            sandboxes: self.sandboxes.clone(),
            computers: self.computers.clone(),
            replica: self.replica.clone(),
        }
    }

    /// Executions found running in the store at start (owned by no live replica), now
    /// `interrupted`.
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
            replica: self.replica.clone(),
        });
        let mut allowed_hosts = self.options.allowed_hosts.clone();
        allowed_hosts.extend(self.replica.host());
        let guard = Arc::new(HostGuard::new(bound, &allowed_hosts));
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
            // After authentication: only a request this replica would serve goes on.
            .layer(middleware::from_fn_with_state(app.clone(), forward))
            .layer(middleware::from_fn_with_state(app.clone(), authenticate))
            .layer(DefaultBodyLimit::max(self.options.max_body_bytes))
            // Outermost: a request naming another host or coming from another site's page
            // is refused before authentication and before its body is read.
            .layer(middleware::from_fn_with_state(guard, guard_requests))
            // Around every refusal that leaves a body unread (the guard's included).
            .layer(middleware::from_fn(close_after_refusal))
            // Around everything, refusals included: no response is read as another type.
            .layer(middleware::map_response(inert::nosniff))
            .layer(middleware::map_response_with_state(
                self.replica.clone(),
                stamp_replica,
            ))
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
