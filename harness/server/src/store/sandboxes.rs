//! Sandboxes: one row per sandbox with its language, tools, limits and lifetime.

use cordon_protocol::execution::{Language, Limits};
use cordon_protocol::tool::ToolDeclaration;
use rusqlite::{OptionalExtension, params};

use super::columns::{language_from, row_tuple, to_i64, to_u64};
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
    /// `live`, `expired` or `deleted`.
    pub state: String,
    /// Why it is no longer live.
    pub reason: Option<String>,
}

impl SqliteStore {
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
                row_tuple::<(String, String, String, String, bool, i64, i64, i64, String, Option<String>)>,
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
}
