//! Where executions wait for someone else: client tool results ([`ClientCallBroker`]) and
//! approval decisions ([`Approver`], [`ApprovalBroker`], [`ApproveListed`]).
//!
//! Both brokers are shared between the execution (which parks) and whoever answers (the
//! caller of the library, an HTTP handler, a TTY prompt), so they are cheap `Arc` clones.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cordon_protocol::execution::{ClientToolResult, Decision};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

/// Answered or expired call ids remembered so a late or repeated submission gets a precise
/// error instead of "unknown call". Bounded so a long-lived broker does not grow forever.
const REMEMBERED_FINISHED: usize = 4096;

/// Locks a mutex whose data stays consistent even if a holder panicked: every critical
/// section here is a few map operations with no invariant spanning a panic point.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Pending client tool calls, waiting for results posted by the caller.
///
/// The dispatcher [`register`](Self::register)s each client call and awaits the receiver;
/// the caller [`submit`](Self::submit)s results in any grouping and order.
#[derive(Clone, Default)]
pub struct ClientCallBroker {
    state: Arc<Mutex<BrokerState>>,
}

#[derive(Default)]
struct BrokerState {
    /// Waiting calls, in registration order.
    pending: Vec<(String, oneshot::Sender<ClientToolResult>)>,
    /// Recently finished call ids and how they finished.
    finished: HashMap<String, Finished>,
    finished_order: VecDeque<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    Answered,
    Expired,
}

impl BrokerState {
    fn position(&self, call_id: &str) -> Option<usize> {
        self.pending.iter().position(|(id, _)| id == call_id)
    }

    fn remember(&mut self, call_id: String, how: Finished) {
        if self.finished.insert(call_id.clone(), how).is_none() {
            self.finished_order.push_back(call_id);
        }
        while self.finished_order.len() > REMEMBERED_FINISHED {
            if let Some(old) = self.finished_order.pop_front() {
                self.finished.remove(&old);
            }
        }
    }
}

impl fmt::Debug for ClientCallBroker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCallBroker")
            .field("pending", &self.pending())
            .finish()
    }
}

/// A rejected [`ClientCallBroker::submit`]; nothing of that request was delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// No call with this id was ever pending here.
    #[error("unknown call id {call_id:?}: no pending client tool call has this id")]
    UnknownCall {
        /// The id as submitted.
        call_id: String,
    },
    /// The same id appears twice in one submission.
    #[error("call id {call_id:?} appears more than once in this submission")]
    Duplicate {
        /// The repeated id.
        call_id: String,
    },
    /// The call already received a result.
    #[error("call {call_id:?} already has a result; each call is answered once")]
    AlreadyAnswered {
        /// The id as submitted.
        call_id: String,
    },
    /// The call stopped waiting (its deadline passed or its execution ended).
    #[error("call {call_id:?} is no longer waiting: its deadline passed or its execution ended")]
    Expired {
        /// The id as submitted.
        call_id: String,
    },
}

impl SubmitError {
    /// The call id the error is about.
    pub fn call_id(&self) -> &str {
        match self {
            SubmitError::UnknownCall { call_id }
            | SubmitError::Duplicate { call_id }
            | SubmitError::AlreadyAnswered { call_id }
            | SubmitError::Expired { call_id } => call_id,
        }
    }
}

impl ClientCallBroker {
    /// An empty broker.
    pub fn new() -> Self {
        ClientCallBroker::default()
    }

    /// Register a pending client call; the receiver resolves when a result is submitted.
    ///
    /// Registering an id that is already pending replaces it; the earlier receiver then
    /// sees its sender dropped.
    pub fn register(&self, call_id: &str) -> oneshot::Receiver<ClientToolResult> {
        let (tx, rx) = oneshot::channel();
        let mut state = lock(&self.state);
        if let Some(at) = state.position(call_id) {
            state.pending.remove(at);
        }
        state.finished.remove(call_id);
        state.pending.push((call_id.to_owned(), tx));
        rx
    }

    /// Drops a pending entry (its deadline passed, or its execution ended). Later
    /// submissions for it fail with [`SubmitError::Expired`]. No-op when not pending.
    pub fn cancel(&self, call_id: &str) {
        let mut state = lock(&self.state);
        if let Some(at) = state.position(call_id) {
            state.pending.remove(at);
            state.remember(call_id.to_owned(), Finished::Expired);
        }
    }

    /// Ids still waiting, in registration order.
    pub fn pending(&self) -> Vec<String> {
        lock(&self.state)
            .pending
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Submit results (any subset, in any number of requests).
    ///
    /// The whole request is validated first: an unknown id, an id repeated within the
    /// request, or an id already answered (or expired) rejects it, and then nothing is
    /// delivered.
    pub fn submit(&self, results: Vec<ClientToolResult>) -> Result<(), SubmitError> {
        let mut state = lock(&self.state);
        let mut seen = HashSet::with_capacity(results.len());
        for result in &results {
            let call_id = &result.call_id;
            if !seen.insert(call_id.as_str()) {
                return Err(SubmitError::Duplicate {
                    call_id: call_id.clone(),
                });
            }
            if state.position(call_id).is_none() {
                let call_id = call_id.clone();
                return Err(match state.finished.get(&call_id) {
                    Some(Finished::Answered) => SubmitError::AlreadyAnswered { call_id },
                    Some(Finished::Expired) => SubmitError::Expired { call_id },
                    None => SubmitError::UnknownCall { call_id },
                });
            }
        }
        for result in results {
            let Some(at) = state.position(&result.call_id) else {
                continue;
            };
            let (call_id, tx) = state.pending.remove(at);
            // A closed receiver means the execution went away after the check above; the
            // result has nowhere to go, which is what the caller would get a moment later.
            let _ = tx.send(result);
            state.remember(call_id, Finished::Answered);
        }
        Ok(())
    }
}

/// A call with policy `ask`, waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Id to decide on (also on the `approval.required` event).
    pub approval_id: String,
    /// The call waiting for it.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// The call's input (already schema-checked).
    pub input: Value,
    /// Why approval is needed, for a human.
    pub reason: String,
}

/// Decides `ask` calls. Implementations may wait (a human, a remote caller); the
/// dispatcher counts that wait as suspended time.
pub trait Approver: Send + Sync + fmt::Debug {
    /// Approve or deny one call.
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision>;
}

/// A pending approval id that [`ApprovalBroker::resolve`] did not find.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no pending approval with id {approval_id:?}: it was already decided, timed out, or never existed"
)]
#[non_exhaustive]
pub struct UnknownApproval {
    /// The id as given.
    pub approval_id: String,
}

/// An [`Approver`] that parks each request until someone calls [`resolve`](Self::resolve)
/// (an HTTP endpoint, a UI). A request nobody decides within the timeout is denied.
#[derive(Clone, Debug)]
pub struct ApprovalBroker {
    inner: Arc<ApprovalInner>,
}

#[derive(Debug)]
struct ApprovalInner {
    timeout: Duration,
    parked: Mutex<Vec<(ApprovalRequest, oneshot::Sender<Decision>)>>,
}

impl Default for ApprovalBroker {
    /// Denies after five minutes, like the default client-tool deadline.
    fn default() -> Self {
        ApprovalBroker::new(Duration::from_secs(300))
    }
}

impl ApprovalBroker {
    /// A broker whose parked requests are denied after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        ApprovalBroker {
            inner: Arc::new(ApprovalInner {
                timeout,
                parked: Mutex::new(Vec::new()),
            }),
        }
    }

    /// How long a request waits before it is denied.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Requests waiting for a decision, oldest first.
    pub fn pending(&self) -> Vec<ApprovalRequest> {
        lock(&self.inner.parked)
            .iter()
            .map(|(request, _)| request.clone())
            .collect()
    }

    /// Decides a parked request.
    pub fn resolve(&self, approval_id: &str, decision: Decision) -> Result<(), UnknownApproval> {
        let mut parked = lock(&self.inner.parked);
        let at = parked
            .iter()
            .position(|(request, _)| request.approval_id == approval_id)
            .ok_or_else(|| UnknownApproval {
                approval_id: approval_id.to_owned(),
            })?;
        let (_, reply) = parked.remove(at);
        // The waiter may have timed out in the same instant; it has already denied.
        let _ = reply.send(decision);
        Ok(())
    }

    fn unpark(&self, approval_id: &str) {
        lock(&self.inner.parked).retain(|(request, _)| request.approval_id != approval_id);
    }
}

/// Removes a parked request when its waiter stops waiting for any reason (timeout, or the
/// execution being dropped), so `pending()` never lists requests nobody waits for.
struct Unpark<'a> {
    broker: &'a ApprovalBroker,
    approval_id: &'a str,
}

impl Drop for Unpark<'_> {
    fn drop(&mut self) {
        self.broker.unpark(self.approval_id);
    }
}

impl Approver for ApprovalBroker {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            lock(&self.inner.parked).push((request.clone(), tx));
            let _unpark = Unpark {
                broker: self,
                approval_id: &request.approval_id,
            };
            match tokio::time::timeout(self.inner.timeout, rx).await {
                Ok(Ok(decision)) => decision,
                // Timed out, or the broker entry vanished: deny wins when nobody decided.
                Ok(Err(_)) | Err(_) => Decision::Deny,
            }
        })
    }
}

/// An [`Approver`] that approves tools named in a set and denies the rest, without waiting
/// (`cordon run --approve NAME` when there is no TTY to ask on).
#[derive(Debug, Clone, Default)]
pub struct ApproveListed {
    names: HashSet<String>,
}

impl ApproveListed {
    /// Approves calls to exactly these tools.
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ApproveListed {
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether calls to `tool` are approved.
    pub fn approves(&self, tool: &str) -> bool {
        self.names.contains(tool)
    }
}

impl Approver for ApproveListed {
    fn decide<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        let decision = if self.approves(&request.tool) {
            Decision::Approve
        } else {
            Decision::Deny
        };
        Box::pin(std::future::ready(decision))
    }
}
