//! Executions: one row per execution with its code, status and final result.

use cordon_core::clock::now_ms;
use cordon_protocol::execution::{ExecutionResult, Language};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::columns::{language_from, row_tuple, to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// Status of an execution that has not ended, as stored.
pub const RUNNING: &str = "running";

/// An execution as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// Its id.
    pub id: String,
    /// The sandbox it ran in.
    pub sandbox_id: String,
    /// Guest language.
    pub language: Language,
    /// `running`, or the final
    /// [`ExecutionStatus`](cordon_protocol::execution::ExecutionStatus) name.
    pub status: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// End time, Unix milliseconds.
    pub finished_ms: Option<u64>,
    /// The final result, once it ended.
    pub result: Option<ExecutionResult>,
}

/// The columns [`SqliteStore::execution`] reads, in the order of its `SELECT`.
type ExecutionColumns = (
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<String>,
);

impl SqliteStore {
    /// Records a new execution as `running`.
    pub fn insert_execution(
        &self,
        id: &str,
        sandbox_id: &str,
        language: Language,
        code: &str,
    ) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO executions (id, sandbox_id, language, code, status, created_ms, owner)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                sandbox_id,
                language.as_str(),
                code,
                RUNNING,
                to_i64(now_ms()),
                self.owner(),
            ],
        )?;
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
            .query_row(params![id], row_tuple::<ExecutionColumns>)
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
