//! One execution: what to run ([`ExecutionRequest`]), its handle ([`Execution`]) with the
//! controller that answers it from anywhere ([`ExecutionControl`]), and the [`Job`] the
//! driver runs.

use std::sync::Arc;
use std::time::Duration;

use cordon_core::broker::{
    ApprovalBroker, Approver, ClientCallBroker, SubmitError, UnknownApproval,
};
use cordon_core::dispatch::Dispatcher;
use cordon_core::ids::fresh_id;
use cordon_protocol::execution::{
    ClientToolResult, Decision, ExecutionEvent, ExecutionResult, Language, Limits,
};
use tokio::sync::{mpsc, oneshot};

use crate::ending::internal_failure;
use crate::workspace::Workspace;

/// What to run and with which tools and limits.
#[derive(Clone)]
#[non_exhaustive]
pub struct ExecutionRequest {
    /// Guest language.
    pub language: Language,
    /// Source code.
    pub code: String,
    /// The tools this code may call.
    pub tools: Dispatcher,
    /// Limits for this execution.
    pub limits: Limits,
    /// Who decides `ask` calls; `None` parks them for [`Execution::decide`].
    pub approver: Option<Arc<dyn Approver>>,
    /// Id to use (e.g. assigned by a store); a fresh one when `None`.
    pub id: Option<String>,
    /// The files the guest sees at `/workspace`; none when `None`. Its quotas are set
    /// from `limits` when the execution starts.
    pub workspace: Option<Workspace>,
}

impl std::fmt::Debug for ExecutionRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionRequest")
            .field("language", &self.language)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ExecutionRequest {
    /// A request with default limits.
    pub fn new(language: Language, code: impl Into<String>, tools: Dispatcher) -> Self {
        ExecutionRequest {
            language,
            code: code.into(),
            tools,
            limits: Limits::default(),
            approver: None,
            id: None,
            workspace: None,
        }
    }

    crate::spec_setters::limits_and_workspace_setters!("execution");

    /// Sets who decides `ask` calls.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Sets the execution id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// The handle of a running execution.
///
/// Events arrive in order and end with `execution.completed`. While the execution is
/// suspended on client tools, post their results with [`Execution::submit_tool_results`].
pub struct Execution {
    id: String,
    events: mpsc::UnboundedReceiver<ExecutionEvent>,
    control: ExecutionControl,
    done: oneshot::Receiver<ExecutionResult>,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Controls an execution from anywhere (a server's request handlers): results, approvals,
/// cancellation. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ExecutionControl {
    pub(crate) client_calls: ClientCallBroker,
    /// Parks `ask` calls when the request had no approver of its own (else stays empty).
    approvals: ApprovalBroker,
    pub(crate) cancel: Arc<tokio::sync::Notify>,
}

impl ExecutionControl {
    /// Delivers results for pending client calls (all at once or over several calls).
    /// Unknown, duplicate or already-answered ids reject the whole request.
    pub fn submit_tool_results(&self, results: Vec<ClientToolResult>) -> Result<(), SubmitError> {
        self.client_calls.submit(results)
    }

    /// Ids of client calls waiting for results.
    pub fn pending_tool_calls(&self) -> Vec<String> {
        self.client_calls.pending()
    }

    /// Decides a parked `ask` approval (only when the request had no approver of its own).
    pub fn decide(&self, approval_id: &str, decision: Decision) -> Result<(), UnknownApproval> {
        self.approvals.resolve(approval_id, decision)
    }

    /// Stops the execution: at the next epoch tick if the guest runs, at once if it waits.
    pub fn cancel(&self) {
        // A stored permit if the driver is not waiting yet: the cancel is never lost.
        self.cancel.notify_one();
    }
}

/// What the driver needs to run an execution.
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) request: ExecutionRequest,
    pub(crate) events: cordon_core::dispatch::EventSink,
    pub(crate) control: ExecutionControl,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) done: oneshot::Sender<ExecutionResult>,
}

impl Execution {
    /// A handle, and the job the driver runs for it.
    pub(crate) fn start(request: ExecutionRequest) -> (Execution, Job) {
        let id = request.id.clone().unwrap_or_else(|| fresh_id("exec"));
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        let approvals =
            ApprovalBroker::new(Duration::from_millis(request.limits.client_tool_timeout_ms));
        let approver: Arc<dyn Approver> = match &request.approver {
            Some(approver) => approver.clone(),
            None => Arc::new(approvals.clone()),
        };
        let control = ExecutionControl {
            client_calls: ClientCallBroker::default(),
            approvals,
            cancel: Arc::new(tokio::sync::Notify::new()),
        };
        let job = Job {
            id: id.clone(),
            request,
            events: cordon_core::dispatch::EventSink::new(tx),
            control: control.clone(),
            approver,
            done: done_tx,
        };
        (
            Execution {
                id,
                events: rx,
                control,
                done: done_rx,
            },
            job,
        )
    }

    /// The execution's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The next event; `None` after `execution.completed`.
    pub async fn next_event(&mut self) -> Option<ExecutionEvent> {
        self.events.recv().await
    }

    /// A cloneable controller for this execution.
    pub fn control(&self) -> ExecutionControl {
        self.control.clone()
    }

    /// See [`ExecutionControl::submit_tool_results`].
    pub fn submit_tool_results(&self, results: Vec<ClientToolResult>) -> Result<(), SubmitError> {
        self.control.submit_tool_results(results)
    }

    /// See [`ExecutionControl::decide`].
    pub fn decide(&self, approval_id: &str, decision: Decision) -> Result<(), UnknownApproval> {
        self.control.decide(approval_id, decision)
    }

    /// See [`ExecutionControl::cancel`].
    pub fn cancel(&self) {
        self.control.cancel();
    }

    /// Waits for the end, discarding events not yet read.
    pub async fn wait(mut self) -> ExecutionResult {
        self.events.close();
        match self.done.await {
            Ok(result) => result,
            Err(_) => internal_failure("the execution task ended without a result"),
        }
    }

    /// Splits into the event stream and the final result.
    pub fn into_parts(
        self,
    ) -> (
        mpsc::UnboundedReceiver<ExecutionEvent>,
        ExecutionControl,
        ResultFuture,
    ) {
        (self.events, self.control, ResultFuture { done: self.done })
    }
}

/// Resolves to an execution's result.
#[derive(Debug)]
pub struct ResultFuture {
    done: oneshot::Receiver<ExecutionResult>,
}

impl std::future::Future for ResultFuture {
    type Output = ExecutionResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.done).poll(cx).map(|result| {
            result.unwrap_or_else(|_| internal_failure("the execution task ended without a result"))
        })
    }
}
