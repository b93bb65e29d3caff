//! Executions, their event log and approvals, and sandboxes, in PostgreSQL: the same rows
//! and the same transactions as the SQLite files of those names.

use cordon_core::clock::now_ms;
use cordon_protocol::execution::{ExecutionEvent, Language};
use serde_json::Value;

use super::connection::PostgresStore;
use crate::store::approvals::ApprovalRow;
use crate::store::columns::{language_from, to_i64, to_u64};
use crate::store::error::Result;
use crate::store::events::{EventRow, event_type};
use crate::store::executions::{ExecutionRow, RUNNING};
use crate::store::sandboxes::SandboxRow;

impl PostgresStore {
    pub(crate) async fn insert_execution(
        &self,
        id: &str,
        sandbox_id: &str,
        language: Language,
        code: &str,
    ) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO executions (id, sandbox_id, language, code, status, created_ms, owner)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &id,
                    &sandbox_id,
                    &language.as_str(),
                    &code,
                    &RUNNING,
                    &to_i64(now_ms()),
                    &self.owner(),
                ],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn execution(&self, id: &str) -> Result<Option<ExecutionRow>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT id, sandbox_id, language, status, created_ms, finished_ms, result
                 FROM executions WHERE id = $1",
                &[&id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let result: Option<String> = row.try_get(6)?;
        Ok(Some(ExecutionRow {
            id: row.try_get(0)?,
            sandbox_id: row.try_get(1)?,
            language: language_from(row.try_get(2)?),
            status: row.try_get(3)?,
            created_ms: to_u64(row.try_get(4)?),
            finished_ms: row.try_get::<_, Option<i64>>(5)?.map(to_u64),
            result: match result {
                Some(text) => Some(serde_json::from_str(&text)?),
                None => None,
            },
        }))
    }

    pub(crate) async fn delete_execution(&self, id: &str) -> Result<bool> {
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute("DELETE FROM events WHERE execution_id = $1", &[&id])
            .await?;
        tx.execute("DELETE FROM approvals WHERE execution_id = $1", &[&id])
            .await?;
        let deleted = tx
            .execute("DELETE FROM executions WHERE id = $1", &[&id])
            .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }

    pub(crate) async fn append_event(
        &self,
        execution_id: &str,
        seq: u64,
        event: &ExecutionEvent,
    ) -> Result<()> {
        let data = serde_json::to_string(event)?;
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO events (execution_id, seq, type, data, at_ms) VALUES ($1, $2, $3, $4, $5)",
            &[&execution_id, &to_i64(seq), &event_type(event), &data, &now],
        )
        .await?;
        match event {
            ExecutionEvent::ApprovalRequired {
                approval_id,
                call_id,
                tool,
                input,
                reason,
            } => {
                // SQLite's `INSERT OR REPLACE`: the whole row anew.
                tx.execute(
                    "INSERT INTO approvals
                        (id, execution_id, call_id, tool, input, reason, status, created_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)
                     ON CONFLICT (id) DO UPDATE SET execution_id = EXCLUDED.execution_id,
                        call_id = EXCLUDED.call_id, tool = EXCLUDED.tool,
                        input = EXCLUDED.input, reason = EXCLUDED.reason,
                        status = EXCLUDED.status, created_ms = EXCLUDED.created_ms,
                        decided_ms = NULL",
                    &[
                        approval_id,
                        &execution_id,
                        call_id,
                        tool,
                        &input.to_string(),
                        reason,
                        &now,
                    ],
                )
                .await?;
            }
            ExecutionEvent::Completed(result) => {
                tx.execute(
                    "UPDATE executions SET status = $2, finished_ms = $3, result = $4 WHERE id = $1",
                    &[
                        &execution_id,
                        &result.status.as_str(),
                        &now,
                        &serde_json::to_string(result)?,
                    ],
                )
                .await?;
                tx.execute(
                    "UPDATE approvals SET status = 'expired', decided_ms = $2
                     WHERE execution_id = $1 AND status = 'pending'",
                    &[&execution_id, &now],
                )
                .await?;
            }
            _ => {}
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn events_after(
        &self,
        execution_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT seq, type, data FROM events WHERE execution_id = $1 AND seq > $2
                 ORDER BY seq LIMIT $3",
                &[
                    &execution_id,
                    &to_i64(after),
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(EventRow {
                    seq: to_u64(row.try_get(0)?),
                    event_type: row.try_get(1)?,
                    data: row.try_get(2)?,
                })
            })
            .collect()
    }

    pub(crate) async fn approval(&self, id: &str) -> Result<Option<ApprovalRow>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT id, execution_id, call_id, tool, input, reason, status
                 FROM approvals WHERE id = $1",
                &[&id],
            )
            .await?;
        row.as_ref().map(approval_row).transpose()
    }

    pub(crate) async fn pending_approvals(&self, execution_id: &str) -> Result<Vec<ApprovalRow>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT id, execution_id, call_id, tool, input, reason, status FROM approvals
                 WHERE execution_id = $1 AND status = 'pending' ORDER BY created_ms, id",
                &[&execution_id],
            )
            .await?;
        rows.iter().map(approval_row).collect()
    }

    pub(crate) async fn decide_approval(&self, id: &str, status: &str) -> Result<bool> {
        let changed = self
            .pool
            .get()
            .await?
            .execute(
                "UPDATE approvals SET status = $2, decided_ms = $3
                 WHERE id = $1 AND status = 'pending'",
                &[&id, &status, &to_i64(now_ms())],
            )
            .await?;
        Ok(changed > 0)
    }

    pub(crate) async fn insert_sandbox(&self, row: &SandboxRow) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO sandboxes (id, language, tools, limits, stateful, ttl_ms, created_ms,
                    expires_ms, state, reason, paused_bytes, paused_key, owner)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                &[
                    &row.id,
                    &row.language.as_str(),
                    &serde_json::to_string(&row.tools)?,
                    &serde_json::to_string(&row.limits)?,
                    &row.stateful,
                    &to_i64(row.ttl_ms),
                    &to_i64(row.created_ms),
                    &to_i64(row.expires_ms),
                    &row.state,
                    &row.reason,
                    &row.paused_bytes.map(to_i64),
                    &row.paused_key,
                    &self.owner(),
                ],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn sandbox(&self, id: &str) -> Result<Option<SandboxRow>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                &format!("SELECT {SANDBOX_COLUMNS} FROM sandboxes WHERE id = $1"),
                &[&id],
            )
            .await?;
        row.as_ref().map(sandbox_row).transpose()
    }

    pub(crate) async fn touch_sandbox(&self, id: &str, expires_ms: u64) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET expires_ms = $2 WHERE id = $1",
                &[&id, &to_i64(expires_ms)],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn end_sandbox(&self, id: &str, state: &str, reason: &str) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET state = $2, reason = $3 WHERE id = $1 AND state = 'live'",
                &[&id, &state, &reason],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn mark_sandbox_deleted(&self, id: &str) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET state = 'deleted', reason = 'deleted by the client'
                 WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(())
    }
}

/// The columns [`sandbox_row`] reads, in its order.
pub(super) const SANDBOX_COLUMNS: &str = "id, language, tools, limits, stateful, ttl_ms, \
    created_ms, expires_ms, state, reason, paused_bytes, paused_key";

/// A row of [`SANDBOX_COLUMNS`].
pub(super) fn sandbox_row(row: &tokio_postgres::Row) -> Result<SandboxRow> {
    let paused_bytes: Option<i64> = row.try_get(10)?;
    Ok(SandboxRow {
        id: row.try_get(0)?,
        language: language_from(row.try_get(1)?),
        tools: serde_json::from_str(row.try_get(2)?)?,
        limits: serde_json::from_str(row.try_get(3)?)?,
        stateful: row.try_get(4)?,
        ttl_ms: to_u64(row.try_get(5)?),
        created_ms: to_u64(row.try_get(6)?),
        expires_ms: to_u64(row.try_get(7)?),
        state: row.try_get(8)?,
        reason: row.try_get(9)?,
        paused_bytes: paused_bytes.map(to_u64),
        paused_key: row.try_get(11)?,
    })
}

fn approval_row(row: &tokio_postgres::Row) -> Result<ApprovalRow> {
    let input: &str = row.try_get(4)?;
    Ok(ApprovalRow {
        id: row.try_get(0)?,
        execution_id: row.try_get(1)?,
        call_id: row.try_get(2)?,
        tool: row.try_get(3)?,
        input: serde_json::from_str(input).unwrap_or(Value::Null),
        reason: row.try_get(5)?,
        status: row.try_get(6)?,
    })
}
