//! The `Store` every part of the server holds: one of two backends behind one async API.
//!
//! Enum dispatch rather than a trait object: the backends are two, both known here; a
//! caller's `Arc<Store>` stays one concrete type; the calls need no boxed futures; and the
//! SQLite arm stays the synchronous call it was (a few indexed row operations under a
//! mutex, tens of microseconds: cheaper inline than a hop to a blocking thread), so its
//! futures are ready on first poll.

use std::future::Future;
use std::path::Path;

use cordon_protocol::execution::{ExecutionEvent, Language};
use serde_json::Value;
use tokio::sync::watch;

use super::approvals::ApprovalRow;
use super::computers::{ComputerRow, ComputerStepRow};
use super::conversations::{ConversationRow, ConversationSummary, NewConversationEntry};
use super::envs::{EnvEpisodeRow, EnvRow};
use super::error::Result;
use super::events::EventRow;
use super::executions::ExecutionRow;
use super::handle::SqliteStore;
use super::location::DbLocation;
use super::postgres::PostgresStore;
use super::purge::Purged;
use super::replicas_schema::{LiveOwner, Owned, Recovery};
use super::sandboxes::SandboxRow;

/// The store behind the HTTP API: SQLite (a file, the default) or PostgreSQL.
#[derive(Debug)]
pub struct Store {
    backend: Backend,
}

#[derive(Debug)]
enum Backend {
    Sqlite(SqliteStore),
    // Boxed: its pool's connection settings are a few hundred bytes.
    Postgres(Box<PostgresStore>),
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path` and migrates it.
    pub fn open(path: &Path) -> Result<Store> {
        Ok(Store {
            backend: Backend::Sqlite(SqliteStore::open(path)?),
        })
    }

    /// A SQLite store that lives in memory only (tests, `--db :memory:`).
    pub fn in_memory() -> Result<Store> {
        Ok(Store {
            backend: Backend::Sqlite(SqliteStore::in_memory()?),
        })
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://user:password@host/db`;
    /// no TLS) and migrates it.
    pub async fn connect(url: &str) -> Result<Store> {
        Ok(Store {
            backend: Backend::Postgres(Box::new(PostgresStore::connect(url).await?)),
        })
    }

    /// Opens the store `location` names.
    pub async fn open_location(location: &DbLocation) -> Result<Store> {
        match location {
            DbLocation::Sqlite(path) => Store::open(path),
            DbLocation::Postgres(url) => Store::connect(url).await,
        }
    }

    /// Makes `replica` (`rpl_…`) the owner written on the live rows this store creates
    /// from now on (sandboxes, executions, computer sessions). Set once, before any; a
    /// second call is ignored.
    pub fn set_replica(&self, replica: &str) {
        let owner = match &self.backend {
            Backend::Sqlite(store) => &store.owner,
            Backend::Postgres(store) => store.owner_cell(),
        };
        let _ = owner.set(replica.to_owned());
    }

    /// A receiver that changes when another process stores an event of `execution_id`
    /// (PostgreSQL `LISTEN`/`NOTIFY`); `None` on SQLite, which one process serves. Take it
    /// before reading the log, and re-read after a bounded wait: an announcement can be
    /// lost while the listening connection is down.
    pub async fn announcements(&self, execution_id: &str) -> Option<watch::Receiver<u64>> {
        match &self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(store) => Some(store.announcements(execution_id).await),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Runs a store call to its end from synchronous code (the gateway's recorder).
    /// SQLite calls finish on their first poll; a PostgreSQL call waits for its
    /// connection, which runs on the store's own thread, so this never waits on the
    /// caller's runtime — on a multi-threaded runtime the worker is handed over first.
    pub fn wait<F: Future>(&self, call: F) -> F::Output {
        match self.backend {
            Backend::Sqlite(_) => futures::executor::block_on(call),
            Backend::Postgres(_) => {
                let multi_threaded = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
                    handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
                });
                if multi_threaded {
                    tokio::task::block_in_place(|| futures::executor::block_on(call))
                } else {
                    futures::executor::block_on(call)
                }
            }
        }
    }
}

/// Writes each call once for both backends: the SQLite arm is synchronous, the
/// PostgreSQL arm is awaited.
macro_rules! store_calls {
    ($(
        $(#[doc = $doc:literal])*
        fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        impl Store {
            $(
                $(#[doc = $doc])*
                pub async fn $name(&self $(, $arg: $ty)*) -> Result<$ret> {
                    match &self.backend {
                        Backend::Sqlite(store) => store.$name($($arg),*),
                        Backend::Postgres(store) => store.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

store_calls! {
    /// Records a new execution as `running`.
    fn insert_execution(&self, id: &str, sandbox_id: &str, language: Language, code: &str) -> ();
    /// An execution by id.
    fn execution(&self, id: &str) -> Option<ExecutionRow>;
    /// Deletes an execution with its events and approvals (one transaction).
    fn delete_execution(&self, id: &str) -> bool;
    /// Appends one event at `seq`. An `approval.required` also records the approval; an
    /// `execution.completed` also stores the result, ends the execution and expires its
    /// undecided approvals — all in one transaction with the event.
    fn append_event(&self, execution_id: &str, seq: u64, event: &ExecutionEvent) -> ();
    /// Up to `limit` events of an execution with `seq > after`, in order.
    fn events_after(&self, execution_id: &str, after: u64, limit: usize) -> Vec<EventRow>;
    /// An approval by id.
    fn approval(&self, id: &str) -> Option<ApprovalRow>;
    /// Pending approvals of an execution, oldest first.
    fn pending_approvals(&self, execution_id: &str) -> Vec<ApprovalRow>;
    /// Records a decision, if the approval is still pending. Returns whether it was.
    fn decide_approval(&self, id: &str, status: &str) -> bool;
    /// Records a new sandbox.
    fn insert_sandbox(&self, row: &SandboxRow) -> ();
    /// A sandbox by id (any state).
    fn sandbox(&self, id: &str) -> Option<SandboxRow>;
    /// Moves a sandbox's expiry (it was used).
    fn touch_sandbox(&self, id: &str, expires_ms: u64) -> ();
    /// Ends a live sandbox (`expired` or `deleted`), with the reason.
    fn end_sandbox(&self, id: &str, state: &str, reason: &str) -> ();
    /// Marks a sandbox deleted, whatever its state.
    fn mark_sandbox_deleted(&self, id: &str) -> ();
    /// Records a live sandbox as paused, its state at `paused_key` (`paused_bytes` long),
    /// expiring at `expires_ms`; whether it was live.
    fn pause_sandbox(&self, id: &str, paused_bytes: u64, paused_key: &str, expires_ms: u64) -> bool;
    /// Records a paused sandbox as live again, expiring at `expires_ms` and owned by this
    /// replica; whether it was paused (of two replicas bringing it back, one wins).
    fn resume_sandbox(&self, id: &str, expires_ms: u64) -> bool;
    /// Ends a paused sandbox (`expired`, `interrupted`) with the reason; whether it was
    /// paused.
    fn end_paused_sandbox(&self, id: &str, state: &str, reason: &str) -> bool;
    /// Up to `limit` paused sandboxes whose expiry is at or before `now_ms`, soonest first.
    fn paused_sandboxes_expired(&self, now_ms: u64, limit: usize) -> Vec<SandboxRow>;
    /// Records a new computer session as `live`.
    fn insert_computer(&self, row: &ComputerRow) -> ();
    /// A computer session by id (any state).
    fn computer(&self, id: &str) -> Option<ComputerRow>;
    /// Appends a computer step, in one transaction with what it changes: the session's
    /// step count, URL and pending approval, the approval it asks for (recorded
    /// `pending`) and the one it resolves (recorded `approved` or `denied`).
    fn append_computer_step(&self, computer_id: &str, step: &ComputerStepRow) -> ();
    /// Moves a live computer session's expiry (it was used).
    fn touch_computer(&self, id: &str, expires_ms: u64) -> ();
    /// Ends a live computer session (`expired` or `closed`) with the reason; its pending
    /// approval expires.
    fn end_computer(&self, id: &str, state: &str, reason: &str) -> ();
    /// Expires a pending approval of a live computer session that can no longer be decided
    /// (its decision was taken, but the step failed): the session stops showing it.
    fn expire_computer_approval(&self, computer_id: &str, approval_id: &str) -> ();
    /// Steps of a computer session with `step > after`, in order: (step, JSON).
    fn computer_steps(&self, computer_id: &str, after: u64) -> Vec<(u64, Value)>;
    /// The screenshot file name of one step (`None`: no such step, or it has none).
    fn computer_screenshot(&self, computer_id: &str, step: u64) -> Option<String>;
    /// A computer approval: (computer id, status).
    fn computer_approval(&self, id: &str) -> Option<(String, String)>;
    /// Deletes a computer session's record, steps and approvals (one transaction); returns
    /// its trajectory directory, for the caller to remove.
    fn delete_computer(&self, id: &str) -> Option<String>;
    /// Creates the conversation unless it exists.
    fn begin_conversation(&self, id: &str, upstream: &str) -> ();
    /// Appends an entry (one transaction: the next seq and the row); returns its seq.
    fn append_conversation_entry(&self, id: &str, entry: &NewConversationEntry<'_>) -> u64;
    /// A conversation with its entries.
    fn conversation(&self, id: &str) -> Option<ConversationRow>;
    /// Whether conversation `id` exists.
    fn conversation_exists(&self, id: &str) -> bool;
    /// Keeps a Responses-API response's items for `previous_response_id`.
    fn keep_response(&self, id: &str, parent: Option<&str>, items: &Value) -> ();
    /// A kept response: the response it continued and its items.
    fn response(&self, id: &str) -> Option<(Option<String>, Value)>;
    /// Deletes conversations not updated since `cutoff_ms`; how many.
    fn purge_conversations(&self, cutoff_ms: u64) -> usize;
    /// Conversations newest first (by last update), at most `limit` (more when the last
    /// one's millisecond holds others: a page never ends inside one), only those updated
    /// before `before_ms` when given (the next page starts at the last one's `updated_ms`).
    fn list_conversations(&self, limit: usize, before_ms: Option<u64>) -> Vec<ConversationSummary>;
    /// Writes a session's state (creating the row the first time).
    fn save_session(&self, id: &str, state: &str) -> ();
    /// A session's state and when it last changed (Unix ms).
    fn load_session(&self, id: &str) -> Option<(String, u64)>;
    /// Deletes a session; whether it existed.
    fn delete_session(&self, id: &str) -> bool;
    /// Deletes sessions idle since before `cutoff_ms`; how many.
    fn purge_sessions(&self, cutoff_ms: u64) -> usize;
    /// Keeps a gateway record (`cordon_gateway::GatewayStore`), replacing what was there.
    fn put_gateway_record(&self, kind: &str, key: &str, value: &str) -> ();
    /// A gateway record's value.
    fn gateway_record(&self, kind: &str, key: &str) -> Option<String>;
    /// Deletes a gateway record and returns its value: of callers racing, one gets it.
    fn take_gateway_record(&self, kind: &str, key: &str) -> Option<String>;
    /// Keeps a gateway record unless one is there; returns the value kept.
    fn put_new_gateway_record(&self, kind: &str, key: &str, value: &str) -> String;
    /// Deletes gateway records not written since `cutoff_ms` (not the shared keys); the
    /// (kind, key) of each.
    fn purge_gateway_records(&self, cutoff_ms: u64) -> Vec<(String, String)>;
    /// Records a new benchmark environment as `live`.
    fn insert_env(&self, id: &str, suite: &str) -> ();
    /// Writes an environment's episode as it stands (its row made at the first write).
    fn record_env_episode(&self, env_id: &str, row: &EnvEpisodeRow) -> ();
    /// A benchmark environment with its episodes (any state).
    fn env(&self, id: &str) -> Option<EnvRow>;
    /// Ends a live environment (`closed`, `interrupted`) with the reason; whether it was live.
    fn end_env(&self, id: &str, state: &str, reason: &str) -> bool;
    /// Deletes environments over since before `cutoff_ms`, with their episodes; how many.
    fn purge_envs(&self, cutoff_ms: u64) -> usize;
    /// A value of the `meta` table.
    fn meta(&self, key: &str) -> Option<String>;
    /// Sets (or with `None` removes) a value of the `meta` table.
    fn set_meta(&self, key: &str, value: Option<&str>) -> ();
    /// Deletes what ended before `cutoff_ms` (Unix ms): finished executions with their
    /// events and approvals, sandboxes that are no longer live, and computer sessions that
    /// are over with their steps and approvals. Running executions and live sandboxes and
    /// sessions are never touched. One transaction; returns what went, including the
    /// trajectory directories for the caller to remove.
    fn purge(&self, cutoff_ms: u64) -> Purged;
    /// Ends what dead replicas owned (see [`Recovery`]: replicas whose heartbeat is older
    /// than its cutoff are removed first, then every row whose owner has no heartbeat and
    /// is not this replica is over): running executions end `interrupted` with `reason`
    /// (and a final `execution.completed` event built from their log, so streams and
    /// readers see an end), their pending approvals expire, live sandboxes are
    /// `interrupted` (their instances and REPL state died with the process; paused ones
    /// stay paused), open computer sessions expire with
    /// [`COMPUTER_RESTART_REASON`](super::COMPUTER_RESTART_REASON). One transaction;
    /// idempotent, and safe when two replicas run it at once. Returns how many executions
    /// were interrupted.
    fn recover(&self, reason: &str, recovery: &Recovery<'_>) -> usize;
    /// Records replica `id`'s heartbeat at `now_ms` (creating its row); whether its row
    /// was there (`false`: its first beat, or another replica found it dead and ended
    /// what it owned).
    fn beat_replica(&self, id: &str, address: &str, now_ms: u64) -> bool;
    /// Marks replica `id`'s heartbeat as long past (it is stopping), so the next recovery
    /// of another replica ends what it still owns without waiting for the lease.
    fn retire_replica(&self, id: &str) -> ();
    /// The owner of a live thing (`owned` says which table) if that replica's heartbeat
    /// is not older than `alive_since_ms`: one primary-key read.
    fn live_owner(&self, owned: Owned, id: &str, alive_since_ms: u64) -> Option<LiveOwner>;
}
