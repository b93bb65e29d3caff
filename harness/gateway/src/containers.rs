//! Code-execution containers: a sandbox session per container (REPL state), and the
//! execution suspended on client tools between two client requests.
//!
//! With a [`GatewayStore`], an idle container is put at rest when the request that used
//! it ends ([`Container::rest`]: its session paused into the store, its instance freed)
//! and brought back by the next request that names it, in this process or the one that
//! replaces it ([`Containers::get`]). A program suspended on client tools keeps a live
//! guest frame: it cannot outlive its process, and a client coming back for it after a
//! restart is told so ([`ContainerError::Interrupted`]).

use cordon_core::clock::now_ms;
use cordon_protocol::time::rfc3339;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_core::Dispatcher;
use cordon_protocol::execution::{
    ClientToolResult, ExecutionEvent, ExecutionResult, Language, Limits,
};
use cordon_protocol::tool::Locus;
use cordon_sandbox::{
    ExecutionControl, PauseError, PausedSession, ResultFuture, Sandbox, Session, SessionSpec,
};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::bounded_map::BoundedMap;
use crate::container_record::{self, ContainerRecord, RecordedState};
use crate::gateway_store::{GatewayStore, GatewayStoreError, StoreResult, container_blob_key};

/// A call of a client tool made by a program.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramCall {
    /// The sandbox's call id (the `tool_use` id the client answers).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Its input.
    pub input: Value,
}

/// An execution while it runs or waits for client results.
#[derive(Debug)]
pub(crate) struct Running {
    events: UnboundedReceiver<ExecutionEvent>,
    control: ExecutionControl,
    done: ResultFuture,
    /// The `srvtoolu_…` id of the code call.
    pub(crate) server_id: String,
    /// The code tool's type (`code_execution_20250825`).
    pub(crate) kind: String,
    /// Ids of the client calls it waits for.
    pub(crate) pending: Vec<String>,
}

/// How a program's run went, so far.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// It ended.
    Done(ExecutionResult),
    /// It waits for these client calls.
    Suspended(Vec<ProgramCall>),
}

/// What every container of one gateway shares: where sessions run and are kept.
#[derive(Debug)]
struct Home {
    sandbox: Sandbox,
    store: Option<Arc<dyn GatewayStore>>,
    program_wait: Duration,
    /// This process, as container records name it (a fresh id per gateway).
    process: String,
}

impl Home {
    fn spec(&self, language: Language) -> SessionSpec {
        let limits = Limits {
            client_tool_timeout_ms: ms(self.program_wait),
            ..Limits::default()
        };
        SessionSpec::new(
            language,
            Dispatcher::new(Arc::new(cordon_core::ToolRegistry::empty())),
        )
        .limits(limits)
    }
}

/// A code-execution container.
#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) id: String,
    /// The language of its programs (its sandbox session's interpreter).
    pub(crate) language: Language,
    home: Arc<Home>,
    /// Its sandbox session while live; none while at rest (its state in the store).
    session: tokio::sync::Mutex<Option<Session>>,
    expires_ms: Mutex<u64>,
    /// The execution waiting for client results, if any.
    pub(crate) running: tokio::sync::Mutex<Option<Running>>,
}

impl Container {
    pub(crate) fn expires_at(&self) -> String {
        rfc3339(*lock(&self.expires_ms))
    }

    fn touch(&self, ttl: Duration) {
        *lock(&self.expires_ms) = now_ms().saturating_add(ms(ttl));
    }

    fn record(&self, state: RecordedState) -> ContainerRecord {
        ContainerRecord {
            state,
            language: self.language,
            expires_ms: *lock(&self.expires_ms),
            process: self.home.process.clone(),
            server_id: None,
        }
    }

    /// Its session, brought back from the store when it is at rest.
    async fn live_session(&self) -> Result<Session, ContainerError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let lost = |why: String| ContainerError::Lost(self.id.clone(), why);
        let store = self
            .home
            .store
            .as_deref()
            .ok_or_else(|| lost("it is at rest but the gateway has no store".into()))?;
        let bytes = store
            .get_blob(&container_blob_key(&self.id))
            .await
            .map_err(|e| lost(e.to_string()))?
            .ok_or_else(|| lost("its paused session is not in the object store".into()))?;
        let paused = PausedSession::from_bytes(&bytes).map_err(|e| lost(e.to_string()))?;
        let session = self
            .home
            .sandbox
            .resume(&paused, self.home.spec(self.language))
            .await
            .map_err(|e| lost(e.to_string()))?;
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Starts `code` with `tools`; runs until it ends or suspends.
    pub(crate) async fn run(
        &self,
        code: &str,
        tools: Dispatcher,
        server_id: &str,
        kind: &str,
    ) -> Result<(Outcome, Option<Running>), ContainerError> {
        let session = self.live_session().await?;
        let execution = session.execute_with_tools(code, tools);
        let (events, control, done) = execution.into_parts();
        let running = Running {
            events,
            control,
            done,
            server_id: server_id.to_owned(),
            kind: kind.to_owned(),
            pending: Vec::new(),
        };
        Ok(drive(running).await)
    }

    /// Puts the container at rest in the gateway's store, when it has one: idle, its
    /// session is paused into the store (its instance freed, brought back by the next
    /// program); with a program waiting for client results, its record says so. Nothing
    /// happens while another request runs a program in it (that request rests it).
    ///
    /// On a store failure the session stays live here, as it was.
    pub(crate) async fn rest(&self) -> StoreResult<()> {
        let Some(store) = self.home.store.as_deref() else {
            return Ok(());
        };
        let Ok(running) = self.running.try_lock() else {
            return Ok(());
        };
        if let Some(running) = running.as_ref() {
            let mut record = self.record(RecordedState::Suspended);
            record.server_id = Some(running.server_id.clone());
            return container_record::write(store, &self.id, &record).await;
        }
        // `running` stays locked: no program starts while the session is paused.
        let mut slot = self.session.lock().await;
        let Some(session) = slot.as_ref() else {
            return Ok(());
        };
        let paused = match session.pause().await {
            Ok(paused) => paused,
            Err(PauseError::Busy | PauseError::AlreadyPaused) => return Ok(()),
            Err(error) => return Err(GatewayStoreError(format!("pausing: {error}"))),
        };
        let bytes = paused.to_bytes();
        let kept = async {
            store.put_blob(&container_blob_key(&self.id), bytes).await?;
            container_record::write(store, &self.id, &self.record(RecordedState::Paused)).await
        }
        .await;
        match kept {
            Ok(()) => {
                *slot = None;
                Ok(())
            }
            Err(error) => {
                // Not kept: the session goes on here from the state just captured.
                let spec = self.home.spec(self.language);
                *slot = self.home.sandbox.resume(&paused, spec).await.ok();
                Err(error)
            }
        }
    }
}

/// Submits results to a suspended execution and runs it to its next stop.
pub(crate) async fn resume(
    running: Running,
    results: Vec<ClientToolResult>,
) -> Result<(Outcome, Option<Running>), String> {
    running
        .control
        .submit_tool_results(results)
        .map_err(|e| e.to_string())?;
    Ok(drive(running).await)
}

async fn drive(mut running: Running) -> (Outcome, Option<Running>) {
    let mut batch = Vec::new();
    while let Some(event) = running.events.recv().await {
        match event {
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus: Locus::Client,
                ..
            } => batch.push(ProgramCall { id, name, input }),
            ExecutionEvent::Awaiting { .. } if !batch.is_empty() => {
                running.pending = batch.iter().map(|c| c.id.clone()).collect();
                return (Outcome::Suspended(batch), Some(running));
            }
            ExecutionEvent::Completed(result) => return (Outcome::Done(result), None),
            _ => {}
        }
    }
    (Outcome::Done(running.done.await), None)
}

/// The containers of one gateway.
#[derive(Debug)]
pub(crate) struct Containers {
    home: Option<Arc<Home>>,
    ttl: Duration,
    /// Containers alive at once: each holds a sandbox instance.
    max: usize,
    /// The language programs are written in unless a code tool names another.
    language: Language,
    map: Arc<Mutex<HashMap<String, Arc<Container>>>>,
    /// Ids of containers that are gone, and why, so a client is told apart from one that
    /// never existed.
    gone: Arc<BoundedMap<Gone>>,
}

/// Why a container is no longer there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gone {
    Expired,
    Evicted,
}

/// Ids of gone containers remembered (a few dozen bytes each).
const GONE_MAX: usize = 10_000;

/// Why a named container cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ContainerError {
    /// Never existed (or was removed long ago).
    #[error("container `{0}` does not exist; omit `container` to start a new one")]
    Unknown(String),
    /// Idle longer than its time to live.
    #[error(
        "container `{0}` expired (idle longer than its time to live); omit `container` to start a new one"
    )]
    Expired(String),
    /// Closed to make room for newer containers.
    #[error(
        "container `{0}` was closed to make room for newer ones (this server keeps {1} at most); omit `container` to start a new one"
    )]
    Evicted(String, usize),
    /// Its program waited for client tool results in a process that stopped: the program
    /// (a live guest frame) did not survive.
    #[error(
        "container `{0}` was interrupted by a restart of the server: the program in it was waiting for tool results, and a program cannot outlive the process running it; its tool calls cannot be answered any more; omit `container` to start a new one"
    )]
    Interrupted(String),
    /// At rest in the store, but it could not be brought back.
    #[error("container `{0}` could not be brought back from the store: {1}")]
    Lost(String, String),
    /// This gateway has no sandbox.
    #[error("code execution is not available on this server (no sandbox)")]
    NoSandbox,
}

impl Containers {
    pub(crate) fn new(
        sandbox: Option<Sandbox>,
        store: Option<Arc<dyn GatewayStore>>,
        ttl: Duration,
        program_wait: Duration,
        max: usize,
        language: Language,
    ) -> Self {
        let home = sandbox.map(|sandbox| {
            Arc::new(Home {
                sandbox,
                store,
                program_wait: program_wait.min(ttl),
                process: cordon_core::ids::fresh_id("gw"),
            })
        });
        let containers = Containers {
            home,
            ttl,
            max: max.max(1),
            language,
            map: Arc::new(Mutex::new(HashMap::new())),
            gone: Arc::new(BoundedMap::new(GONE_MAX)),
        };
        containers.sweep_periodically();
        containers
    }

    pub(crate) fn available(&self) -> bool {
        self.home.is_some()
    }

    pub(crate) fn sandbox(&self) -> Option<Sandbox> {
        self.home.as_ref().map(|home| home.sandbox.clone())
    }

    fn store(&self) -> Option<&dyn GatewayStore> {
        self.home.as_ref().and_then(|home| home.store.as_deref())
    }

    /// The server's code language (`--code-language`), of containers made by [`Self::create`].
    pub(crate) fn language(&self) -> Language {
        self.language
    }

    /// Expired containers free their instances even when no request comes: a task sweeps
    /// while the gateway lives (none outside a Tokio runtime; requests sweep too).
    fn sweep_periodically(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let map = Arc::downgrade(&self.map);
        let gone = Arc::downgrade(&self.gone);
        let every = (self.ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let (Some(map), Some(gone)) = (map.upgrade(), gone.upgrade()) else {
                    return;
                };
                sweep(&map, &gone);
            }
        });
    }

    /// The container `id`, its expiry pushed back: live here, or brought back from the
    /// store (its session resumed by its next program).
    pub(crate) async fn get(&self, id: &str) -> Result<Arc<Container>, ContainerError> {
        sweep(&self.map, &self.gone);
        let container = {
            let mut map = lock(&self.map);
            // One at rest that no request here holds is read again from the store: another
            // process on the same store may have used it since.
            let stale = map.get(id).is_some_and(|c| {
                self.store().is_some()
                    && Arc::strong_count(c) == 1
                    && c.session.try_lock().is_ok_and(|s| s.is_none())
            });
            if stale {
                map.remove(id);
            }
            map.get(id).cloned()
        };
        if let Some(container) = container {
            container.touch(self.ttl);
            return Ok(container);
        }
        match self.gone.get(id) {
            Some(Gone::Expired) => Err(ContainerError::Expired(id.to_owned())),
            Some(Gone::Evicted) => Err(ContainerError::Evicted(id.to_owned(), self.max)),
            None => self.bring_back(id).await,
        }
    }

    /// A container at rest in the store, made live here (not its session yet).
    async fn bring_back(&self, id: &str) -> Result<Arc<Container>, ContainerError> {
        let unknown = || ContainerError::Unknown(id.to_owned());
        let (Some(home), Some(store)) = (self.home.as_ref(), self.store()) else {
            return Err(unknown());
        };
        let lost = |e: GatewayStoreError| ContainerError::Lost(id.to_owned(), e.to_string());
        let record = container_record::read(store, id)
            .await
            .map_err(lost)?
            .ok_or_else(unknown)?;
        match record.state {
            RecordedState::Expired => return Err(ContainerError::Expired(id.to_owned())),
            RecordedState::Evicted => return Err(ContainerError::Evicted(id.to_owned(), self.max)),
            RecordedState::Interrupted => return Err(ContainerError::Interrupted(id.to_owned())),
            // Not live here (not in the map), so the process holding its program is gone.
            RecordedState::Suspended => {
                let _ = container_record::end(store, id, record, RecordedState::Interrupted).await;
                return Err(ContainerError::Interrupted(id.to_owned()));
            }
            RecordedState::Paused if record.expires_ms <= now_ms() => {
                let _ = container_record::end(store, id, record, RecordedState::Expired).await;
                return Err(ContainerError::Expired(id.to_owned()));
            }
            RecordedState::Paused => {}
        }
        let container = Arc::new(Container {
            id: id.to_owned(),
            language: record.language,
            home: home.clone(),
            session: tokio::sync::Mutex::new(None),
            expires_ms: Mutex::new(now_ms().saturating_add(ms(self.ttl))),
            running: tokio::sync::Mutex::new(None),
        });
        // Another request may have brought it back meanwhile: one copy is live.
        let evicted = {
            let mut map = lock(&self.map);
            if let Some(existing) = map.get(id) {
                return Ok(existing.clone());
            }
            let evicted = self.make_room(&mut map);
            map.insert(id.to_owned(), container.clone());
            evicted
        };
        self.end_evicted(evicted).await;
        Ok(container)
    }

    /// The container whose program waits, suspended, in the code call `server_id`: live
    /// here, or [`ContainerError::Interrupted`] when it waited in a process that stopped.
    pub(crate) async fn suspended_on(
        &self,
        server_id: &str,
    ) -> Result<Option<Arc<Container>>, ContainerError> {
        sweep(&self.map, &self.gone);
        let found = lock(&self.map)
            .values()
            .find(|c| {
                c.running
                    .try_lock()
                    .is_ok_and(|r| r.as_ref().is_some_and(|r| r.server_id == server_id))
            })
            .cloned();
        if let Some(container) = found {
            container.touch(self.ttl);
            return Ok(Some(container));
        }
        let Some(store) = self.store() else {
            return Ok(None);
        };
        let lost =
            |id: &str, e: GatewayStoreError| ContainerError::Lost(id.to_owned(), e.to_string());
        let Some(id) = container_record::waiting_in(store, server_id)
            .await
            .map_err(|e| lost(server_id, e))?
        else {
            return Ok(None);
        };
        if lock(&self.map).contains_key(&id) {
            // Live here, and no longer waiting in that call.
            return Ok(None);
        }
        match container_record::read(store, &id)
            .await
            .map_err(|e| lost(&id, e))?
        {
            Some(record)
                if record.server_id.as_deref() == Some(server_id)
                    && matches!(
                        record.state,
                        RecordedState::Suspended | RecordedState::Interrupted
                    ) =>
            {
                if record.state == RecordedState::Suspended {
                    let _ =
                        container_record::end(store, &id, record, RecordedState::Interrupted).await;
                }
                Err(ContainerError::Interrupted(id))
            }
            _ => Ok(None),
        }
    }

    /// A new container of the server's code language.
    pub(crate) async fn create(&self) -> Result<Arc<Container>, ContainerError> {
        self.create_for(self.language).await
    }

    /// A new container whose programs are in `language`, closing the least recently used
    /// one (idle ones first) when [`Self::max`] are alive.
    pub(crate) async fn create_for(
        &self,
        language: Language,
    ) -> Result<Arc<Container>, ContainerError> {
        sweep(&self.map, &self.gone);
        let home = self.home.as_ref().ok_or(ContainerError::NoSandbox)?;
        let id = cordon_core::ids::fresh_id("container");
        let container = Arc::new(Container {
            id: id.clone(),
            language,
            home: home.clone(),
            session: tokio::sync::Mutex::new(Some(home.sandbox.session(home.spec(language)))),
            expires_ms: Mutex::new(now_ms().saturating_add(ms(self.ttl))),
            running: tokio::sync::Mutex::new(None),
        });
        let evicted = {
            let mut map = lock(&self.map);
            let evicted = self.make_room(&mut map);
            map.insert(id, container.clone());
            evicted
        };
        self.end_evicted(evicted).await;
        Ok(container)
    }

    /// Makes room for one more container: those at rest leave the map first (they hold
    /// no instance and come back from the store), then the least recently used, idle ones
    /// first, which are closed. Returns the closed ones.
    fn make_room(&self, map: &mut HashMap<String, Arc<Container>>) -> Vec<Arc<Container>> {
        let mut closed = Vec::new();
        while map.len() >= self.max {
            let at_rest = map
                .values()
                .find(|c| c.session.try_lock().is_ok_and(|s| s.is_none()))
                .map(|c| c.id.clone());
            if let Some(id) = at_rest {
                map.remove(&id);
                continue;
            }
            let idle = |c: &Arc<Container>| c.running.try_lock().is_ok_and(|r| r.is_none());
            let oldest = map
                .values()
                .min_by_key(|c| (!idle(c), *lock(&c.expires_ms)))
                .map(|c| c.id.clone());
            let Some(oldest) = oldest else { break };
            if let Some(evicted) = map.remove(&oldest) {
                close(&evicted);
                self.gone.insert(&oldest, Gone::Evicted);
                closed.push(evicted);
            }
        }
        closed
    }

    /// Records closed containers as evicted in the store.
    async fn end_evicted(&self, closed: Vec<Arc<Container>>) {
        let Some(store) = self.store() else { return };
        for container in closed {
            let record = container.record(RecordedState::Evicted);
            let _ =
                container_record::end(store, &container.id, record, RecordedState::Evicted).await;
        }
    }
}

/// Drops expired containers, cancelling what they still run (and, with a store, records
/// them expired and deletes their paused sessions, in a task of its own).
fn sweep(map: &Mutex<HashMap<String, Arc<Container>>>, gone: &BoundedMap<Gone>) {
    let now = now_ms();
    let mut map = lock(map);
    let expired: Vec<String> = map
        .iter()
        .filter(|(_, c)| *lock(&c.expires_ms) <= now)
        .map(|(id, _)| id.clone())
        .collect();
    for id in expired {
        if let Some(container) = map.remove(&id) {
            close(&container);
            end_in_store(container);
        }
        gone.insert(&id, Gone::Expired);
    }
}

fn end_in_store(container: Arc<Container>) {
    let (Some(_), Ok(runtime)) = (
        container.home.store.as_ref(),
        tokio::runtime::Handle::try_current(),
    ) else {
        return;
    };
    runtime.spawn(async move {
        if let Some(store) = container.home.store.as_deref() {
            let record = container.record(RecordedState::Expired);
            let _ =
                container_record::end(store, &container.id, record, RecordedState::Expired).await;
        }
    });
}

/// Cancels the program a container still runs (its instance is freed when the last
/// request holding the container lets go).
fn close(container: &Container) {
    if let Ok(mut running) = container.running.try_lock()
        && let Some(running) = running.take()
    {
        running.control.cancel();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
