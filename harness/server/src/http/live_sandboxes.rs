//! The live side of the HTTP API ([`LiveSandboxes`]): sandboxes with their tools and
//! sessions, running executions with their controls, and the task ("pump") per execution
//! that writes each event to the store before anyone can read it. Pausing a sandbox and
//! bringing a paused one back are `sandbox_pause.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{Decision, ExecutionEvent, Language, Limits};
use cordon_protocol::tool::ToolDeclaration;
use cordon_sandbox::{
    ExecutionControl, ExecutionRequest, Quota, Sandbox, Session, SessionSpec, Workspace,
};
use tokio::sync::watch;

use super::transitions::Transitions;
use crate::error::ApiError;
use crate::mcp_client::Connection;
use crate::objects::Objects;
use crate::periodic::spawn_periodic;
use crate::store::{SandboxRow, Store};
use crate::workspace_budget::{Budget, BudgetError, Capacity, Reservation};
use cordon_core::clock::now_ms;
use cordon_core::ids::fresh_id;

/// Idle time after which a sandbox expires, unless its creator says otherwise.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);
/// Longest idle time a sandbox may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Largest `workspace_bytes` a sandbox may ask for: workspaces live in the server's memory.
pub const MAX_WORKSPACE_BYTES: u64 = 1 << 30;
/// Largest `workspace_files` a sandbox may ask for.
pub const MAX_WORKSPACE_FILES: u64 = 100_000;
/// How often expired sandboxes (and idle ones to pause) are looked for.
const REAP_EVERY: Duration = Duration::from_secs(10);
/// The shortest such period, for a short `--pause-after`.
const REAP_MIN: Duration = Duration::from_millis(200);

/// A sandbox that can run code now.
pub(crate) struct LiveSandbox {
    pub(crate) id: String,
    pub(crate) language: Language,
    pub(super) dispatcher: Dispatcher,
    pub(super) limits: Limits,
    /// The REPL session of a stateful sandbox.
    pub(super) session: Option<Session>,
    /// Its files (`/workspace` in the guest), kept across executions, stateful or not.
    pub(crate) workspace: Workspace,
    pub(super) ttl_ms: u64,
    pub(super) expires_ms: AtomicU64,
    /// Executions started here that have not ended; a busy sandbox never expires and is
    /// never paused.
    pub(super) running: AtomicUsize,
    /// Its place and `workspace_bytes` in the server's budget, given back when it is
    /// paused, or when the last holder drops it (deleted or expired, and its executions
    /// stopped).
    pub(super) reservation: Mutex<Option<Reservation>>,
}

impl LiveSandbox {
    /// A live sandbox, idle, expiring at `expires_ms`.
    pub(super) fn new(
        row: &SandboxRow,
        dispatcher: Dispatcher,
        session: Option<Session>,
        workspace: Workspace,
        expires_ms: u64,
        reservation: Reservation,
    ) -> LiveSandbox {
        LiveSandbox {
            id: row.id.clone(),
            language: row.language,
            dispatcher,
            limits: row.limits,
            session,
            workspace,
            ttl_ms: row.ttl_ms,
            expires_ms: AtomicU64::new(expires_ms),
            running: AtomicUsize::new(0),
            reservation: Mutex::new(Some(reservation)),
        }
    }

    /// Since when it has been idle (Unix ms): its last use, as its expiry says.
    pub(super) fn idle_since_ms(&self) -> u64 {
        self.expires_ms
            .load(Ordering::SeqCst)
            .saturating_sub(self.ttl_ms)
    }
}

/// A running execution.
pub(crate) struct LiveExecution {
    pub(crate) sandbox_id: String,
    pub(crate) control: ExecutionControl,
    /// The last persisted seq. Readers subscribe, read the store, and wait for a change;
    /// the sender is dropped when the execution has ended and its last event is stored.
    persisted: watch::Sender<u64>,
}

#[derive(Default)]
pub(super) struct Live {
    pub(super) sandboxes: HashMap<String, Arc<LiveSandbox>>,
    executions: HashMap<String, Arc<LiveExecution>>,
    /// approval id → execution id, while the approval may still be decided.
    approvals: HashMap<String, String>,
}

/// Shared state of the HTTP API.
pub(crate) struct LiveSandboxes {
    pub(crate) sandbox: Sandbox,
    pub(crate) store: Arc<Store>,
    live: Mutex<Live>,
    /// Connected MCP servers; their tools join every sandbox's declared ones.
    connections: Vec<Connection>,
    /// Caps live sandboxes and the sum of their `workspace_bytes` (`--max-sandboxes`,
    /// `--max-workspace-bytes-total`).
    pub(super) budget: Arc<Budget>,
    /// Where paused sandboxes' state goes (`paused/<id>`).
    pub(super) objects: Objects,
    /// Idle time after which a live sandbox is paused (`--pause-after`; `None`: never).
    pub(super) pause_after: Option<Duration>,
    /// One pause or bring-back at a time per sandbox.
    pub(super) transitions: Transitions,
}

impl LiveSandboxes {
    pub(crate) fn new(
        sandbox: Sandbox,
        store: Arc<Store>,
        connections: Vec<Connection>,
        capacity: Capacity,
        objects: Objects,
        pause_after: Option<Duration>,
    ) -> Arc<LiveSandboxes> {
        Arc::new(LiveSandboxes {
            sandbox,
            store,
            live: Mutex::new(Live::default()),
            connections,
            budget: Budget::new(capacity),
            objects,
            pause_after,
            transitions: Transitions::default(),
        })
    }

    pub(super) fn live(&self) -> MutexGuard<'_, Live> {
        // Every critical section is a few map operations; no invariant spans a panic.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every few seconds, for as long as `self` lives: expires idle sandboxes, pauses
    /// those idle for `pause_after`, and expires paused ones past their ttl.
    pub(crate) fn spawn_reaper(self: &Arc<Self>) {
        let every = self
            .pause_after
            .map_or(REAP_EVERY, |after| (after / 2).clamp(REAP_MIN, REAP_EVERY));
        spawn_periodic(self, every, |sandboxes| async move {
            sandboxes.reap(now_ms()).await;
            sandboxes.pause_idle(now_ms()).await;
            sandboxes.expire_paused(now_ms()).await;
        });
    }

    async fn reap(&self, now: u64) {
        let expired: Vec<String> = {
            let mut live = self.live();
            let ids: Vec<String> = live
                .sandboxes
                .values()
                .filter(|sandbox| {
                    sandbox.running.load(Ordering::SeqCst) == 0
                        && sandbox.expires_ms.load(Ordering::SeqCst) <= now
                })
                .map(|sandbox| sandbox.id.clone())
                .collect();
            for id in &ids {
                live.sandboxes.remove(id);
            }
            ids
        };
        for id in expired {
            if let Err(error) = self
                .store
                .end_sandbox(&id, "expired", "unused for its ttl")
                .await
            {
                eprintln!("cordon serve: could not record that sandbox {id} expired: {error}");
            }
        }
    }

    /// Creates a sandbox; returns its id and expiry (Unix ms).
    pub(crate) async fn create_sandbox(
        &self,
        language: Language,
        tools: Vec<ToolDeclaration>,
        limits: Limits,
        stateful: bool,
        ttl: Duration,
    ) -> Result<(String, u64), ApiError> {
        if limits.workspace_bytes > MAX_WORKSPACE_BYTES
            || limits.workspace_files > MAX_WORKSPACE_FILES
        {
            let max_bytes = self.max_workspace_bytes();
            return Err(ApiError::invalid_request(
                "invalid_request",
                format!(
                    "limits.workspace_bytes may be at most {max_bytes} and \
                     limits.workspace_files at most {MAX_WORKSPACE_FILES} (workspaces are held \
                     in the server's memory)"
                ),
            ));
        }
        let dispatcher = self
            .dispatcher(tools.clone())
            .map_err(|error| ApiError::invalid_request("invalid_tools", error.to_string()))?;
        // Reserved once the request is known to be valid, before the sandbox is built; given
        // back on every way out below (drop).
        let reservation = self
            .budget
            .reserve(limits.workspace_bytes)
            .map_err(refused)?;
        let id = fresh_id("sbx");
        let now = now_ms();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let expires_ms = now.saturating_add(ttl_ms);
        let workspace = Workspace::new(Quota {
            bytes: limits.workspace_bytes,
            files: limits.workspace_files,
        });
        let session = stateful.then(|| {
            self.sandbox.session(
                SessionSpec::new(language, dispatcher.clone())
                    .limits(limits)
                    .workspace(workspace.clone()),
            )
        });
        let row = SandboxRow {
            id: id.clone(),
            language,
            tools,
            limits,
            stateful,
            ttl_ms,
            created_ms: now,
            expires_ms,
            state: "live".to_owned(),
            reason: None,
            paused_bytes: None,
            paused_key: None,
        };
        self.store.insert_sandbox(&row).await?;
        let sandbox = LiveSandbox::new(
            &row,
            dispatcher,
            session,
            workspace,
            expires_ms,
            reservation,
        );
        self.live().sandboxes.insert(id.clone(), Arc::new(sandbox));
        Ok((id, expires_ms))
    }

    /// The dispatcher of a sandbox declaring `tools`, with the connected servers' tools.
    pub(super) fn dispatcher(
        &self,
        tools: Vec<ToolDeclaration>,
    ) -> Result<Dispatcher, cordon_core::RegistryError> {
        let mut registry = ToolRegistry::new(tools)?;
        for connection in &self.connections {
            connection.attach(&mut registry)?;
        }
        Ok(Dispatcher::new(Arc::new(registry)))
    }

    /// Largest `workspace_bytes` one sandbox may ask for on this server.
    fn max_workspace_bytes(&self) -> u64 {
        MAX_WORKSPACE_BYTES.min(self.budget.capacity().bytes)
    }

    /// The live sandbox (a paused one is brought back first), or the error that says why
    /// there is none.
    pub(crate) async fn live_sandbox(&self, id: &str) -> Result<Arc<LiveSandbox>, ApiError> {
        if let Some(sandbox) = self.live().sandboxes.get(id) {
            return Ok(sandbox.clone());
        }
        self.bring_back(id).await
    }

    /// The live sandbox with one more running execution counted (so it is neither paused
    /// nor expired meanwhile); a paused one is brought back first.
    async fn claim(&self, id: &str) -> Result<Arc<LiveSandbox>, ApiError> {
        // The reaper may pause it again between the bring-back and the claim; a few
        // rounds settle that.
        for _ in 0..3 {
            if let Some(sandbox) = self.live().sandboxes.get(id) {
                sandbox.running.fetch_add(1, Ordering::SeqCst);
                return Ok(sandbox.clone());
            }
            self.bring_back(id).await?;
        }
        Err(ApiError::conflict(
            "sandbox_busy",
            format!("sandbox {id} was paused again while being resumed; try again"),
        ))
    }

    /// Current expiry of a live sandbox.
    pub(crate) fn expires_ms(&self, id: &str) -> Option<u64> {
        self.live()
            .sandboxes
            .get(id)
            .map(|sandbox| sandbox.expires_ms.load(Ordering::SeqCst))
    }

    /// Deletes a sandbox: cancels its running executions, frees its instance. Their
    /// histories stay readable.
    pub(crate) async fn delete_sandbox(&self, id: &str) -> Result<(), ApiError> {
        // Not while it is being paused or brought back.
        let _transition = self.transitions.enter(id).await;
        let (removed, executions) = {
            let mut live = self.live();
            let removed = live.sandboxes.remove(id);
            let executions: Vec<ExecutionControl> = live
                .executions
                .values()
                .filter(|execution| execution.sandbox_id == id)
                .map(|execution| execution.control.clone())
                .collect();
            (removed, executions)
        };
        if removed.is_none() {
            // Deleting an expired or interrupted sandbox is fine, a paused one takes its
            // stored state along; an unknown or deleted one is not found.
            match self.store.sandbox(id).await? {
                Some(row) if row.state == "expired" || row.state == "interrupted" => {}
                Some(row) if row.state == "paused" => return self.delete_paused(id).await,
                _ => return Err(ApiError::not_found("sandbox", id)),
            }
        }
        for control in executions {
            control.cancel();
        }
        // Expired rows become deleted too, so a later GET says not found.
        self.store.mark_sandbox_deleted(id).await?;
        Ok(())
    }

    /// Starts an execution in a live sandbox; returns its id once its row exists and its
    /// events are being persisted.
    pub(crate) async fn start_execution(
        self: &Arc<Self>,
        sandbox_id: &str,
        code: String,
    ) -> Result<String, ApiError> {
        let sandbox = self.claim(sandbox_id).await?;
        let id = fresh_id("exec");
        if let Err(error) = self
            .store
            .insert_execution(&id, sandbox_id, sandbox.language, &code)
            .await
        {
            Self::release(&sandbox);
            return Err(error.into());
        }
        let execution = match &sandbox.session {
            Some(session) => session.execute_with_id(code, Some(id.clone())),
            None => self.sandbox.execute(
                ExecutionRequest::new(sandbox.language, code, sandbox.dispatcher.clone())
                    .limits(sandbox.limits)
                    .workspace(sandbox.workspace.clone())
                    .id(id.clone()),
            ),
        };
        let (persisted, _) = watch::channel(0);
        let live = Arc::new(LiveExecution {
            sandbox_id: sandbox_id.to_owned(),
            control: execution.control(),
            persisted,
        });
        sandbox
            .expires_ms
            .store(now_ms().saturating_add(sandbox.ttl_ms), Ordering::SeqCst);
        self.live().executions.insert(id.clone(), live.clone());
        let sandboxes = self.clone();
        let execution_id = id.clone();
        tokio::spawn(async move {
            let (mut events, control, result) = execution.into_parts();
            // The seq advances only when an event is stored, so the log has no holes
            // even if the store fails now and then.
            let mut seq = 0;
            let mut completed = false;
            while let Some(event) = events.recv().await {
                if sandboxes
                    .persist(&execution_id, &live, &control, seq + 1, &event)
                    .await
                {
                    seq += 1;
                    if matches!(event, ExecutionEvent::Completed(_)) {
                        completed = true;
                        break;
                    }
                }
            }
            if !completed {
                // The event stream ended without a stored `execution.completed`: log the
                // result so readers still see an end.
                let event = ExecutionEvent::Completed(result.await);
                sandboxes
                    .persist(&execution_id, &live, &control, seq + 1, &event)
                    .await;
            }
            sandboxes.finish_execution(&execution_id, &sandbox);
        });
        Ok(id)
    }

    /// Writes one event, then tells readers. Returns whether it was stored.
    async fn persist(
        &self,
        execution_id: &str,
        live: &LiveExecution,
        control: &ExecutionControl,
        seq: u64,
        event: &ExecutionEvent,
    ) -> bool {
        if let ExecutionEvent::ApprovalRequired { approval_id, .. } = event {
            // Registered before the event is visible, so a fast decision finds it.
            self.live()
                .approvals
                .insert(approval_id.clone(), execution_id.to_owned());
        }
        if let Err(error) = self.store.append_event(execution_id, seq, event).await {
            // An event that cannot be stored cannot be shown: stop the execution rather
            // than let clients see a log with a hole in it.
            eprintln!("cordon serve: could not store event {seq} of {execution_id}: {error}");
            control.cancel();
            return false;
        }
        live.persisted.send_replace(seq);
        true
    }

    fn finish_execution(&self, execution_id: &str, sandbox: &LiveSandbox) {
        let mut live = self.live();
        live.executions.remove(execution_id);
        live.approvals
            .retain(|_, execution| execution != execution_id);
        Self::release(sandbox);
    }

    /// One running execution fewer; its end counts as a use.
    fn release(sandbox: &LiveSandbox) {
        sandbox.running.fetch_sub(1, Ordering::SeqCst);
        sandbox
            .expires_ms
            .store(now_ms().saturating_add(sandbox.ttl_ms), Ordering::SeqCst);
    }

    /// The running execution, if it is running.
    pub(crate) fn live_execution(&self, id: &str) -> Option<Arc<LiveExecution>> {
        self.live().executions.get(id).cloned()
    }

    /// A receiver that changes whenever an event of `id` is stored; `None` when the
    /// execution is not running (everything it will ever log is in the store).
    pub(crate) fn subscribe(&self, id: &str) -> Option<watch::Receiver<u64>> {
        self.live()
            .executions
            .get(id)
            .map(|execution| execution.persisted.subscribe())
    }

    /// Decides a pending approval.
    pub(crate) async fn decide(
        &self,
        approval_id: &str,
        decision: Decision,
    ) -> Result<String, ApiError> {
        let execution_id = self.live().approvals.get(approval_id).cloned();
        let Some(execution_id) = execution_id else {
            return Err(match self.store.approval(approval_id).await? {
                Some(row) if row.status == "pending" || row.status == "expired" => {
                    ApiError::conflict(
                        "approval_expired",
                        format!(
                            "approval {approval_id} can no longer be decided: its execution {} has ended",
                            row.execution_id
                        ),
                    )
                }
                Some(row) => ApiError::conflict(
                    "approval_decided",
                    format!(
                        "approval {approval_id} was already decided ({})",
                        row.status
                    ),
                ),
                None => ApiError::not_found("approval", approval_id),
            });
        };
        let Some(execution) = self.live_execution(&execution_id) else {
            return Err(ApiError::conflict(
                "approval_expired",
                format!("approval {approval_id} can no longer be decided: its execution has ended"),
            ));
        };
        // The dispatcher parks the request right after emitting `approval.required`; a
        // client faster than that gets a few yields' grace.
        let mut attempts = 0;
        loop {
            match execution.control.decide(approval_id, decision) {
                Ok(()) => break,
                Err(_) if attempts < 20 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(_) => {
                    return Err(match self.store.approval(approval_id).await? {
                        Some(row) if row.status != "pending" => ApiError::conflict(
                            "approval_decided",
                            format!(
                                "approval {approval_id} was already decided ({})",
                                row.status
                            ),
                        ),
                        _ => ApiError::conflict(
                            "approval_expired",
                            format!(
                                "approval {approval_id} is no longer waiting (it timed out or its call was cancelled)"
                            ),
                        ),
                    });
                }
            }
        }
        let status = match decision {
            Decision::Approve => "approved",
            Decision::Deny => "denied",
        };
        self.store.decide_approval(approval_id, status).await?;
        self.live().approvals.remove(approval_id);
        Ok(execution_id)
    }
}

/// The answer to a create (or resume) the budget refuses: 422 for a quota no server state could fit,
/// 503 while the live sandboxes hold the room, each saying how to make room.
pub(super) fn refused(error: BudgetError) -> ApiError {
    use axum::http::StatusCode;
    let make_room = "delete a sandbox you no longer need (DELETE /v1/sandboxes/{id}), pause \
                     one (POST /v1/sandboxes/{id}/pause) or wait for an idle one to be paused \
                     or expire";
    match error {
        BudgetError::NeverFits { asked, total } => ApiError::invalid_request(
            "invalid_request",
            format!(
                "limits.workspace_bytes is {asked}, more than this server allows all live \
                 sandboxes together ({total} bytes, --max-workspace-bytes-total); ask for less"
            ),
        ),
        BudgetError::TooMany { max } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_sandboxes",
            format!(
                "this server holds at most {max} live sandboxes (--max-sandboxes); {make_room}, \
                 or restart the server with a larger --max-sandboxes"
            ),
        ),
        BudgetError::Exhausted {
            asked,
            reserved,
            total,
        } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "workspace_budget_exhausted",
            format!(
                "this sandbox asks for {asked} workspace bytes, but the live sandboxes already \
                 reserve {reserved} of the {total} this server allows in all \
                 (--max-workspace-bytes-total); ask for a smaller limits.workspace_bytes, \
                 {make_room}, or restart the server with a larger --max-workspace-bytes-total"
            ),
        ),
    }
}
