//! Paused sandboxes in PostgreSQL: the SQLite backend's compare-and-set state changes
//! (`live` ↔ `paused`, ending a paused one) and the reaper's query.

use super::connection::PostgresStore;
use super::executions::{SANDBOX_COLUMNS, sandbox_row};
use crate::store::columns::to_i64;
use crate::store::error::Result;
use crate::store::sandboxes::SandboxRow;

impl PostgresStore {
    pub(crate) async fn pause_sandbox(
        &self,
        id: &str,
        paused_bytes: u64,
        paused_key: &str,
        expires_ms: u64,
    ) -> Result<bool> {
        let changed = self
            .pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET state = 'paused', paused_bytes = $2, paused_key = $3,
                     expires_ms = $4
                 WHERE id = $1 AND state = 'live'",
                &[&id, &to_i64(paused_bytes), &paused_key, &to_i64(expires_ms)],
            )
            .await?;
        Ok(changed > 0)
    }

    pub(crate) async fn resume_sandbox(&self, id: &str, expires_ms: u64) -> Result<bool> {
        let changed = self
            .pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET state = 'live', paused_bytes = NULL, paused_key = NULL,
                     expires_ms = $2, owner = $3
                 WHERE id = $1 AND state = 'paused'",
                &[&id, &to_i64(expires_ms), &self.owner()],
            )
            .await?;
        Ok(changed > 0)
    }

    pub(crate) async fn end_paused_sandbox(
        &self,
        id: &str,
        state: &str,
        reason: &str,
    ) -> Result<bool> {
        let changed = self
            .pool
            .get()
            .await?
            .execute(
                "UPDATE sandboxes SET state = $2, reason = $3 WHERE id = $1 AND state = 'paused'",
                &[&id, &state, &reason],
            )
            .await?;
        Ok(changed > 0)
    }

    pub(crate) async fn paused_sandboxes_expired(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<SandboxRow>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                &format!(
                    "SELECT {SANDBOX_COLUMNS} FROM sandboxes
                     WHERE state = 'paused' AND expires_ms <= $1 ORDER BY expires_ms LIMIT $2"
                ),
                &[&to_i64(now_ms), &i64::try_from(limit).unwrap_or(i64::MAX)],
            )
            .await?;
        rows.iter().map(sandbox_row).collect()
    }
}
