//! Code-execution containers: a sandbox session per container (REPL state), and the
//! execution suspended on client tools between two client requests.

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
use cordon_sandbox::{ExecutionControl, ResultFuture, Sandbox, Session, SessionSpec};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::bounded_map::BoundedMap;

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

/// A code-execution container.
#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) id: String,
    /// The language of its programs (its sandbox session's interpreter).
    pub(crate) language: Language,
    session: Session,
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

    /// Starts `code` with `tools`; runs until it ends or suspends.
    pub(crate) async fn run(
        &self,
        code: &str,
        tools: Dispatcher,
        server_id: &str,
        kind: &str,
    ) -> (Outcome, Option<Running>) {
        let execution = self.session.execute_with_tools(code, tools);
        let (events, control, done) = execution.into_parts();
        let running = Running {
            events,
            control,
            done,
            server_id: server_id.to_owned(),
            kind: kind.to_owned(),
            pending: Vec::new(),
        };
        drive(running).await
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
    sandbox: Option<Sandbox>,
    ttl: Duration,
    /// How long a program waits for the client's tool results.
    program_wait: Duration,
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
    /// This gateway has no sandbox.
    #[error("code execution is not available on this server (no sandbox)")]
    NoSandbox,
}

impl Containers {
    pub(crate) fn new(
        sandbox: Option<Sandbox>,
        ttl: Duration,
        program_wait: Duration,
        max: usize,
        language: Language,
    ) -> Self {
        let containers = Containers {
            sandbox,
            ttl,
            program_wait: program_wait.min(ttl),
            max: max.max(1),
            language,
            map: Arc::new(Mutex::new(HashMap::new())),
            gone: Arc::new(BoundedMap::new(GONE_MAX)),
        };
        containers.sweep_periodically();
        containers
    }

    pub(crate) fn available(&self) -> bool {
        self.sandbox.is_some()
    }

    pub(crate) fn sandbox(&self) -> Option<Sandbox> {
        self.sandbox.clone()
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

    /// The container `id`, its expiry pushed back.
    pub(crate) fn get(&self, id: &str) -> Result<Arc<Container>, ContainerError> {
        sweep(&self.map, &self.gone);
        let container = lock(&self.map).get(id).cloned();
        match container {
            Some(c) => {
                c.touch(self.ttl);
                Ok(c)
            }
            None => match self.gone.get(id) {
                Some(Gone::Expired) => Err(ContainerError::Expired(id.to_owned())),
                Some(Gone::Evicted) => Err(ContainerError::Evicted(id.to_owned(), self.max)),
                None => Err(ContainerError::Unknown(id.to_owned())),
            },
        }
    }

    /// The container whose program waits, suspended, in the code call `server_id`.
    pub(crate) fn suspended_on(&self, server_id: &str) -> Option<Arc<Container>> {
        sweep(&self.map, &self.gone);
        let found = lock(&self.map)
            .values()
            .find(|c| {
                c.running
                    .try_lock()
                    .is_ok_and(|r| r.as_ref().is_some_and(|r| r.server_id == server_id))
            })
            .cloned();
        if let Some(container) = &found {
            container.touch(self.ttl);
        }
        found
    }

    /// A new container of the server's code language.
    pub(crate) fn create(&self) -> Result<Arc<Container>, ContainerError> {
        self.create_for(self.language)
    }

    /// A new container whose programs are in `language`, closing the least recently used
    /// one (idle ones first) when [`Self::max`] are alive.
    pub(crate) fn create_for(&self, language: Language) -> Result<Arc<Container>, ContainerError> {
        sweep(&self.map, &self.gone);
        let sandbox = self.sandbox.as_ref().ok_or(ContainerError::NoSandbox)?;
        let limits = Limits {
            client_tool_timeout_ms: ms(self.program_wait),
            ..Limits::default()
        };
        let spec = SessionSpec::new(
            language,
            Dispatcher::new(Arc::new(cordon_core::ToolRegistry::empty())),
        )
        .limits(limits);
        let id = cordon_core::ids::fresh_id("container");
        let container = Arc::new(Container {
            id: id.clone(),
            language,
            session: sandbox.session(spec),
            expires_ms: Mutex::new(now_ms().saturating_add(ms(self.ttl))),
            running: tokio::sync::Mutex::new(None),
        });
        let mut map = lock(&self.map);
        while map.len() >= self.max {
            let idle = |c: &Arc<Container>| c.running.try_lock().is_ok_and(|r| r.is_none());
            let oldest = map
                .values()
                .min_by_key(|c| (!idle(c), *lock(&c.expires_ms)))
                .map(|c| c.id.clone());
            let Some(oldest) = oldest else { break };
            if let Some(evicted) = map.remove(&oldest) {
                close(&evicted);
                self.gone.insert(&oldest, Gone::Evicted);
            }
        }
        map.insert(id, container.clone());
        Ok(container)
    }
}

/// Drops expired containers, cancelling what they still run.
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
        }
        gone.insert(&id, Gone::Expired);
    }
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
