//! Pausing sandboxes and bringing them back ([`LiveSandboxes::pause`],
//! [`LiveSandboxes::bring_back`]): a paused sandbox's state (its REPL session, or its
//! workspace alone when it has none) is bytes in the object store under `paused/<id>`, its
//! row says `paused`, and it holds no instance, no slot and no share of the workspace
//! budget. The reaper pauses idle sandboxes and expires paused ones; a graceful stop pauses
//! every idle one.
//!
//! Every change between live and paused runs in the sandbox's lane ([`Transitions`]), and
//! the row changes by compare-and-set, so concurrent requests bring a sandbox back once.
//!
//! [`Transitions`]: super::transitions::Transitions

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use axum::http::StatusCode;
use bytes::Bytes;
use cordon_core::clock::now_ms;
use cordon_sandbox::{
    PauseError, PausedSession, Quota, ResumeError, Session, SessionSpec, Workspace,
};

use super::live_sandboxes::{LiveSandbox, LiveSandboxes, refused};
use crate::error::ApiError;
use crate::store::SandboxRow;

/// Paused sandboxes expired per reaper round (the rest wait for the next).
const EXPIRE_BATCH: usize = 100;

/// The object store key of a paused sandbox's state.
pub(crate) fn paused_key(id: &str) -> String {
    format!("paused/{id}")
}

/// The answer for a sandbox that is neither live here nor paused: why, from its row.
pub(super) fn not_live(id: &str, row: Option<&SandboxRow>) -> ApiError {
    let reason = |row: &SandboxRow| {
        row.reason
            .clone()
            .unwrap_or_else(|| "unknown reason".into())
    };
    match row {
        Some(row) if row.state == "expired" => ApiError::gone(
            "sandbox_expired",
            format!(
                "sandbox {id} has expired ({}); create a new one",
                reason(row)
            ),
        ),
        Some(row) if row.state == "interrupted" => ApiError::gone(
            "sandbox_interrupted",
            format!(
                "sandbox {id} was interrupted ({}); create a new one",
                reason(row)
            ),
        ),
        _ => ApiError::not_found("sandbox", id),
    }
}

fn object_store_failed(what: &str, error: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "object_store_unavailable",
        format!("{what}: the object store failed ({error}); try again"),
    )
}

fn busy(id: &str) -> ApiError {
    ApiError::conflict(
        "sandbox_busy",
        format!(
            "sandbox {id} is running an execution; pause it once the execution has ended \
             (or cancel it: POST /v1/executions/{{id}}/cancel)"
        ),
    )
}

impl LiveSandboxes {
    /// Pauses a live sandbox: its state goes to the object store and it gives back its
    /// slot and its share of the workspace budget. Pausing a paused one answers its row.
    /// `409 sandbox_busy` while an execution runs in it.
    pub(crate) async fn pause(&self, id: &str) -> Result<SandboxRow, ApiError> {
        let _transition = self.transitions.enter(id).await;
        let sandbox = {
            let mut live = self.live();
            match live.sandboxes.get(id) {
                Some(sandbox) if sandbox.running.load(Ordering::SeqCst) > 0 => {
                    return Err(busy(id));
                }
                Some(_) => live.sandboxes.remove(id),
                None => None,
            }
        };
        let Some(sandbox) = sandbox else {
            return match self.store.sandbox(id).await? {
                Some(row) if row.state == "paused" => Ok(row),
                row => Err(not_live(id, row.as_ref())),
            };
        };
        match self.pause_live(&sandbox).await {
            Ok(row) => {
                // Its slot went with the session; its budget share goes now, whoever
                // still holds the `Arc` for a moment.
                sandbox
                    .reservation
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                Ok(row)
            }
            Err((error, revived)) => {
                if let Some(revived) = revived {
                    self.live().sandboxes.insert(id.to_owned(), revived);
                }
                Err(error)
            }
        }
    }

    /// Pauses `sandbox`, already out of the live map and idle. On failure the error comes
    /// with the sandbox to put back (its session resumed in place when it had been
    /// paused), or none when it is gone.
    async fn pause_live(
        &self,
        sandbox: &Arc<LiveSandbox>,
    ) -> Result<SandboxRow, (ApiError, Option<Arc<LiveSandbox>>)> {
        let id = sandbox.id.as_str();
        let paused = match &sandbox.session {
            Some(session) => match session.pause().await {
                Ok(paused) => paused,
                Err(PauseError::Busy) => return Err((busy(id), Some(sandbox.clone()))),
                Err(error) => {
                    let error = ApiError::conflict(
                        "sandbox_not_pausable",
                        format!("sandbox {id} cannot be paused: {error}"),
                    );
                    return Err((error, Some(sandbox.clone())));
                }
            },
            None => PausedSession::of_workspace(sandbox.language, &sandbox.workspace),
        };
        // Hashing and compressing take milliseconds of CPU: off the async workers.
        let (paused, bytes) = match tokio::task::spawn_blocking(move || {
            let bytes = paused.to_bytes();
            (paused, bytes)
        })
        .await
        {
            Ok(done) => done,
            Err(error) => {
                let error = ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "pause_failed",
                    format!("sandbox {id} could not be paused: {error}"),
                );
                return Err((error, None));
            }
        };
        let key = paused_key(id);
        let stored = bytes.len() as u64;
        let undo = |error: ApiError| async {
            let revived = self.revive(sandbox, &paused).await;
            (error, revived)
        };
        if let Err(error) = self.objects.put(&key, Bytes::from(bytes)).await {
            let error = object_store_failed(&format!("sandbox {id} could not be paused"), error);
            return Err(undo(error).await);
        }
        let expires_ms = sandbox.expires_ms.load(Ordering::SeqCst);
        let recorded = self.store.pause_sandbox(id, stored, &key, expires_ms).await;
        match recorded {
            Ok(true) => {}
            Ok(false) => {
                // Its row is no longer live (deleted from another replica): nothing to keep.
                let _ = self.objects.delete(&key).await;
                return Err((ApiError::not_found("sandbox", id), None));
            }
            Err(error) => {
                let _ = self.objects.delete(&key).await;
                return Err(undo(error.into()).await);
            }
        }
        let mut row = self
            .store
            .sandbox(id)
            .await
            .map_err(|error| (error.into(), None))?
            .ok_or_else(|| (ApiError::not_found("sandbox", id), None))?;
        row.paused_bytes = Some(stored);
        Ok(row)
    }

    /// `sandbox` live again from its own paused state, after a pause that could not be
    /// stored: a stateful one gets its session back in a fresh instance; its files never
    /// left. `None` (and a log line) if even that fails: the sandbox is then lost.
    async fn revive(
        &self,
        sandbox: &Arc<LiveSandbox>,
        paused: &PausedSession,
    ) -> Option<Arc<LiveSandbox>> {
        if sandbox.session.is_none() {
            return Some(sandbox.clone());
        }
        let spec = SessionSpec::new(sandbox.language, sandbox.dispatcher.clone())
            .limits(sandbox.limits)
            .workspace(sandbox.workspace.clone());
        match self.sandbox.resume(paused, spec).await {
            Ok(session) => Some(Arc::new(LiveSandbox {
                id: sandbox.id.clone(),
                language: sandbox.language,
                dispatcher: sandbox.dispatcher.clone(),
                limits: sandbox.limits,
                session: Some(session),
                workspace: sandbox.workspace.clone(),
                ttl_ms: sandbox.ttl_ms,
                expires_ms: sandbox.expires_ms.load(Ordering::SeqCst).into(),
                running: 0.into(),
                reservation: sandbox
                    .reservation
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .into(),
            })),
            Err(error) => {
                eprintln!(
                    "cordon serve: sandbox {} could not be paused nor resumed in place: {error}",
                    sandbox.id
                );
                let reason = format!("its pause could not be stored nor undone: {error}");
                let _ = self
                    .store
                    .end_sandbox(&sandbox.id, "interrupted", &reason)
                    .await;
                None
            }
        }
    }

    /// The one place a paused sandbox becomes live in this process: its row and object
    /// are read, its state resumed, its budget share reserved, its row set `live` (by
    /// compare-and-set) and its object deleted. A live one is returned as it is;
    /// concurrent calls for one sandbox bring it back once.
    ///
    /// A paused state that cannot be read or does not fit this build's image ends the
    /// sandbox `interrupted` (`410 sandbox_interrupted`, saying why); a full server is
    /// `503` as for a create.
    pub(crate) async fn bring_back(&self, id: &str) -> Result<Arc<LiveSandbox>, ApiError> {
        if let Some(sandbox) = self.live().sandboxes.get(id) {
            return Ok(sandbox.clone());
        }
        let _transition = self.transitions.enter(id).await;
        // Another request may have brought it back while this one waited.
        if let Some(sandbox) = self.live().sandboxes.get(id) {
            return Ok(sandbox.clone());
        }
        let row = match self.store.sandbox(id).await? {
            Some(row) if row.state == "paused" => row,
            row => return Err(not_live(id, row.as_ref())),
        };
        let reservation = self
            .budget
            .reserve(row.limits.workspace_bytes)
            .map_err(refused)?;
        let key = row.paused_key.clone().unwrap_or_else(|| paused_key(id));
        let resuming = format!("sandbox {id} could not be resumed");
        let bytes = match self.objects.get(&key).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                return Err(self
                    .interrupt(
                        &row,
                        &key,
                        "its paused state is missing from the object store",
                    )
                    .await);
            }
            Err(error) => return Err(object_store_failed(&resuming, error)),
        };
        let read = tokio::task::spawn_blocking(move || PausedSession::from_bytes(&bytes)).await;
        let paused = match read {
            Ok(Ok(paused)) => paused,
            Ok(Err(error)) => {
                let reason = format!("its paused state could not be read: {error}");
                return Err(self.interrupt(&row, &key, &reason).await);
            }
            Err(error) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "resume_failed",
                    format!("{resuming}: {error}"),
                ));
            }
        };
        let dispatcher = self.dispatcher(row.tools.clone()).map_err(|error| {
            ApiError::conflict(
                "resume_failed",
                format!("{resuming}: its tools do not fit this server's connected tools ({error})"),
            )
        })?;
        let workspace = Workspace::new(Quota {
            bytes: row.limits.workspace_bytes,
            files: row.limits.workspace_files,
        });
        let session = match self
            .restore(&row, &paused, dispatcher.clone(), &workspace)
            .await
        {
            Ok(session) => session,
            Err(ResumeError::Unavailable(why)) => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no_instance",
                    format!("{resuming} now: no free instance ({why}); try again"),
                ));
            }
            Err(ResumeError::Sandbox(error)) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "resume_failed",
                    format!("{resuming}: {error}"),
                ));
            }
            Err(error) => {
                let reason = format!("its paused state does not fit this server: {error}");
                return Err(self.interrupt(&row, &key, &reason).await);
            }
        };
        let expires_ms = now_ms().saturating_add(row.ttl_ms);
        if !self.store.resume_sandbox(id, expires_ms).await? {
            // Deleted or expired meanwhile (from another replica): what it is now.
            return Err(not_live(id, self.store.sandbox(id).await?.as_ref()));
        }
        let sandbox = Arc::new(LiveSandbox::new(
            &row,
            dispatcher,
            session,
            workspace,
            expires_ms,
            reservation,
        ));
        self.live().sandboxes.insert(id.to_owned(), sandbox.clone());
        if let Err(error) = self.objects.delete(&key).await {
            eprintln!("cordon serve: could not delete the paused state of {id} ({key}): {error}");
        }
        Ok(sandbox)
    }

    /// `paused` put back: a stateful sandbox's session resumed into `workspace`, or a
    /// stateless one's files restored into it.
    async fn restore(
        &self,
        row: &SandboxRow,
        paused: &PausedSession,
        dispatcher: cordon_core::Dispatcher,
        workspace: &Workspace,
    ) -> Result<Option<Session>, ResumeError> {
        if !row.stateful {
            paused.restore_workspace(workspace)?;
            return Ok(None);
        }
        let spec = SessionSpec::new(row.language, dispatcher)
            .limits(row.limits)
            .workspace(workspace.clone());
        Ok(Some(self.sandbox.resume(paused, spec).await?))
    }

    /// Ends a paused sandbox whose state cannot come back as `interrupted`, deletes the
    /// object, and says so.
    async fn interrupt(&self, row: &SandboxRow, key: &str, reason: &str) -> ApiError {
        let id = row.id.as_str();
        eprintln!("cordon serve: sandbox {id} could not be resumed: {reason}");
        if let Err(error) = self
            .store
            .end_paused_sandbox(id, "interrupted", reason)
            .await
        {
            eprintln!("cordon serve: could not record that sandbox {id} is interrupted: {error}");
        }
        let _ = self.objects.delete(key).await;
        ApiError::gone(
            "sandbox_interrupted",
            format!("sandbox {id} could not be resumed: {reason}; create a new one"),
        )
    }

    /// Deletes a paused sandbox and its stored state; the caller holds its lane.
    pub(super) async fn delete_paused(&self, id: &str) -> Result<(), ApiError> {
        let key = self
            .store
            .sandbox(id)
            .await?
            .and_then(|row| row.paused_key)
            .unwrap_or_else(|| paused_key(id));
        self.store.mark_sandbox_deleted(id).await?;
        if let Err(error) = self.objects.delete(&key).await {
            eprintln!("cordon serve: could not delete the paused state of {id} ({key}): {error}");
        }
        Ok(())
    }

    /// Pauses the live sandboxes idle for `pause_after` (the reaper's round).
    pub(super) async fn pause_idle(&self, now: u64) {
        let Some(after) = self.pause_after else {
            return;
        };
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let idle: Vec<String> = self
            .live()
            .sandboxes
            .values()
            .filter(|sandbox| {
                sandbox.running.load(Ordering::SeqCst) == 0
                    && sandbox.idle_since_ms().saturating_add(after_ms) <= now
            })
            .map(|sandbox| sandbox.id.clone())
            .collect();
        for id in idle {
            self.pause_logged(&id).await;
        }
    }

    /// Pauses every idle live sandbox (a graceful stop); returns how many were paused.
    /// Busy ones stay live, and are `interrupted` at the next start.
    pub(crate) async fn pause_all_idle(&self) -> usize {
        let idle: Vec<String> = self
            .live()
            .sandboxes
            .values()
            .filter(|sandbox| sandbox.running.load(Ordering::SeqCst) == 0)
            .map(|sandbox| sandbox.id.clone())
            .collect();
        let mut paused = 0;
        for id in idle {
            paused += usize::from(self.pause_logged(&id).await);
        }
        paused
    }

    /// [`Self::pause`] from a background task: a failure is logged (a sandbox that became
    /// busy meanwhile is not a failure).
    async fn pause_logged(&self, id: &str) -> bool {
        match self.pause(id).await {
            Ok(_) => true,
            Err(error)
                if error.status == StatusCode::CONFLICT && error.error_type == "sandbox_busy" =>
            {
                false
            }
            Err(error) => {
                eprintln!(
                    "cordon serve: could not pause idle sandbox {id}: {}",
                    error.message
                );
                false
            }
        }
    }

    /// Ends the paused sandboxes past their ttl (`expired`) and deletes their state.
    pub(super) async fn expire_paused(&self, now: u64) {
        let rows = match self.store.paused_sandboxes_expired(now, EXPIRE_BATCH).await {
            Ok(rows) => rows,
            Err(error) => {
                eprintln!("cordon serve: could not look for expired paused sandboxes: {error}");
                return;
            }
        };
        for row in rows {
            let _transition = self.transitions.enter(&row.id).await;
            let ended = self
                .store
                .end_paused_sandbox(&row.id, "expired", "unused for its ttl (while paused)")
                .await;
            match ended {
                Ok(true) => {
                    let key = row.paused_key.unwrap_or_else(|| paused_key(&row.id));
                    if let Err(error) = self.objects.delete(&key).await {
                        eprintln!(
                            "cordon serve: could not delete the paused state of {} ({key}): {error}",
                            row.id
                        );
                    }
                }
                Ok(false) => {}
                Err(error) => {
                    eprintln!(
                        "cordon serve: could not record that sandbox {} expired: {error}",
                        row.id
                    );
                }
            }
        }
    }
}
