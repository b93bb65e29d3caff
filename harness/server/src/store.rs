//! The SQLite store behind the HTTP API: sandboxes, executions, the append-only event log
//! and approvals.
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
//! Why here and not in `cordon-core`: the store's rows are the HTTP API's resources, and
//! `rusqlite` compiles SQLite from C; in core it would be built into every crate that only
//! wants the tool layer (the sandbox, computer use, the guest tests).

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cordon_protocol::execution::{
    ErrorInfo, ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits, Stream,
    ToolCallRecord, Usage,
};
use cordon_protocol::tool::{Locus, ToolDeclaration};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

/// Schema version written to `meta`; bump with a migration when the tables change.
const SCHEMA_VERSION: i64 = 1;

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
";

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
    /// The database's directory could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
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

/// Now, in Unix milliseconds.
pub fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
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

impl Store {
    /// Opens (creating if needed) the database at `path`, and recovers from an unclean
    /// stop: see [`Store::recover`].
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        Store::setup(Connection::open(path)?)
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
        let found: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
                row.get(0)
            })
            .optional()?;
        match found.and_then(|v| v.parse::<i64>().ok()) {
            Some(version) if version > SCHEMA_VERSION => {
                return Err(StoreError::SchemaVersion { found: version });
            }
            Some(_) => {}
            None => {
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
    /// sandboxes expire (their instances and REPL state died with the process). One
    /// transaction. Returns how many executions expired.
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
                .insert_execution("exec_1", "sbx_1", Language::Python, "print(1)")
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
}
