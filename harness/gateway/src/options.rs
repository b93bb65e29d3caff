//! How a gateway behaves: [`GatewayOptions`] and the defaults it starts from.

use std::time::Duration;

/// Model turns per client request unless told otherwise.
pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 20;
/// How long an idle code-execution container lives unless told otherwise.
pub const DEFAULT_CONTAINER_TTL: Duration = Duration::from_secs(30 * 60);
/// How long a program waits for the client's tool results unless told otherwise.
pub const DEFAULT_PROGRAM_WAIT: Duration = Duration::from_secs(5 * 60);
/// Code-execution containers alive at once unless told otherwise.
pub const DEFAULT_MAX_CONTAINERS: usize = 32;

/// How the gateway behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Model turns per client request; at the cap the response says so.
    pub max_tool_rounds: u32,
    /// Idle time after which a code-execution container expires.
    pub container_ttl: Duration,
    /// How long a program suspended on client tools waits for their results (at most
    /// [`Self::container_ttl`]); past it the calls fail inside the program.
    pub program_wait: Duration,
    /// Containers alive at once (each holds a sandbox instance); a new one closes the least
    /// recently used, idle ones first. Keep it below the sandbox's instance limit.
    pub max_containers: usize,
    /// Forward the client's own key to the upstream (off when the client's credential is
    /// the server's own token).
    pub forward_client_key: bool,
    /// The language of code execution's programs: `python` (CPython with numpy, pandas and
    /// matplotlib) by default, `python-lite` (RustPython) or `javascript`.
    pub code_language: cordon_protocol::execution::Language,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            container_ttl: DEFAULT_CONTAINER_TTL,
            program_wait: DEFAULT_PROGRAM_WAIT,
            max_containers: DEFAULT_MAX_CONTAINERS,
            forward_client_key: true,
            code_language: cordon_protocol::execution::Language::Python,
        }
    }
}

impl GatewayOptions {
    /// Sets [`Self::max_tool_rounds`] (at least 1).
    pub fn max_tool_rounds(mut self, rounds: u32) -> Self {
        self.max_tool_rounds = rounds.max(1);
        self
    }

    /// Sets [`Self::container_ttl`].
    pub fn container_ttl(mut self, ttl: Duration) -> Self {
        self.container_ttl = ttl;
        self
    }

    /// Sets [`Self::program_wait`].
    pub fn program_wait(mut self, wait: Duration) -> Self {
        self.program_wait = wait;
        self
    }

    /// Sets [`Self::max_containers`] (at least 1).
    pub fn max_containers(mut self, count: usize) -> Self {
        self.max_containers = count.max(1);
        self
    }

    /// Sets [`Self::code_language`].
    pub fn code_language(mut self, language: cordon_protocol::execution::Language) -> Self {
        self.code_language = language;
        self
    }

    /// Sets [`Self::forward_client_key`].
    pub fn forward_client_key(mut self, forward: bool) -> Self {
        self.forward_client_key = forward;
        self
    }
}
