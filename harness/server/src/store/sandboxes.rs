//! Sandboxes: one row per sandbox with its language, tools, limits and lifetime.

use cordon_protocol::execution::{Language, Limits};
use cordon_protocol::tool::ToolDeclaration;
use rusqlite::params;

use super::columns::{language_from, to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

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
    /// `live`, `paused`, `expired`, `interrupted` or `deleted`.
    pub state: String,
    /// Why it is no longer live.
    pub reason: Option<String>,
    /// Size of its paused state in the object store, while `paused`.
    pub paused_bytes: Option<u64>,
    /// The object store key of its paused state (`paused/<id>`), while `paused`.
    pub paused_key: Option<String>,
}

/// The columns [`read_sandbox`] reads, in its order.
pub(super) const SANDBOX_COLUMNS: &str = "id, language, tools, limits, stateful, ttl_ms, \
    created_ms, expires_ms, state, reason, paused_bytes, paused_key";

/// A row of [`SANDBOX_COLUMNS`].
pub(super) fn read_sandbox(row: &rusqlite::Row<'_>) -> Result<SandboxRow> {
    let paused_bytes: Option<i64> = row.get(10)?;
    Ok(SandboxRow {
        id: row.get(0)?,
        language: language_from(&row.get::<_, String>(1)?),
        tools: serde_json::from_str(&row.get::<_, String>(2)?)?,
        limits: serde_json::from_str(&row.get::<_, String>(3)?)?,
        stateful: row.get(4)?,
        ttl_ms: to_u64(row.get(5)?),
        created_ms: to_u64(row.get(6)?),
        expires_ms: to_u64(row.get(7)?),
        state: row.get(8)?,
        reason: row.get(9)?,
        paused_bytes: paused_bytes.map(to_u64),
        paused_key: row.get(11)?,
    })
}

impl SqliteStore {
    /// Records a new sandbox.
    pub fn insert_sandbox(&self, row: &SandboxRow) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO sandboxes (id, language, tools, limits, stateful, ttl_ms, created_ms, expires_ms, state, reason, paused_bytes, paused_key, owner)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
                row.paused_bytes.map(to_i64),
                row.paused_key,
                self.owner(),
            ],
        )?;
        Ok(())
    }

    /// A sandbox by id (any state).
    pub fn sandbox(&self, id: &str) -> Result<Option<SandboxRow>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare(&format!(
            "SELECT {SANDBOX_COLUMNS} FROM sandboxes WHERE id = ?1"
        ))?;
        let mut rows = statement.query(params![id])?;
        match rows.next()? {
            Some(row) => Ok(Some(read_sandbox(row)?)),
            None => Ok(None),
        }
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
}
