//! Sessions: one instance kept across executions ([`Session`]), what they run with
//! ([`SessionSpec`]), and [`Sandbox::session`], which opens one (defined here, beside the
//! type it makes, so that `sandbox.rs` never names a session).

use std::sync::Arc;

use cordon_core::broker::Approver;
use cordon_core::dispatch::Dispatcher;
use cordon_protocol::execution::{Language, Limits};

use crate::execution::{Execution, ExecutionRequest};
use crate::image::{LiveInstance, SessionSlot};
use crate::sandbox::Sandbox;
use crate::workspace::Workspace;

/// What a session runs with.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionSpec {
    /// Guest language.
    pub language: Language,
    /// Tools available to every execution of the session.
    pub tools: Dispatcher,
    /// Limits for each execution.
    pub limits: Limits,
    /// Who decides `ask` calls; `None` parks them per execution.
    pub approver: Option<Arc<dyn Approver>>,
    /// The files every execution of the session sees at `/workspace`.
    pub workspace: Option<Workspace>,
}

impl std::fmt::Debug for SessionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSpec")
            .field("language", &self.language)
            .finish_non_exhaustive()
    }
}

impl SessionSpec {
    /// A session spec with default limits.
    pub fn new(language: Language, tools: Dispatcher) -> Self {
        SessionSpec {
            language,
            tools,
            limits: Limits::default(),
            approver: None,
            workspace: None,
        }
    }

    crate::spec_setters::limits_and_workspace_setters!("session");
}

/// A REPL-like session: executions run one at a time on one instance, so globals persist.
///
/// An execution stopped by a limit, a fault or cancellation discards the instance (its
/// state may be half-updated); the next execution starts from a fresh one.
#[derive(Clone)]
pub struct Session {
    pub(crate) sandbox: Sandbox,
    pub(crate) spec: Arc<SessionSpec>,
    pub(crate) slot: Arc<tokio::sync::Mutex<SessionSlot>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Runs code in the session's instance (after any execution already running).
    pub fn execute(&self, code: impl Into<String>) -> Execution {
        self.execute_with_id(code, None)
    }

    /// Like [`Self::execute`] with a caller-chosen execution id.
    pub fn execute_with_id(&self, code: impl Into<String>, id: Option<String>) -> Execution {
        self.execute_request(code.into(), self.spec.tools.clone(), id)
    }

    /// Like [`Self::execute`] with this execution's own tools instead of the session's:
    /// globals persist while each caller's request declares the tools its code may call
    /// (the model gateway's code-execution containers).
    pub fn execute_with_tools(&self, code: impl Into<String>, tools: Dispatcher) -> Execution {
        self.execute_request(code.into(), tools, None)
    }

    /// Starts `code` on the session's instance with the session's language, limits,
    /// approver and workspace.
    fn execute_request(&self, code: String, tools: Dispatcher, id: Option<String>) -> Execution {
        let spec = &self.spec;
        let request = ExecutionRequest {
            language: spec.language,
            code,
            tools,
            limits: spec.limits,
            approver: spec.approver.clone(),
            id,
            workspace: spec.workspace.clone(),
        };
        let (handle, job) = Execution::start(request);
        self.sandbox.spawn_in_session(self.slot.clone(), job);
        handle
    }

    /// The session's workspace, if it has one.
    pub fn workspace(&self) -> Option<&Workspace> {
        self.spec.workspace.as_ref()
    }

    /// Whether the session currently holds a live instance.
    pub async fn is_warm(&self) -> bool {
        self.slot.lock().await.live.is_some()
    }

    /// A session of `sandbox` with `spec` whose slot holds `live` (a resumed instance).
    pub(crate) fn with_instance(
        sandbox: Sandbox,
        spec: SessionSpec,
        live: Option<LiveInstance>,
    ) -> Session {
        Session {
            sandbox,
            spec: Arc::new(spec),
            slot: Arc::new(tokio::sync::Mutex::new(SessionSlot {
                live,
                paused: false,
            })),
        }
    }
}

impl Sandbox {
    /// Opens a session: one instance kept across executions, so state survives.
    pub fn session(&self, spec: SessionSpec) -> Session {
        Session::with_instance(self.clone(), spec, None)
    }
}
