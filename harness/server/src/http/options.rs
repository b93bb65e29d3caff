//! [`HttpOptions`]: what `cordon serve` configures in the HTTP API, with its defaults.

use std::path::PathBuf;
use std::time::Duration;

use cordon_computer::browser::BrowserOptions;

use super::gateway_setup::GatewaySetup;
use crate::mcp_client::Connection;
use crate::objects::Objects;
use crate::workspace_budget::{DEFAULT_MAX_SANDBOXES, DEFAULT_MAX_WORKSPACE_BYTES_TOTAL};

/// Largest request body accepted by default (tool results may carry up to the default
/// `max_payload_bytes` of 1 MiB each, several per request).
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// How long finished histories are kept unless told otherwise.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(7 * 24 * 3600);
/// Computer sessions open at once unless told otherwise.
pub const DEFAULT_MAX_COMPUTERS: usize = 16;
/// Idle time after which a live sandbox is paused unless told otherwise.
pub const DEFAULT_PAUSE_AFTER: Duration = Duration::from_secs(300);

/// Options of the HTTP API.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Largest request body, in bytes; larger ones get `413 payload_too_large`.
    pub max_body_bytes: usize,
    /// Connected MCP servers whose tools every sandbox gets (`--connect`).
    pub connections: Vec<Connection>,
    /// How computer sessions start Chromium (launched on the first session).
    pub browser: BrowserOptions,
    /// Where each computer session's trajectory directory goes; default: a
    /// `cordon-trajectories` directory in the system's temp directory.
    pub trajectories: Option<PathBuf>,
    /// Computer sessions open at once.
    pub max_computers: usize,
    /// Sandboxes live at once (`--max-sandboxes`); a create beyond is `503
    /// too_many_sandboxes`.
    pub max_sandboxes: usize,
    /// Sum of the `workspace_bytes` of the live sandboxes (`--max-workspace-bytes-total`):
    /// workspaces live in this process's memory. A create beyond is `503
    /// workspace_budget_exhausted`.
    pub max_workspace_bytes_total: u64,
    /// Finished executions, ended sandboxes and closed computer sessions (with their
    /// trajectories) older than this are deleted; `None` keeps everything.
    pub retain: Option<Duration>,
    /// Host names served besides loopback and the bound address (`--allow-host`), as
    /// [`crate::guard::parse_allowed_host`] returns them; see [`crate::guard`].
    pub allowed_hosts: Vec<String>,
    /// Accept client-declared `command` and `http` tools (programs and requests run on this
    /// host) even without a token (`--allow-host-tools`). With a token they are always
    /// accepted.
    pub allow_host_tools: bool,
    /// The model behind `POST /v1/messages` (`--upstream`); `None`: no gateway.
    pub gateway: Option<GatewaySetup>,
    /// Where paused sandboxes' state goes (`--objects`); `None`: this process's memory
    /// (pausing works, but a paused sandbox does not outlive the process).
    pub objects: Option<Objects>,
    /// Idle time after which a live sandbox is paused (`--pause-after`); `None`: only
    /// when asked (`POST /v1/sandboxes/{id}/pause`) and at a graceful stop.
    pub pause_after: Option<Duration>,
    /// How other replicas on the same database reach this one (`--replica-address`,
    /// e.g. `http://10.0.0.5:7420`); `None`: the server runs alone (no heartbeat, no
    /// forwarding).
    pub replica_address: Option<String>,
    /// A replica whose heartbeat is older than this is dead (`--replica-lease`).
    pub replica_lease: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            connections: Vec::new(),
            browser: BrowserOptions::default(),
            trajectories: None,
            max_computers: DEFAULT_MAX_COMPUTERS,
            max_sandboxes: DEFAULT_MAX_SANDBOXES,
            max_workspace_bytes_total: DEFAULT_MAX_WORKSPACE_BYTES_TOTAL,
            retain: Some(DEFAULT_RETAIN),
            allowed_hosts: Vec::new(),
            allow_host_tools: false,
            gateway: None,
            objects: None,
            pause_after: Some(DEFAULT_PAUSE_AFTER),
            replica_address: None,
            replica_lease: super::replica::DEFAULT_REPLICA_LEASE,
        }
    }
}

impl HttpOptions {
    crate::setters::setters! {
        token: Option<String>,
        connections: Vec<Connection>,
        max_body_bytes: usize,
        browser: BrowserOptions,
        trajectories: Option<PathBuf>,
        max_computers: usize,
        max_sandboxes: usize,
        max_workspace_bytes_total: u64,
        retain: Option<Duration>,
        allowed_hosts: Vec<String>,
        allow_host_tools: bool,
        gateway: Option<GatewaySetup>,
        objects: Option<Objects>,
        pause_after: Option<Duration>,
        replica_address: Option<String>,
        replica_lease: Duration,
    }
}
