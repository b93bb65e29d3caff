//! The SQLite store behind the HTTP API: sandboxes, executions, the append-only event log
//! and approvals; computer sessions, their trajectory steps and approvals (the screenshots
//! themselves are files in the session's trajectory directory, written before the step's
//! row, so a row never points at a missing file).
//!
//! Every event is written here, with its sequence number, *before* anyone is told about
//! it; SSE streams, `Last-Event-ID` resumption and `GET /v1/executions/{id}` all read from
//! the log, so what a client sees is exactly what survives a crash.
//!
//! Each write that changes more than one row (an event that ends an execution, the
//! recovery after a restart) is one transaction, so a reader never sees half of it. The
//! database runs in WAL mode with `synchronous = NORMAL`: a committed transaction survives
//! the process being killed (`kill -9`); only an operating-system crash may lose the last
//! few commits, never corrupt the file.
//!
//! The file is private: created 0600 (its `-wal` and `-shm` files too, which SQLite gives
//! the database file's mode) in a directory created 0700 if Cordon creates it. Files that
//! already exist lose their group and other bits when the store opens (never gain any);
//! an existing directory keeps its mode.
//!
//! Why here and not in `cordon-core`: the store's rows are the HTTP API's resources, and
//! `rusqlite` compiles SQLite from C; in core it would be built into every crate that only
//! wants the tool layer (the sandbox, computer use, the guest tests).

use cordon_core::clock::now_ms;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use cordon_protocol::execution::{
    ErrorInfo, ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits, Stream,
    ToolCallRecord, Usage,
};
use cordon_protocol::tool::{Locus, ToolDeclaration};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

mod conversations;
mod sessions;
pub use conversations::{
    ConversationEntryRow, ConversationRow, ConversationSummary, NewConversationEntry,
};

/// Schema version written to `meta`; bump with a migration when the tables change.
const SCHEMA_VERSION: i64 = 3;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sandboxes (
    id          TEXT PRIMARY KEY,
    language    TEXT NOT NULL,
    tools       TEXT NOT NULL,
    limits      TEXT NOT NULL,
    stateful    INTEGER NOT NULL,
    ttl_ms      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT
);
CREATE TABLE IF NOT EXISTS executions (
    id          TEXT PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    language    TEXT NOT NULL,
    code        TEXT NOT NULL,
    status      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    finished_ms INTEGER,
    result      TEXT
);
CREATE INDEX IF NOT EXISTS executions_by_status ON executions (status);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT NOT NULL,
    data         TEXT NOT NULL,
    at_ms        INTEGER NOT NULL,
    PRIMARY KEY (execution_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS approvals (
    id           TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    input        TEXT NOT NULL,
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    decided_ms   INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_by_execution ON approvals (execution_id);
CREATE TABLE IF NOT EXISTS computers (
    id          TEXT PRIMARY KEY,
    setup       TEXT NOT NULL,
    trajectory  TEXT NOT NULL,
    ttl_ms      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT,
    finished_ms INTEGER,
    current_url TEXT,
    steps       INTEGER NOT NULL DEFAULT 0,
    pending     TEXT
);
CREATE INDEX IF NOT EXISTS computers_by_state ON computers (state);
CREATE TABLE IF NOT EXISTS computer_steps (
    computer_id TEXT NOT NULL,
    step        INTEGER NOT NULL,
    status      TEXT NOT NULL,
    data        TEXT NOT NULL,
    screenshot  TEXT,
    at_ms       INTEGER NOT NULL,
    PRIMARY KEY (computer_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS computer_approvals (
    id          TEXT PRIMARY KEY,
    computer_id TEXT NOT NULL,
    step        INTEGER NOT NULL,
    status      TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    decided_ms  INTEGER
);
CREATE INDEX IF NOT EXISTS computer_approvals_by_computer ON computer_approvals (computer_id);
";

/// Why computer sessions that were open when the server stopped are over.
pub const COMPUTER_RESTART_REASON: &str = "the server stopped while this computer session was \
    open (its process exited or was killed), and its browser went with it; open a new one \
    (POST /v1/computers). Its trajectory stays readable";

/// Status of an execution that has not ended, as stored.
pub const RUNNING: &str = "running";

/// A failure of the store (the database file, or a row that does not decode).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored JSON column does not decode (written by an incompatible version?).
    #[error("stored data does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// The database's directory or file could not be created or made private.
    #[error("cannot create or restrict {path}: {source}")]
    Io {
        /// The directory or file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file was written by a newer Cordon.
    #[error(
        "database schema version {found} is newer than this build understands ({SCHEMA_VERSION})"
    )]
    SchemaVersion {
        /// The version in the file.
        found: i64,
    },
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A sandbox as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxRow {
    /// Its id.
    pub id: String,
    /// Guest language.
    pub language: Language,
    /// Tool declarations as given.
    pub tools: Vec<ToolDeclaration>,
    /// Limits of each execution.
    pub limits: Limits,
    /// Whether executions share one instance (REPL state).
    pub stateful: bool,
    /// Idle time after which it expires, in milliseconds.
    pub ttl_ms: u64,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Expiry time, Unix milliseconds.
    pub expires_ms: u64,
    /// `live`, `expired` or `deleted`.
    pub state: String,
    /// Why it is no longer live.
    pub reason: Option<String>,
}

/// An execution as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// Its id.
    pub id: String,
    /// The sandbox it ran in.
    pub sandbox_id: String,
    /// Guest language.
    pub language: Language,
    /// `running`, or the final [`ExecutionStatus`] name.
    pub status: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// End time, Unix milliseconds.
    pub finished_ms: Option<u64>,
    /// The final result, once it ended.
    pub result: Option<ExecutionResult>,
}

/// One logged event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Position in the execution's log, from 1.
    pub seq: u64,
    /// The event's type name (`output.delta`, …).
    pub event_type: String,
    /// The event as JSON text (the same text sent over SSE).
    pub data: String,
}

/// An approval as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    /// Its id.
    pub id: String,
    /// The execution waiting for it.
    pub execution_id: String,
    /// The waiting call.
    pub call_id: String,
    /// Tool name.
    pub tool: String,
    /// The call's input.
    pub input: Value,
    /// Why approval is needed.
    pub reason: String,
    /// `pending`, `approved`, `denied` or `expired`.
    pub status: String,
}

/// A computer session as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputerRow {
    /// Its id.
    pub id: String,
    /// How it was set up: the `session.json` of its trajectory, plus `display`.
    pub setup: Value,
    /// Its trajectory directory.
    pub trajectory: String,
    /// Idle time after which it is closed, in milliseconds.
    pub ttl_ms: u64,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Expiry time (while live), Unix milliseconds.
    pub expires_ms: u64,
    /// `live`, `expired` or `closed`.
    pub state: String,
    /// Why it is no longer live.
    pub reason: Option<String>,
    /// When it ended, Unix milliseconds.
    pub finished_ms: Option<u64>,
    /// The URL after its last step.
    pub current_url: Option<String>,
    /// Steps recorded.
    pub steps: u64,
    /// The approval its last step waits for (JSON of the API's `ComputerApproval`).
    pub pending: Option<Value>,
}

/// One computer step to store.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputerStepRow {
    /// Step number.
    pub step: u64,
    /// `ok`, `error`, `approval_required` or `denied`.
    pub status: String,
    /// The trajectory entry (JSON of the API's `TrajectoryStep`).
    pub data: Value,
    /// Screenshot file name in the trajectory directory.
    pub screenshot: Option<String>,
    /// The URL after the step.
    pub current_url: Option<String>,
    /// The approval the session now waits for (`None` clears it).
    pub pending: Option<Value>,
    /// The approval id it asks for.
    pub asks: Option<String>,
    /// The approval it resolved, and how (`approved` or `denied`).
    pub resolves: Option<(String, String)>,
}

/// What [`Store::purge`] deleted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Purged {
    /// Executions (with their events and approvals).
    pub executions: usize,
    /// Sandboxes.
    pub sandboxes: usize,
    /// Computer sessions (with their steps and approvals).
    pub computers: usize,
    /// Trajectory directories of the deleted computer sessions.
    pub trajectories: Vec<String>,
}

/// The store: one SQLite connection behind a mutex. Every call is a few indexed row
/// operations (tens of microseconds), so callers run them inline on async tasks rather
/// than paying a thread hop each time.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock cannot leave a transaction open: rusqlite rolls back
    // an unfinished `Transaction` on drop, during the unwinding.
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where `cordon serve` keeps its database unless told otherwise:
/// `$XDG_DATA_HOME/cordon/cordon.db`, else `~/.local/share/cordon/cordon.db`.
pub fn default_db_path() -> Option<std::path::PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|dir| !dir.is_empty())
                .map(|home| std::path::PathBuf::from(home).join(".local/share"))
        })?;
    Some(data.join("cordon").join("cordon.db"))
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn language_from(name: &str) -> Language {
    Language::parse(name).unwrap_or(Language::Python)
}

/// The `type` name of an event (the serde tag).
pub fn event_type(event: &ExecutionEvent) -> &'static str {
    match event {
        ExecutionEvent::Started { .. } => "execution.started",
        ExecutionEvent::OutputDelta { .. } => "output.delta",
        ExecutionEvent::ToolCall { .. } => "tool.call",
        ExecutionEvent::ToolResult { .. } => "tool.result",
        ExecutionEvent::ApprovalRequired { .. } => "approval.required",
        ExecutionEvent::Awaiting { .. } => "execution.awaiting",
        ExecutionEvent::Completed(_) => "execution.completed",
        _ => "unknown",
    }
}

/// The `-wal` and `-shm` files SQLite keeps next to the database in WAL mode.
fn companions(path: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Makes `path` owner-only: creates it 0600 when `create` and it is missing, and clears
/// the group and other bits of an existing file (never sets any).
fn make_private(path: &Path, create: bool) -> Result<()> {
    let io = |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o600)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error) if !create && error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(error)),
    };
    let mode = file.metadata().map_err(io)?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7700))
            .map_err(io)?;
    }
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database at `path`, and recovers from an unclean
    /// stop: see [`Store::recover`].
    pub fn open(path: &Path) -> Result<Store> {
        // SQLite's names for no file (`:memory:`) or a URI it parses itself (`file:…`).
        let text = path.to_string_lossy();
        if text == ":memory:" || text.starts_with("file:") {
            return Store::setup(Connection::open(path)?);
        }
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
        }
        // Create the file before SQLite does (it would use 0644 less the umask); SQLite then
        // creates `-wal` and `-shm` with the database file's mode.
        make_private(path, true)?;
        for companion in companions(path) {
            make_private(&companion, false)?;
        }
        let store = Store::setup(Connection::open(path)?)?;
        // WAL mode created them just now, or they predate this run.
        for companion in companions(path) {
            make_private(&companion, false)?;
        }
        Ok(store)
    }

    /// A store that lives in memory only (tests, `--db :memory:`).
    pub fn in_memory() -> Result<Store> {
        Store::setup(Connection::open_in_memory()?)
    }

    fn setup(conn: Connection) -> Result<Store> {
        conn.busy_timeout(Duration::from_secs(5))?;
        // WAL: readers never block the writer, and a commit is one append to the log.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(conversations::SCHEMA)?;
        conn.execute_batch(sessions::SCHEMA)?;
        let found: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
                row.get(0)
            })
            .optional()?;
        match found.and_then(|v| v.parse::<i64>().ok()) {
            Some(version) if version > SCHEMA_VERSION => {
                return Err(StoreError::SchemaVersion { found: version });
            }
            // Older files got the new tables above; nothing else changed.
            Some(version) if version == SCHEMA_VERSION => {}
            _ => {
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)",
                    params![SCHEMA_VERSION.to_string()],
                )?;
            }
        }
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// Marks everything that was live when the previous process stopped as over: running
    /// executions end `expired` (with a final `execution.completed` event built from
    /// their log, so streams and readers see an end), pending approvals expire, live
    /// sandboxes expire (their instances and REPL state died with the process), open
    /// computer sessions expire with [`COMPUTER_RESTART_REASON`]. One transaction.
    /// Returns how many executions expired.
    pub fn recover(&self, reason: &str) -> Result<usize> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = to_i64(now_ms());
        let running: Vec<String> = {
            let mut statement = tx.prepare("SELECT id FROM executions WHERE status = ?1")?;
            let rows = statement.query_map(params![RUNNING], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for id in &running {
            let (events, last_seq) = {
                let mut statement = tx
                    .prepare("SELECT seq, data FROM events WHERE execution_id = ?1 ORDER BY seq")?;
                let rows = statement.query_map(params![id], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })?;
                let mut events = Vec::new();
                let mut last = 0;
                for row in rows {
                    let (seq, data) = row?;
                    last = seq;
                    if let Ok(event) = serde_json::from_str::<ExecutionEvent>(&data) {
                        events.push(event);
                    }
                }
                (events, last)
            };
            let result = expired_result(&events, reason);
            let event = ExecutionEvent::Completed(result.clone());
            tx.execute(
                "INSERT INTO events (execution_id, seq, type, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, last_seq + 1, event_type(&event), serde_json::to_string(&event)?, now],
            )?;
            tx.execute(
                "UPDATE executions SET status = ?2, finished_ms = ?3, result = ?4 WHERE id = ?1",
                params![
                    id,
                    ExecutionStatus::Expired.as_str(),
                    now,
                    serde_json::to_string(&result)?
                ],
            )?;
        }
        tx.execute(
            "UPDATE approvals SET status = 'expired', decided_ms = ?1 WHERE status = 'pending'",
            params![now],
        )?;
        tx.execute(
            "UPDATE sandboxes SET state = 'expired', reason = ?1 WHERE state = 'live'",
            params![reason],
        )?;
        tx.execute(
            "UPDATE computers SET state = 'expired', reason = ?1, finished_ms = ?2, pending = NULL
             WHERE state = 'live'",
            params![COMPUTER_RESTART_REASON, now],
        )?;
        tx.execute(
            "UPDATE computer_approvals SET status = 'expired', decided_ms = ?1 WHERE status = 'pending'",
            params![now],
        )?;
        tx.commit()?;
        Ok(running.len())
    }

    /// Records a new sandbox.
    pub fn insert_sandbox(&self, row: &SandboxRow) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO sandboxes (id, language, tools, limits, stateful, ttl_ms, created_ms, expires_ms, state, reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                row.id,
                row.language.as_str(),
                serde_json::to_string(&row.tools)?,
                serde_json::to_string(&row.limits)?,
                row.stateful,
                to_i64(row.ttl_ms),
                to_i64(row.created_ms),
                to_i64(row.expires_ms),
                row.state,
                row.reason,
            ],
        )?;
        Ok(())
    }

    /// A sandbox by id (any state).
    pub fn sandbox(&self, id: &str) -> Result<Option<SandboxRow>> {
        let conn = lock(&self.conn);
        let row = conn
            .query_row(
                "SELECT id, language, tools, limits, stateful, ttl_ms, created_ms, expires_ms, state, reason
                 FROM sandboxes WHERE id = ?1",
                params![id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, bool>(4)?,
                        row.get::<_, i64>(5)?,
                        row.get::<_, i64>(6)?,
                        row.get::<_, i64>(7)?,
                        row.get::<_, String>(8)?,
                        row.get::<_, Option<String>>(9)?,
                    ))
                },
            )
            .optional()?;
        let Some((id, language, tools, limits, stateful, ttl, created, expires, state, reason)) =
            row
        else {
            return Ok(None);
        };
        Ok(Some(SandboxRow {
            id,
            language: language_from(&language),
            tools: serde_json::from_str(&tools)?,
            limits: serde_json::from_str(&limits)?,
            stateful,
            ttl_ms: to_u64(ttl),
            created_ms: to_u64(created),
            expires_ms: to_u64(expires),
            state,
            reason,
        }))
    }

    /// Moves a sandbox's expiry (it was used).
    pub fn touch_sandbox(&self, id: &str, expires_ms: u64) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE sandboxes SET expires_ms = ?2 WHERE id = ?1",
            params![id, to_i64(expires_ms)],
        )?;
        Ok(())
    }

    /// Ends a sandbox (`expired` or `deleted`), with the reason.
    pub fn end_sandbox(&self, id: &str, state: &str, reason: &str) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE sandboxes SET state = ?2, reason = ?3 WHERE id = ?1 AND state = 'live'",
            params![id, state, reason],
        )?;
        Ok(())
    }

    /// Marks a sandbox deleted, whatever its state.
    pub fn mark_sandbox_deleted(&self, id: &str) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE sandboxes SET state = 'deleted', reason = 'deleted by the client' WHERE id = ?1",
            params![id],
        )?;
        Ok(())
    }

    /// Records a new execution as `running`.
    pub fn insert_execution(
        &self,
        id: &str,
        sandbox_id: &str,
        language: Language,
        code: &str,
    ) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO executions (id, sandbox_id, language, code, status, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                sandbox_id,
                language.as_str(),
                code,
                RUNNING,
                to_i64(now_ms())
            ],
        )?;
        Ok(())
    }

    /// Appends one event at `seq`. An `approval.required` also records the approval; an
    /// `execution.completed` also stores the result, ends the execution and expires its
    /// undecided approvals — all in one transaction with the event.
    pub fn append_event(&self, execution_id: &str, seq: u64, event: &ExecutionEvent) -> Result<()> {
        let data = serde_json::to_string(event)?;
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "INSERT INTO events (execution_id, seq, type, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            execution_id,
            to_i64(seq),
            event_type(event),
            data,
            now
        ])?;
        match event {
            ExecutionEvent::ApprovalRequired {
                approval_id,
                call_id,
                tool,
                input,
                reason,
            } => {
                tx.execute(
                    "INSERT OR REPLACE INTO approvals (id, execution_id, call_id, tool, input, reason, status, created_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7)",
                    params![approval_id, execution_id, call_id, tool, input.to_string(), reason, now],
                )?;
            }
            ExecutionEvent::Completed(result) => {
                tx.prepare_cached(
                    "UPDATE executions SET status = ?2, finished_ms = ?3, result = ?4 WHERE id = ?1",
                )?
                .execute(params![
                    execution_id,
                    result.status.as_str(),
                    now,
                    serde_json::to_string(result)?
                ])?;
                tx.prepare_cached(
                    "UPDATE approvals SET status = 'expired', decided_ms = ?2
                     WHERE execution_id = ?1 AND status = 'pending'",
                )?
                .execute(params![execution_id, now])?;
            }
            _ => {}
        }
        tx.commit()?;
        Ok(())
    }

    /// An execution by id.
    pub fn execution(&self, id: &str) -> Result<Option<ExecutionRow>> {
        let conn = lock(&self.conn);
        let row = conn
            .prepare_cached(
                "SELECT id, sandbox_id, language, status, created_ms, finished_ms, result
                 FROM executions WHERE id = ?1",
            )?
            .query_row(params![id], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, i64>(4)?,
                    row.get::<_, Option<i64>>(5)?,
                    row.get::<_, Option<String>>(6)?,
                ))
            })
            .optional()?;
        let Some((id, sandbox_id, language, status, created, finished, result)) = row else {
            return Ok(None);
        };
        let result = match result {
            Some(text) => Some(serde_json::from_str(&text)?),
            None => None,
        };
        Ok(Some(ExecutionRow {
            id,
            sandbox_id,
            language: language_from(&language),
            status,
            created_ms: to_u64(created),
            finished_ms: finished.map(to_u64),
            result,
        }))
    }

    /// Up to `limit` events of an execution with `seq > after`, in order.
    pub fn events_after(
        &self,
        execution_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare_cached(
            "SELECT seq, type, data FROM events WHERE execution_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = statement.query_map(
            params![
                execution_id,
                to_i64(after),
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |row| {
                Ok(EventRow {
                    seq: to_u64(row.get(0)?),
                    event_type: row.get(1)?,
                    data: row.get(2)?,
                })
            },
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// An approval by id.
    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRow>> {
        let conn = lock(&self.conn);
        let row = conn
            .query_row(
                "SELECT id, execution_id, call_id, tool, input, reason, status FROM approvals WHERE id = ?1",
                params![id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, String>(6)?,
                    ))
                },
            )
            .optional()?;
        Ok(row.map(
            |(id, execution_id, call_id, tool, input, reason, status)| ApprovalRow {
                id,
                execution_id,
                call_id,
                tool,
                input: serde_json::from_str(&input).unwrap_or(Value::Null),
                reason,
                status,
            },
        ))
    }

    /// Pending approvals of an execution, oldest first.
    pub fn pending_approvals(&self, execution_id: &str) -> Result<Vec<ApprovalRow>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare_cached(
            "SELECT id FROM approvals WHERE execution_id = ?1 AND status = 'pending' ORDER BY created_ms, id",
        )?;
        let ids: Vec<String> = statement
            .query_map(params![execution_id], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        drop(statement);
        drop(conn);
        let mut rows = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(row) = self.approval(&id)? {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    /// Records a decision, if the approval is still pending. Returns whether it was.
    pub fn decide_approval(&self, id: &str, status: &str) -> Result<bool> {
        let changed = lock(&self.conn).execute(
            "UPDATE approvals SET status = ?2, decided_ms = ?3 WHERE id = ?1 AND status = 'pending'",
            params![id, status, to_i64(now_ms())],
        )?;
        Ok(changed > 0)
    }

    /// Deletes an execution with its events and approvals (one transaction).
    pub fn delete_execution(&self, id: &str) -> Result<bool> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM events WHERE execution_id = ?1", params![id])?;
        tx.execute("DELETE FROM approvals WHERE execution_id = ?1", params![id])?;
        let deleted = tx.execute("DELETE FROM executions WHERE id = ?1", params![id])?;
        tx.commit()?;
        Ok(deleted > 0)
    }

    /// Records a new computer session as `live`.
    pub fn insert_computer(&self, row: &ComputerRow) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO computers (id, setup, trajectory, ttl_ms, created_ms, expires_ms, state, reason, current_url, steps)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                row.id,
                row.setup.to_string(),
                row.trajectory,
                to_i64(row.ttl_ms),
                to_i64(row.created_ms),
                to_i64(row.expires_ms),
                row.state,
                row.reason,
                row.current_url,
                to_i64(row.steps),
            ],
        )?;
        Ok(())
    }

    /// A computer session by id (any state).
    pub fn computer(&self, id: &str) -> Result<Option<ComputerRow>> {
        let conn = lock(&self.conn);
        let row = conn
            .prepare_cached(
                "SELECT id, setup, trajectory, ttl_ms, created_ms, expires_ms, state, reason,
                        finished_ms, current_url, steps, pending
                 FROM computers WHERE id = ?1",
            )?
            .query_row(params![id], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                    row.get::<_, i64>(5)?,
                    row.get::<_, String>(6)?,
                    row.get::<_, Option<String>>(7)?,
                    row.get::<_, Option<i64>>(8)?,
                    row.get::<_, Option<String>>(9)?,
                    row.get::<_, i64>(10)?,
                    row.get::<_, Option<String>>(11)?,
                ))
            })
            .optional()?;
        let Some((
            id,
            setup,
            trajectory,
            ttl,
            created,
            expires,
            state,
            reason,
            finished,
            current_url,
            steps,
            pending,
        )) = row
        else {
            return Ok(None);
        };
        Ok(Some(ComputerRow {
            id,
            setup: serde_json::from_str(&setup)?,
            trajectory,
            ttl_ms: to_u64(ttl),
            created_ms: to_u64(created),
            expires_ms: to_u64(expires),
            state,
            reason,
            finished_ms: finished.map(to_u64),
            current_url,
            steps: to_u64(steps),
            pending: match pending {
                Some(text) => Some(serde_json::from_str(&text)?),
                None => None,
            },
        }))
    }

    /// Appends a computer step, in one transaction with what it changes: the session's
    /// step count, URL and pending approval, the approval it asks for (recorded
    /// `pending`) and the one it resolves (recorded `approved` or `denied`).
    pub fn append_computer_step(&self, computer_id: &str, step: &ComputerStepRow) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "INSERT INTO computer_steps (computer_id, step, status, data, screenshot, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            computer_id,
            to_i64(step.step),
            step.status,
            step.data.to_string(),
            step.screenshot,
            now
        ])?;
        tx.prepare_cached(
            "UPDATE computers SET steps = ?2, current_url = COALESCE(?3, current_url),
                    pending = CASE WHEN state = 'live' THEN ?4 END
             WHERE id = ?1",
        )?
        .execute(params![
            computer_id,
            to_i64(step.step),
            step.current_url,
            step.pending.as_ref().map(Value::to_string),
        ])?;
        if let Some((approval_id, decision)) = &step.resolves {
            tx.execute(
                "UPDATE computer_approvals SET status = ?2, decided_ms = ?3 WHERE id = ?1 AND status = 'pending'",
                params![approval_id, decision, now],
            )?;
        }
        if let Some(approval_id) = &step.asks {
            tx.execute(
                "INSERT INTO computer_approvals (id, computer_id, step, status, created_ms)
                 VALUES (?1, ?2, ?3, 'pending', ?4)",
                params![approval_id, computer_id, to_i64(step.step), now],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Moves a live computer session's expiry (it was used).
    pub fn touch_computer(&self, id: &str, expires_ms: u64) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE computers SET expires_ms = ?2 WHERE id = ?1 AND state = 'live'",
            params![id, to_i64(expires_ms)],
        )?;
        Ok(())
    }

    /// Ends a live computer session (`expired` or `closed`) with the reason; its pending
    /// approval expires.
    pub fn end_computer(&self, id: &str, state: &str, reason: &str) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE computers SET state = ?2, reason = ?3, finished_ms = ?4, pending = NULL
             WHERE id = ?1 AND state = 'live'",
            params![id, state, reason, now],
        )?;
        tx.execute(
            "UPDATE computer_approvals SET status = 'expired', decided_ms = ?2
             WHERE computer_id = ?1 AND status = 'pending'",
            params![id, now],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Expires a pending approval of a live computer session that can no longer be decided
    /// (its decision was taken, but the step failed): the session stops showing it.
    pub fn expire_computer_approval(&self, computer_id: &str, approval_id: &str) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let expired = tx.execute(
            "UPDATE computer_approvals SET status = 'expired', decided_ms = ?3
             WHERE id = ?1 AND computer_id = ?2 AND status = 'pending'",
            params![approval_id, computer_id, now],
        )?;
        if expired > 0 {
            tx.execute(
                "UPDATE computers SET pending = NULL WHERE id = ?1",
                params![computer_id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Steps of a computer session with `step > after`, in order: (step, JSON).
    pub fn computer_steps(&self, computer_id: &str, after: u64) -> Result<Vec<(u64, Value)>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare_cached(
            "SELECT step, data FROM computer_steps WHERE computer_id = ?1 AND step > ?2 ORDER BY step",
        )?;
        let rows = statement.query_map(params![computer_id, to_i64(after)], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut steps = Vec::new();
        for row in rows {
            let (step, data) = row?;
            steps.push((to_u64(step), serde_json::from_str(&data)?));
        }
        Ok(steps)
    }

    /// The screenshot file name of one step (`None`: no such step, or it has none).
    pub fn computer_screenshot(&self, computer_id: &str, step: u64) -> Result<Option<String>> {
        let conn = lock(&self.conn);
        let name = conn
            .query_row(
                "SELECT screenshot FROM computer_steps WHERE computer_id = ?1 AND step = ?2",
                params![computer_id, to_i64(step)],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()?;
        Ok(name.flatten())
    }

    /// A computer approval: (computer id, status).
    pub fn computer_approval(&self, id: &str) -> Result<Option<(String, String)>> {
        let conn = lock(&self.conn);
        Ok(conn
            .query_row(
                "SELECT computer_id, status FROM computer_approvals WHERE id = ?1",
                params![id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?)
    }

    /// Deletes a computer session's record, steps and approvals (one transaction); returns
    /// its trajectory directory, for the caller to remove.
    pub fn delete_computer(&self, id: &str) -> Result<Option<String>> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let dir: Option<String> = tx
            .query_row(
                "SELECT trajectory FROM computers WHERE id = ?1",
                params![id],
                |row| row.get(0),
            )
            .optional()?;
        tx.execute(
            "DELETE FROM computer_steps WHERE computer_id = ?1",
            params![id],
        )?;
        tx.execute(
            "DELETE FROM computer_approvals WHERE computer_id = ?1",
            params![id],
        )?;
        tx.execute("DELETE FROM computers WHERE id = ?1", params![id])?;
        tx.commit()?;
        Ok(dir)
    }

    /// A value of the `meta` table.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(lock(&self.conn)
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                params![key],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Sets (or with `None` removes) a value of the `meta` table.
    pub fn set_meta(&self, key: &str, value: Option<&str>) -> Result<()> {
        let conn = lock(&self.conn);
        match value {
            Some(value) => conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, value],
            )?,
            None => conn.execute("DELETE FROM meta WHERE key = ?1", params![key])?,
        };
        Ok(())
    }

    /// Deletes what ended before `cutoff_ms` (Unix ms): finished executions with their
    /// events and approvals, sandboxes that are no longer live, and computer sessions that
    /// are over with their steps and approvals. Running executions and live sandboxes and
    /// sessions are never touched. One transaction; returns what went, including the
    /// trajectory directories for the caller to remove.
    pub fn purge(&self, cutoff_ms: u64) -> Result<Purged> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let old = "SELECT id FROM executions WHERE status != 'running' AND finished_ms < ?1";
        tx.execute(
            &format!("DELETE FROM events WHERE execution_id IN ({old})"),
            params![cutoff],
        )?;
        tx.execute(
            &format!("DELETE FROM approvals WHERE execution_id IN ({old})"),
            params![cutoff],
        )?;
        let executions = tx.execute(
            "DELETE FROM executions WHERE status != 'running' AND finished_ms < ?1",
            params![cutoff],
        )?;
        // A sandbox that is no longer live ended at its expiry at the latest.
        let sandboxes = tx.execute(
            "DELETE FROM sandboxes WHERE state != 'live' AND expires_ms < ?1",
            params![cutoff],
        )?;
        let trajectories: Vec<String> = {
            let mut statement = tx.prepare(
                "SELECT trajectory FROM computers WHERE state != 'live' AND finished_ms < ?1",
            )?;
            let rows = statement.query_map(params![cutoff], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let old = "SELECT id FROM computers WHERE state != 'live' AND finished_ms < ?1";
        tx.execute(
            &format!("DELETE FROM computer_steps WHERE computer_id IN ({old})"),
            params![cutoff],
        )?;
        tx.execute(
            &format!("DELETE FROM computer_approvals WHERE computer_id IN ({old})"),
            params![cutoff],
        )?;
        let computers = tx.execute(
            "DELETE FROM computers WHERE state != 'live' AND finished_ms < ?1",
            params![cutoff],
        )?;
        tx.commit()?;
        Ok(Purged {
            executions,
            sandboxes,
            computers,
            trajectories,
        })
    }
}

/// The result an execution gets when the process running it went away: whatever its log
/// recorded (output, tool calls) and `expired` with the reason.
fn expired_result(events: &[ExecutionEvent], reason: &str) -> ExecutionResult {
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut calls: Vec<ToolCallRecord> = Vec::new();
    for event in events {
        match event {
            ExecutionEvent::OutputDelta { stream, text } => match stream {
                Stream::Stdout => stdout.push_str(text),
                Stream::Stderr => stderr.push_str(text),
            },
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus,
                ..
            } => calls.push(ToolCallRecord {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
                is_error: true,
                duration_us: 0,
                locus: *locus,
            }),
            ExecutionEvent::ToolResult {
                id,
                name,
                is_error,
                duration_us,
                ..
            } => match calls.iter_mut().find(|call| &call.id == id) {
                Some(call) => {
                    call.is_error = *is_error;
                    call.duration_us = *duration_us;
                }
                // Rejected before it ran: there was no `tool.call`.
                None => calls.push(ToolCallRecord {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Null,
                    is_error: *is_error,
                    duration_us: *duration_us,
                    locus: Locus::Host,
                }),
            },
            _ => {}
        }
    }
    ExecutionResult {
        status: ExecutionStatus::Expired,
        limit: None,
        stdout,
        stderr,
        result: Value::Null,
        result_encoding: None,
        error: Some(ErrorInfo {
            error_type: "Expired".to_owned(),
            message: reason.to_owned(),
            traceback: String::new(),
        }),
        tool_calls: calls,
        usage: Usage::default(),
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn recovery_expires_running_executions_with_a_final_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cordon.db");
        {
            let store = Store::open(&path).unwrap();
            store
                .insert_execution("exec_1", "sbx_1", Language::PythonLite, "print(1)")
                .unwrap();
            let delta = ExecutionEvent::OutputDelta {
                stream: Stream::Stdout,
                text: "1\n".into(),
            };
            store.append_event("exec_1", 1, &delta).unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.recover("the server restarted").unwrap(), 1);
        let row = store.execution("exec_1").unwrap().unwrap();
        assert_eq!(row.status, "expired");
        let result = row.result.unwrap();
        assert_eq!(result.stdout, "1\n");
        assert_eq!(result.error.unwrap().message, "the server restarted");
        let events = store.events_after("exec_1", 0, 10).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].event_type, "execution.completed");
        assert_eq!(store.recover("again").unwrap(), 0);
    }

    fn computer(id: &str) -> ComputerRow {
        ComputerRow {
            id: id.into(),
            setup: serde_json::json!({"url": "http://127.0.0.1:9/"}),
            trajectory: format!("/tmp/trajectories/{id}"),
            ttl_ms: 1000,
            created_ms: 1,
            expires_ms: 1001,
            state: "live".into(),
            reason: None,
            finished_ms: None,
            current_url: None,
            steps: 0,
            pending: None,
        }
    }

    fn step(n: u64, asks: Option<&str>, resolves: Option<(&str, &str)>) -> ComputerStepRow {
        ComputerStepRow {
            step: n,
            status: if asks.is_some() {
                "approval_required"
            } else {
                "ok"
            }
            .into(),
            data: serde_json::json!({"step": n}),
            screenshot: Some(format!("step-{n:04}.png")),
            current_url: Some(format!("http://127.0.0.1:9/#{n}")),
            pending: asks.map(|id| serde_json::json!({"approval_id": id})),
            asks: asks.map(str::to_owned),
            resolves: resolves.map(|(a, b)| (a.to_owned(), b.to_owned())),
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn the_database_and_its_wal_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("cordon.db");
        let store = Store::open(&path).unwrap();
        store.insert_computer(&computer("cmp_a")).unwrap();
        assert_eq!(
            mode(path.parent().unwrap()),
            0o700,
            "the directory Cordon created"
        );
        assert_eq!(mode(&path), 0o600);
        for companion in companions(&path) {
            assert!(companion.exists(), "{} (WAL mode)", companion.display());
            assert_eq!(mode(&companion), 0o600, "{}", companion.display());
        }
    }

    #[test]
    fn existing_wider_files_are_tightened_and_an_existing_directory_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("cordon.db");
        drop(Store::open(&path).unwrap());
        let paths = [
            path.clone(),
            companions(&path)[0].clone(),
            companions(&path)[1].clone(),
        ];
        for file in &paths {
            if !file.exists() {
                std::fs::write(file, b"").unwrap();
            }
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let store = Store::open(&path).unwrap();
        store.insert_computer(&computer("cmp_b")).unwrap();
        for file in &paths {
            assert_eq!(mode(file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(dir.path()), 0o755, "not Cordon's directory");
        // Owner bits are never added.
        drop(store);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        let _ = Store::open(&path);
        assert_eq!(mode(&path), 0o400);
    }

    #[test]
    fn computer_steps_and_approvals_survive_a_restart_and_the_session_expires() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cordon.db");
        {
            let store = Store::open(&path).unwrap();
            store.insert_computer(&computer("cmp_1")).unwrap();
            store
                .append_computer_step("cmp_1", &step(1, None, None))
                .unwrap();
            store
                .append_computer_step("cmp_1", &step(2, Some("appr_1"), None))
                .unwrap();
            let row = store.computer("cmp_1").unwrap().unwrap();
            assert_eq!(row.steps, 2);
            assert_eq!(row.pending.unwrap()["approval_id"], "appr_1");
            assert_eq!(
                store.computer_approval("appr_1").unwrap().unwrap().1,
                "pending"
            );
        }
        let store = Store::open(&path).unwrap();
        store.recover("restarted").unwrap();
        let row = store.computer("cmp_1").unwrap().unwrap();
        assert_eq!(row.state, "expired");
        assert_eq!(row.reason.as_deref(), Some(COMPUTER_RESTART_REASON));
        assert_eq!(row.pending, None);
        assert_eq!(
            store.computer_approval("appr_1").unwrap().unwrap().1,
            "expired"
        );
        let steps = store.computer_steps("cmp_1", 0).unwrap();
        assert_eq!(steps.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            store.computer_screenshot("cmp_1", 2).unwrap().as_deref(),
            Some("step-0002.png")
        );
    }

    #[test]
    fn a_spent_computer_approval_expires_and_the_session_stops_showing_it() {
        let store = Store::in_memory().unwrap();
        store.insert_computer(&computer("cmp_1")).unwrap();
        store
            .append_computer_step("cmp_1", &step(1, Some("appr_1"), None))
            .unwrap();
        // Another session's id does not touch it.
        store.expire_computer_approval("cmp_2", "appr_1").unwrap();
        assert!(store.computer("cmp_1").unwrap().unwrap().pending.is_some());
        store.expire_computer_approval("cmp_1", "appr_1").unwrap();
        let row = store.computer("cmp_1").unwrap().unwrap();
        assert_eq!((row.state.as_str(), row.pending), ("live", None));
        assert_eq!(
            store.computer_approval("appr_1").unwrap().unwrap(),
            ("cmp_1".to_owned(), "expired".to_owned())
        );
    }

    #[test]
    fn purge_deletes_what_ended_before_the_cutoff_and_nothing_live() {
        let store = Store::in_memory().unwrap();
        for id in ["exec_old", "exec_running"] {
            store
                .insert_execution(id, "sbx_1", Language::PythonLite, "1")
                .unwrap();
        }
        let done = ExecutionEvent::Completed(expired_result(&[], "x"));
        store.append_event("exec_old", 1, &done).unwrap();
        store.insert_computer(&computer("cmp_old")).unwrap();
        store.insert_computer(&computer("cmp_live")).unwrap();
        store
            .append_computer_step("cmp_old", &step(1, Some("appr_9"), None))
            .unwrap();
        store.end_computer("cmp_old", "closed", "deleted").unwrap();
        // Nothing ended before the epoch.
        assert_eq!(store.purge(0).unwrap(), Purged::default());
        let purged = store.purge(now_ms() + 1).unwrap();
        assert_eq!((purged.executions, purged.computers), (1, 1));
        assert_eq!(purged.trajectories, ["/tmp/trajectories/cmp_old"]);
        assert!(store.execution("exec_old").unwrap().is_none());
        assert!(store.events_after("exec_old", 0, 10).unwrap().is_empty());
        assert!(store.execution("exec_running").unwrap().is_some());
        assert!(store.computer("cmp_old").unwrap().is_none());
        assert!(store.computer_approval("appr_9").unwrap().is_none());
        assert!(store.computer_steps("cmp_old", 0).unwrap().is_empty());
        assert!(store.computer("cmp_live").unwrap().is_some());
    }
}
