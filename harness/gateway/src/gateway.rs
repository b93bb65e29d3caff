//! The gateway value: what every request of one gateway shares (upstream, server tools,
//! containers, recorder, what is kept between requests), and how it is built. Each front
//! door adds its own entry point (`messages`, `session`).

use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_sandbox::Sandbox;

use crate::asked_calls::Asks;
use crate::computer::Computers;
use crate::containers::Containers;
use crate::continuation::Continuations;
use crate::gateway_store::GatewayStore;
use crate::options::GatewayOptions;
use crate::record::{NoRecorder, Recorder};
use crate::set_aside::Stash;
use crate::upstream::Upstream;

/// The model gateway. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

/// What every request of one gateway shares.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) upstream: Arc<dyn Upstream>,
    pub(crate) operator: Option<Dispatcher>,
    pub(crate) containers: Containers,
    pub(crate) recorder: Arc<dyn Recorder>,
    pub(crate) computers: Option<Arc<dyn Computers>>,
    /// Where what must outlive the process is kept (none: memory only).
    pub(crate) store: Option<Arc<dyn GatewayStore>>,
    pub(crate) options: GatewayOptions,
    /// Calls that ran inline in a turn handed to the client, by that turn's client calls.
    pub(crate) stash: Stash,
    /// Calls handed to the client for approval, until answered.
    pub(crate) asks: Asks,
    /// Turns handed to the client with calls to answer, for joining their continuations.
    pub(crate) continuations: Continuations,
}

impl Gateway {
    /// A gateway to `upstream` with no server tools, no sandbox and no recording.
    pub fn new(upstream: Arc<dyn Upstream>, options: GatewayOptions) -> Self {
        let parts = Parts {
            operator: None,
            sandbox: None,
            recorder: Arc::new(NoRecorder),
            computers: None,
            store: None,
        };
        Self::build(upstream, options, parts)
    }

    fn build(upstream: Arc<dyn Upstream>, options: GatewayOptions, parts: Parts) -> Self {
        let Parts {
            operator,
            sandbox,
            recorder,
            computers,
            store,
        } = parts;
        Gateway {
            inner: Arc::new(Inner {
                upstream,
                operator,
                containers: Containers::new(
                    sandbox,
                    store.clone(),
                    options.container_ttl,
                    options.program_wait,
                    options.max_containers,
                    options.code_language,
                ),
                recorder,
                computers,
                options,
                stash: Stash::new(store.clone()),
                asks: Asks::new(store.clone()),
                continuations: Continuations::new(store.clone()),
                store,
            }),
        }
    }

    fn rebuild(self, f: impl FnOnce(&mut Parts)) -> Self {
        let inner = &self.inner;
        let mut parts = Parts {
            operator: inner.operator.clone(),
            sandbox: inner.containers.sandbox(),
            recorder: inner.recorder.clone(),
            computers: inner.computers.clone(),
            store: inner.store.clone(),
        };
        f(&mut parts);
        Self::build(inner.upstream.clone(), inner.options.clone(), parts)
    }

    /// Operator server tools (a tools file's registry).
    pub fn with_operator_tools(self, registry: ToolRegistry) -> Self {
        self.rebuild(|p| p.operator = Some(Dispatcher::new(Arc::new(registry))))
    }

    /// The sandbox code execution runs in (without it, code-execution tools are refused).
    pub fn with_sandbox(self, sandbox: Sandbox) -> Self {
        self.rebuild(|p| p.sandbox = Some(sandbox))
    }

    /// Where conversations are recorded.
    pub fn with_recorder(self, recorder: Arc<dyn Recorder>) -> Self {
        self.rebuild(|p| p.recorder = recorder)
    }

    /// What runs computer-use actions for requests that bind a computer.
    pub fn with_computers(self, computers: Arc<dyn Computers>) -> Self {
        self.rebuild(|p| p.computers = Some(computers))
    }

    /// Where what is at rest between two client requests is kept (idle containers, calls
    /// waiting for approval, continuations), so it outlives this process: a gateway on the
    /// same store after a restart takes them up ("Restarts" in `docs/gateway.md`).
    pub fn with_store(self, store: Arc<dyn GatewayStore>) -> Self {
        self.rebuild(|p| p.store = Some(store))
    }

    /// The upstream, as `API=URL`.
    pub fn upstream(&self) -> String {
        self.inner.upstream.describe()
    }
}

struct Parts {
    operator: Option<Dispatcher>,
    sandbox: Option<Sandbox>,
    recorder: Arc<dyn Recorder>,
    computers: Option<Arc<dyn Computers>>,
    store: Option<Arc<dyn GatewayStore>>,
}
