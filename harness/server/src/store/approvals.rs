//! Approvals of executions: one row per tool call waiting for a decision, and the decision.

use cordon_core::clock::now_ms;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::columns::{row_tuple, to_i64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

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

impl SqliteStore {
    /// An approval by id.
    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRow>> {
        let conn = lock(&self.conn);
        let row = conn
            .query_row(
                "SELECT id, execution_id, call_id, tool, input, reason, status FROM approvals WHERE id = ?1",
                params![id],
                row_tuple::<(String, String, String, String, String, String, String)>,
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
}
