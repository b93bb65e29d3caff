//! The HTTP API's computer sessions: the live ones with their idle TTL, a store row for
//! every session, step and approval, and one trajectory directory per session next to the
//! database (`<trajectories>/<id>/`: `session.json`, `steps.jsonl`, `step-NNNN.png`; the
//! layout `cordon replay DIR` reads).
//!
//! Every step is persisted by a task of its own, so a client that hangs up mid-step
//! neither cuts the step in half nor loses its record.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::http::StatusCode;
use cordon_protocol::execution::Decision;
use serde_json::{Value, json};

use crate::api::{
    ComputerActions, ComputerApproval, ComputerCreated, ComputerInfo, ComputerState, ComputerStep,
    ComputerTrajectory, CreateComputer, SizeBody, StepStatus, TrajectoryStep,
};
use crate::computer_pool::{
    ComputerError, ComputerPool, Setup, SharedComputer, Stepped, chromium_pid_key, decode_actions,
    parse_format, reap_orphaned_chromium,
};
use crate::error::ApiError;
use crate::periodic::spawn_periodic;
use crate::store::{ComputerRow, ComputerStepRow, Store, StoreError};
use cordon_core::clock::now_ms;
use cordon_core::ids::fresh_id;
use cordon_protocol::time::rfc3339;

/// How often idle sessions are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

struct LiveEntry {
    computer: SharedComputer,
    ttl_ms: u64,
    expires_ms: AtomicU64,
    /// Requests on it in flight; a busy session never expires.
    busy: AtomicUsize,
}

/// Counts a request on a session while it lives (also when its future is dropped).
struct Busy(Arc<LiveEntry>);

impl Busy {
    fn new(entry: Arc<LiveEntry>) -> Busy {
        entry.busy.fetch_add(1, Ordering::SeqCst);
        Busy(entry)
    }
}

/// A session being opened, counted in [`Live::opening`] until this is dropped (also when
/// the task opening it panics).
struct Opening(Arc<ComputerSessions>);

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.live().opening -= 1;
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::SeqCst);
        self.0
            .expires_ms
            .store(now_ms().saturating_add(self.0.ttl_ms), Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Live {
    computers: HashMap<String, Arc<LiveEntry>>,
    /// approval id → computer id, while the approval is pending.
    approvals: HashMap<String, String>,
    /// Sessions being opened (they count toward the cap).
    opening: usize,
}

/// Computer sessions of the HTTP API (`/v1/computers`).
pub(crate) struct ComputerSessions {
    /// Where this server records its Chromium's pid (see [`chromium_pid_key`]).
    chromium_pid_key: String,
    pool: ComputerPool,
    store: Arc<Store>,
    trajectories: PathBuf,
    max_live: usize,
    live: Mutex<Live>,
}

impl ComputerSessions {
    /// The browser pool (shared with the benchmark environments).
    pub(crate) fn pool(&self) -> &ComputerPool {
        &self.pool
    }

    /// Whether session `id` is open in this process.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.live().computers.contains_key(id)
    }
}

impl ComputerError {
    /// The HTTP answer for this error.
    pub(crate) fn to_api(&self) -> ApiError {
        let message = self.to_string();
        match self {
            ComputerError::Invalid(_) => ApiError::invalid_request("invalid_request", message),
            ComputerError::Blocked(_) => ApiError::invalid_request("url_blocked", message),
            ComputerError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "browser_unavailable",
                message,
            ),
            ComputerError::Lost(_) => ApiError::gone("computer_lost", message),
            ComputerError::Closed(_) => ApiError::gone("computer_closed", message),
            ComputerError::Browser(_) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "browser_error", message)
            }
            ComputerError::Trajectory(_) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "trajectory_error",
                message,
            ),
            ComputerError::Pending(_) => ApiError::conflict("approval_pending", message),
            ComputerError::NoSuchApproval(_) => ApiError::conflict("approval_decided", message),
        }
    }
}

fn size(value: &Value) -> SizeBody {
    serde_json::from_value(value.clone()).unwrap_or(SizeBody {
        width: 0,
        height: 0,
    })
}

fn state(name: &str) -> ComputerState {
    match name {
        "live" => ComputerState::Live,
        "closed" => ComputerState::Closed,
        "interrupted" => ComputerState::Interrupted,
        _ => ComputerState::Expired,
    }
}

fn status_name(status: StepStatus) -> &'static str {
    match status {
        StepStatus::Ok => "ok",
        StepStatus::Error => "error",
        StepStatus::ApprovalRequired => "approval_required",
        StepStatus::Denied => "denied",
    }
}

impl ComputerSessions {
    pub(crate) fn new(
        pool: ComputerPool,
        store: Arc<Store>,
        trajectories: PathBuf,
        max_live: usize,
        replica_address: Option<&str>,
    ) -> Arc<ComputerSessions> {
        Arc::new(ComputerSessions {
            chromium_pid_key: chromium_pid_key(replica_address),
            pool,
            store,
            trajectories,
            max_live,
            live: Mutex::default(),
        })
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        // Every critical section is a few map operations; no invariant spans a panic.
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Kills the Chromium a previous server process left running when it was killed, if
    /// there is one. Call before serving. A replica also reads the key servers used before
    /// pids were kept per replica (a process is killed only if it is an orphaned Chromium
    /// of Cordon's, whichever key named it).
    pub(crate) async fn reap_orphans(&self) -> Result<(), StoreError> {
        let legacy = chromium_pid_key(None);
        let mut keys = vec![self.chromium_pid_key.as_str()];
        if self.chromium_pid_key != legacy {
            keys.push(&legacy);
        }
        for key in keys {
            let Some(pid) = self.store.meta(key).await? else {
                continue;
            };
            if let Ok(pid) = pid.parse::<u32>()
                && reap_orphaned_chromium(pid)
            {
                eprintln!(
                    "cordon: stopped Chromium {pid}, left running by a server that was killed"
                );
            }
            self.store.set_meta(key, None).await?;
        }
        Ok(())
    }

    /// Closes idle sessions every few seconds, for as long as `self` lives.
    pub(crate) fn spawn_reaper(self: &Arc<Self>) {
        spawn_periodic(self, REAP_EVERY, |sessions| async move {
            sessions.reap(now_ms()).await
        });
    }

    async fn reap(&self, now: u64) {
        let idle: Vec<(String, Arc<LiveEntry>)> = {
            let mut live = self.live();
            let ids: Vec<String> = live
                .computers
                .iter()
                .filter(|(_, entry)| {
                    entry.busy.load(Ordering::SeqCst) == 0
                        && entry.expires_ms.load(Ordering::SeqCst) <= now
                })
                .map(|(id, _)| id.clone())
                .collect();
            let removed: Vec<_> = ids
                .into_iter()
                .filter_map(|id| live.computers.remove(&id).map(|entry| (id, entry)))
                .collect();
            live.approvals
                .retain(|_, computer| !removed.iter().any(|(id, _)| id == computer));
            removed
        };
        for (id, entry) in idle {
            let reason = format!(
                "closed after {} s without a request (its ttl); open a new one",
                entry.ttl_ms / 1000
            );
            if let Err(error) = self.store.end_computer(&id, "expired", &reason).await {
                eprintln!("cordon serve: could not record that computer {id} expired: {error}");
            }
            self.pool.close(&entry.computer, &reason).await;
        }
    }

    /// Opens a session and takes its first screenshot (on a task of its own, so a client
    /// that hangs up does not leave a session half-registered).
    pub(crate) async fn create(
        self: &Arc<Self>,
        body: CreateComputer,
    ) -> Result<ComputerCreated, ApiError> {
        let setup = Setup::parse(&body).map_err(|error| error.to_api())?;
        {
            let mut live = self.live();
            if live.computers.len() + live.opening >= self.max_live {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too_many_computers",
                    format!(
                        "this server runs at most {} computer sessions at once \
                         (--max-computers); close one (DELETE /v1/computers/{{id}}) first",
                        self.max_live
                    ),
                ));
            }
            live.opening += 1;
        }
        let opening = Opening(self.clone());
        let task = tokio::spawn(async move {
            let opened = opening.0.open(setup).await;
            drop(opening);
            opened
        });
        task.await.map_err(|error| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "computer_error",
                format!("opening the session failed: {error}"),
            )
        })?
    }

    async fn open(&self, setup: Setup) -> Result<ComputerCreated, ApiError> {
        let id = fresh_id("cmp");
        let dir = self.trajectories.join(&id);
        let (computer, first) = match self.pool.open(id.clone(), &setup, Some(dir.clone())).await {
            Ok(opened) => opened,
            Err(error) => {
                let _removed = std::fs::remove_dir_all(&dir);
                return Err(error.to_api());
            }
        };
        let (display, viewport) = {
            let live = computer.lock().await;
            (live.display, live.viewport)
        };
        let display = SizeBody {
            width: display.width,
            height: display.height,
        };
        let viewport = SizeBody {
            width: viewport.width,
            height: viewport.height,
        };
        let mut recorded = setup.session_json();
        recorded["display_size"] = json!(display);
        let now = now_ms();
        let ttl_ms = u64::try_from(setup.ttl.as_millis()).unwrap_or(u64::MAX);
        let expires_ms = now.saturating_add(ttl_ms);
        let row = ComputerRow {
            id: id.clone(),
            setup: recorded,
            trajectory: dir.display().to_string(),
            ttl_ms,
            created_ms: now,
            expires_ms,
            state: "live".to_owned(),
            reason: None,
            finished_ms: None,
            current_url: first.step.current_url.clone(),
            steps: 0,
            pending: None,
        };
        let stored = async {
            self.record_chromium_pid().await?;
            self.store.insert_computer(&row).await?;
            self.persist(&id, &first).await
        }
        .await;
        if let Err(error) = stored {
            // Nothing of it may outlive the failed request: its browser context, its row
            // (else `live` until the next restart) and its trajectory.
            self.pool
                .close(&computer, "its record could not be stored")
                .await;
            if let Err(error) = self.store.delete_computer(&id).await {
                eprintln!("cordon serve: could not remove the record of computer {id}: {error}");
            }
            let _removed = std::fs::remove_dir_all(&dir);
            return Err(error.into());
        }
        let entry = Arc::new(LiveEntry {
            computer,
            ttl_ms,
            expires_ms: AtomicU64::new(expires_ms),
            busy: AtomicUsize::new(0),
        });
        {
            let mut live = self.live();
            if let Some(approval) = &first.step.pending_approval {
                live.approvals
                    .insert(approval.approval_id.clone(), id.clone());
            }
            live.computers.insert(id.clone(), entry);
        }
        Ok(ComputerCreated {
            id,
            expires_at: rfc3339(expires_ms),
            display,
            viewport,
            current_url: first.step.current_url,
            screenshot: first.step.screenshot,
        })
    }

    /// Records the pid of the running Chromium, read by the next server if this one is
    /// killed (see [`Self::reap_orphans`]).
    async fn record_chromium_pid(&self) -> Result<(), StoreError> {
        match self.pool.chromium_pid() {
            Some(pid) => {
                self.store
                    .set_meta(&self.chromium_pid_key, Some(&pid.to_string()))
                    .await
            }
            None => Ok(()),
        }
    }

    /// Stores a step with what it changes.
    async fn persist(&self, id: &str, stepped: &Stepped) -> Result<(), StoreError> {
        let Some(record) = &stepped.record else {
            return Ok(());
        };
        let step = &stepped.step;
        let resolves = step.resolves.clone().map(|approval| {
            let how = if step.status == StepStatus::Denied {
                "denied"
            } else {
                "approved"
            };
            (approval, how.to_owned())
        });
        self.store
            .append_computer_step(
                id,
                &ComputerStepRow {
                    step: record.step,
                    status: status_name(step.status).to_owned(),
                    data: serde_json::to_value(record)?,
                    screenshot: stepped.screenshot_file.clone(),
                    current_url: step.current_url.clone(),
                    pending: match &step.pending_approval {
                        Some(approval) => Some(serde_json::to_value(approval)?),
                        None => None,
                    },
                    asks: step
                        .pending_approval
                        .as_ref()
                        .map(|approval| approval.approval_id.clone()),
                    resolves,
                },
            )
            .await
    }

    /// The live session, counted busy (taken under the lock the reaper holds, so it cannot
    /// expire between the lookup and the request), or the error that says why there is none.
    async fn entry(&self, id: &str) -> Result<Busy, ApiError> {
        if let Some(entry) = self.live().computers.get(id) {
            return Ok(Busy::new(entry.clone()));
        }
        Err(match self.store.computer(id).await? {
            Some(row) if row.state == "closed" => ApiError::gone(
                "computer_closed",
                format!("computer {id} was closed; open a new one (POST /v1/computers)"),
            ),
            Some(row) if row.state == "interrupted" => ApiError::gone(
                "computer_interrupted",
                format!(
                    "computer {id} was interrupted: {}",
                    row.reason.as_deref().unwrap_or("unknown reason")
                ),
            ),
            Some(row) => ApiError::gone(
                "computer_expired",
                format!(
                    "computer {id} has expired: {}",
                    row.reason.as_deref().unwrap_or("unknown reason")
                ),
            ),
            None => ApiError::not_found("computer", id),
        })
    }

    /// Runs a step (or a decision) on its own task and persists it there.
    async fn run(
        self: &Arc<Self>,
        id: &str,
        busy: Busy,
        work: Work,
    ) -> Result<ComputerStep, ApiError> {
        let sessions = self.clone();
        let id = id.to_owned();
        let task = tokio::spawn(async move {
            let (outcome, deciding) = match work {
                Work::Step(call, raw) => {
                    (sessions.pool.step(&busy.0.computer, call, raw).await, None)
                }
                Work::Decide(approval, approve) => {
                    let outcome = sessions
                        .pool
                        .decide(&busy.0.computer, approval.clone(), approve)
                        .await;
                    (outcome, Some(approval))
                }
            };
            let stepped = match outcome {
                Ok(stepped) => stepped,
                Err(error) => {
                    match (&error, deciding) {
                        (ComputerError::Lost(_) | ComputerError::Closed(_), _) => {
                            sessions.forget(&id, "expired", &error.to_string()).await;
                        }
                        (ComputerError::NoSuchApproval(_) | ComputerError::Pending(_), _)
                        | (_, None) => {}
                        (_, Some(approval)) => {
                            // The decision was taken but its step failed: the approval is
                            // spent (the session takes new steps), so it must not stay
                            // pending in the map or the store.
                            sessions.live().approvals.remove(&approval);
                            if let Err(error) = sessions
                                .store
                                .expire_computer_approval(&id, &approval)
                                .await
                            {
                                eprintln!(
                                    "cordon serve: could not record that approval {approval} \
                                     of computer {id} is spent: {error}"
                                );
                            }
                        }
                    }
                    return Err(error.to_api());
                }
            };
            {
                let mut live = sessions.live();
                if let Some(resolved) = &stepped.step.resolves {
                    live.approvals.remove(resolved);
                }
                // A session closed while this step ran takes no decisions: its approval
                // is recorded (and expires with it), but not routed.
                if let Some(approval) = &stepped.step.pending_approval
                    && live.computers.contains_key(&id)
                {
                    live.approvals
                        .insert(approval.approval_id.clone(), id.clone());
                }
            }
            sessions.persist(&id, &stepped).await?;
            let expires = now_ms().saturating_add(busy.0.ttl_ms);
            sessions.store.touch_computer(&id, expires).await?;
            Ok(stepped.step)
        });
        task.await.map_err(|error| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "computer_error",
                format!("the step failed: {error}"),
            )
        })?
    }

    /// Drops a live session whose browser context is gone, recording why.
    async fn forget(&self, id: &str, state: &str, reason: &str) {
        {
            let mut live = self.live();
            live.computers.remove(id);
            live.approvals.retain(|_, computer| computer != id);
        }
        if let Err(error) = self.store.end_computer(id, state, reason).await {
            eprintln!("cordon serve: could not record that computer {id} ended: {error}");
        }
    }

    /// `POST /v1/computers/{id}/actions`.
    pub(crate) async fn act(
        self: &Arc<Self>,
        id: &str,
        body: ComputerActions,
    ) -> Result<ComputerStep, ApiError> {
        let vendor = parse_format(body.format.as_deref())
            .map_err(|message| ApiError::invalid_request("invalid_request", message))?;
        if body.actions.is_empty() {
            return Err(ApiError::invalid_request(
                "invalid_request",
                "`actions` is empty; send at least one action",
            ));
        }
        let entry = self.entry(id).await?;
        let raw = json!({"format": body.format, "actions": body.actions, "call_id": body.call_id});
        let call = match decode_actions(vendor, &body.actions, body.call_id.clone()) {
            Ok(call) => call,
            Err(message) => {
                // The model wrote something that is not an action: it gets the error, and
                // nothing runs or is recorded.
                drop(entry);
                let current_url = self
                    .store
                    .computer(id)
                    .await?
                    .and_then(|row| row.current_url);
                return Ok(ComputerStep {
                    step: None,
                    status: StepStatus::Error,
                    call_id: body.call_id,
                    error: Some(message),
                    current_url,
                    screenshot: None,
                    text: None,
                    pending_approval: None,
                    resolves: None,
                    gates: Vec::new(),
                    settled: true,
                    settle: "quiet".to_owned(),
                    timings_ms: json!({}),
                });
            }
        };
        self.run(id, entry, Work::Step(call, raw)).await
    }

    /// Decides a computer approval; `None` when `approval_id` is not one.
    pub(crate) async fn decide(
        self: &Arc<Self>,
        approval_id: &str,
        decision: Decision,
    ) -> Option<Result<(String, ComputerStep), ApiError>> {
        let computer_id = self.live().approvals.get(approval_id).cloned();
        let Some(computer_id) = computer_id else {
            return match self.store.computer_approval(approval_id).await {
                Err(error) => Some(Err(error.into())),
                Ok(None) => None,
                Ok(Some((computer, status))) if status == "pending" || status == "expired" => {
                    Some(Err(ApiError::conflict(
                        "approval_expired",
                        format!(
                            "approval {approval_id} can no longer be decided: computer {computer} \
                             is no longer open"
                        ),
                    )))
                }
                Ok(Some((_, status))) => Some(Err(ApiError::conflict(
                    "approval_decided",
                    format!("approval {approval_id} was already decided ({status})"),
                ))),
            };
        };
        let entry = match self.entry(&computer_id).await {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        let approve = decision == Decision::Approve;
        let work = Work::Decide(approval_id.to_owned(), approve);
        Some(
            self.run(&computer_id, entry, work)
                .await
                .map(|step| (computer_id, step)),
        )
    }

    /// `GET /v1/computers/{id}`.
    pub(crate) async fn info(&self, id: &str) -> Result<ComputerInfo, ApiError> {
        let Some(row) = self.store.computer(id).await? else {
            return Err(ApiError::not_found("computer", id));
        };
        let live_expiry = self
            .live()
            .computers
            .get(id)
            .map(|entry| entry.expires_ms.load(Ordering::SeqCst));
        let expires_ms = match (&live_expiry, row.finished_ms) {
            (Some(expires), _) => *expires,
            (None, Some(finished)) => finished,
            (None, None) => row.expires_ms,
        };
        let pending_approval: Option<ComputerApproval> = row
            .pending
            .and_then(|value| serde_json::from_value(value).ok());
        Ok(ComputerInfo {
            id: row.id,
            state: state(&row.state),
            reason: row.reason,
            url: row.setup["url"].as_str().unwrap_or_default().to_owned(),
            current_url: row.current_url,
            display: size(&row.setup["display_size"]),
            viewport: size(&row.setup["viewport"]),
            dpr: row.setup["dpr"].as_f64().unwrap_or(1.0),
            steps: row.steps,
            pending_approval,
            created_at: rfc3339(row.created_ms),
            expires_at: rfc3339(expires_ms),
        })
    }

    /// `GET /v1/computers/{id}/trajectory`.
    pub(crate) async fn trajectory(
        &self,
        id: &str,
        after: u64,
    ) -> Result<ComputerTrajectory, ApiError> {
        let Some(row) = self.store.computer(id).await? else {
            return Err(ApiError::not_found("computer", id));
        };
        let steps = self
            .store
            .computer_steps(id, after)
            .await?
            .into_iter()
            .map(|(_, data)| serde_json::from_value::<TrajectoryStep>(data))
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::from)?;
        Ok(ComputerTrajectory {
            id: row.id,
            state: state(&row.state),
            steps,
        })
    }

    /// The screenshot of one step: (media type, bytes).
    pub(crate) async fn screenshot(
        &self,
        id: &str,
        step: u64,
    ) -> Result<(&'static str, Vec<u8>), ApiError> {
        let Some(row) = self.store.computer(id).await? else {
            return Err(ApiError::not_found("computer", id));
        };
        let Some(name) = self.store.computer_screenshot(id, step).await? else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("computer {id} has no screenshot for step {step}"),
            ));
        };
        let media_type = if name.ends_with(".jpg") {
            "image/jpeg"
        } else {
            "image/png"
        };
        let path = Path::new(&row.trajectory).join(&name);
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok((media_type, bytes)),
            Err(error) => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "screenshot_missing",
                format!(
                    "step {step} of computer {id} recorded {name}, but it cannot be read: {error}"
                ),
            )),
        }
    }

    /// `DELETE /v1/computers/{id}`: closes a live session (its trajectory stays readable,
    /// state `closed`); deletes the record and trajectory of one that is already over.
    pub(crate) async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let removed = {
            let mut live = self.live();
            let removed = live.computers.remove(id);
            if removed.is_some() {
                live.approvals.retain(|_, computer| computer != id);
            }
            removed
        };
        if let Some(entry) = removed {
            let reason = "closed by the client (DELETE)";
            let recorded = self.store.end_computer(id, "closed", reason).await;
            // Out of the live map, it must close even when its record could not be
            // written, or its browser context would outlive it unseen.
            self.pool.close(&entry.computer, reason).await;
            return Ok(recorded?);
        }
        match self.store.delete_computer(id).await? {
            Some(dir) => {
                self.remove_trajectory(&dir);
                Ok(())
            }
            None => Err(ApiError::not_found("computer", id)),
        }
    }

    /// Removes a trajectory directory, if it is one of ours.
    fn remove_trajectory(&self, dir: &str) {
        let path = Path::new(dir);
        let ours = path
            .file_name()
            .and_then(|name| name.to_str())
            .is_some_and(|name| name.starts_with("cmp_"));
        if ours
            && let Err(error) = std::fs::remove_dir_all(path)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("cordon serve: could not remove trajectory {dir}: {error}");
        }
    }

    /// Deletes what ended before `cutoff_ms` (see [`Store::purge`]) and the trajectories
    /// of the computer sessions that went.
    pub(crate) async fn purge(&self, cutoff_ms: u64) -> Result<(), StoreError> {
        let purged = self.store.purge(cutoff_ms).await?;
        for dir in &purged.trajectories {
            self.remove_trajectory(dir);
        }
        Ok(())
    }

    /// Ends every live session and stops Chromium (the server is stopping).
    pub(crate) async fn shutdown(&self) {
        let ids: Vec<String> = {
            let mut live = self.live();
            live.approvals.clear();
            live.computers.drain().map(|(id, _)| id).collect()
        };
        for id in ids {
            let _ = self
                .store
                .end_computer(
                    &id,
                    "expired",
                    "the server shut down; open a new session (its trajectory stays readable)",
                )
                .await;
        }
        self.pool.shutdown().await;
        let _ = self.store.set_meta(&self.chromium_pid_key, None).await;
    }
}

enum Work {
    Step(cordon_protocol::computer::ComputerCall, Value),
    Decide(String, bool),
}
