//! [`App`]: what every route of the HTTP API reads — the live sandboxes, the computer
//! sessions, the benchmark environments, the gateway and the access settings.

use std::sync::Arc;

use super::computer_sessions::ComputerSessions;
use super::envs::Envs;
use super::gateway_mount::Mount;
use super::live_sandboxes::LiveSandboxes;
use super::replica::Replica;

pub(super) type AppState = Arc<App>;

impl axum::extract::FromRef<AppState> for Envs {
    fn from_ref(app: &AppState) -> Self {
        app.envs.clone()
    }
}

/// The state every route of the HTTP API reads.
pub(super) struct App {
    pub(super) sandboxes: Arc<LiveSandboxes>,
    pub(super) computers: Arc<ComputerSessions>,
    /// Benchmark environments (`/v1/envs`).
    pub(super) envs: Envs,
    pub(super) token: Option<String>,
    /// Client-declared `command`/`http` tools are accepted (a token is set, or
    /// `--allow-host-tools`).
    pub(super) host_tools: bool,
    /// The model gateway (`--upstream`).
    pub(super) gateway: Option<Arc<Mount>>,
    /// This process as a replica (its id is on every answer; its client forwards
    /// requests to the others).
    pub(super) replica: Arc<Replica>,
}
