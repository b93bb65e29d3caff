//! Computer sessions, their steps and approvals, in PostgreSQL: the same rows and the
//! same transactions as the SQLite `computers.rs`.

use cordon_core::clock::now_ms;
use serde_json::Value;

use super::connection::PostgresStore;
use crate::store::columns::{to_i64, to_u64};
use crate::store::computers::{ComputerRow, ComputerStepRow};
use crate::store::error::Result;

impl PostgresStore {
    pub(crate) async fn insert_computer(&self, row: &ComputerRow) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO computers (id, setup, trajectory, ttl_ms, created_ms, expires_ms,
                    state, reason, current_url, steps, owner)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                &[
                    &row.id,
                    &row.setup.to_string(),
                    &row.trajectory,
                    &to_i64(row.ttl_ms),
                    &to_i64(row.created_ms),
                    &to_i64(row.expires_ms),
                    &row.state,
                    &row.reason,
                    &row.current_url,
                    &to_i64(row.steps),
                    &self.owner(),
                ],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn computer(&self, id: &str) -> Result<Option<ComputerRow>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT id, setup, trajectory, ttl_ms, created_ms, expires_ms, state, reason,
                        finished_ms, current_url, steps, pending
                 FROM computers WHERE id = $1",
                &[&id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let pending: Option<&str> = row.try_get(11)?;
        Ok(Some(ComputerRow {
            id: row.try_get(0)?,
            setup: serde_json::from_str(row.try_get(1)?)?,
            trajectory: row.try_get(2)?,
            ttl_ms: to_u64(row.try_get(3)?),
            created_ms: to_u64(row.try_get(4)?),
            expires_ms: to_u64(row.try_get(5)?),
            state: row.try_get(6)?,
            reason: row.try_get(7)?,
            finished_ms: row.try_get::<_, Option<i64>>(8)?.map(to_u64),
            current_url: row.try_get(9)?,
            steps: to_u64(row.try_get(10)?),
            pending: match pending {
                Some(text) => Some(serde_json::from_str(text)?),
                None => None,
            },
        }))
    }

    pub(crate) async fn append_computer_step(
        &self,
        computer_id: &str,
        step: &ComputerStepRow,
    ) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO computer_steps (computer_id, step, status, data, screenshot, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &computer_id,
                &to_i64(step.step),
                &step.status,
                &step.data.to_string(),
                &step.screenshot,
                &now,
            ],
        )
        .await?;
        tx.execute(
            "UPDATE computers SET steps = $2, current_url = COALESCE($3, current_url),
                    pending = CASE WHEN state = 'live' THEN $4::text END
             WHERE id = $1",
            &[
                &computer_id,
                &to_i64(step.step),
                &step.current_url,
                &step.pending.as_ref().map(Value::to_string),
            ],
        )
        .await?;
        if let Some((approval_id, decision)) = &step.resolves {
            tx.execute(
                "UPDATE computer_approvals SET status = $2, decided_ms = $3
                 WHERE id = $1 AND status = 'pending'",
                &[approval_id, decision, &now],
            )
            .await?;
        }
        if let Some(approval_id) = &step.asks {
            tx.execute(
                "INSERT INTO computer_approvals (id, computer_id, step, status, created_ms)
                 VALUES ($1, $2, $3, 'pending', $4)",
                &[approval_id, &computer_id, &to_i64(step.step), &now],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn touch_computer(&self, id: &str, expires_ms: u64) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "UPDATE computers SET expires_ms = $2 WHERE id = $1 AND state = 'live'",
                &[&id, &to_i64(expires_ms)],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn end_computer(&self, id: &str, state: &str, reason: &str) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "UPDATE computers SET state = $2, reason = $3, finished_ms = $4, pending = NULL
             WHERE id = $1 AND state = 'live'",
            &[&id, &state, &reason, &now],
        )
        .await?;
        tx.execute(
            "UPDATE computer_approvals SET status = 'expired', decided_ms = $2
             WHERE computer_id = $1 AND status = 'pending'",
            &[&id, &now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn expire_computer_approval(
        &self,
        computer_id: &str,
        approval_id: &str,
    ) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        let expired = tx
            .execute(
                "UPDATE computer_approvals SET status = 'expired', decided_ms = $3
                 WHERE id = $1 AND computer_id = $2 AND status = 'pending'",
                &[&approval_id, &computer_id, &now],
            )
            .await?;
        if expired > 0 {
            tx.execute(
                "UPDATE computers SET pending = NULL WHERE id = $1",
                &[&computer_id],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn computer_steps(
        &self,
        computer_id: &str,
        after: u64,
    ) -> Result<Vec<(u64, Value)>> {
        let rows = self
            .pool
            .get()
            .await?
            .query(
                "SELECT step, data FROM computer_steps WHERE computer_id = $1 AND step > $2
                 ORDER BY step",
                &[&computer_id, &to_i64(after)],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    to_u64(row.try_get(0)?),
                    serde_json::from_str(row.try_get(1)?)?,
                ))
            })
            .collect()
    }

    pub(crate) async fn computer_screenshot(
        &self,
        computer_id: &str,
        step: u64,
    ) -> Result<Option<String>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT screenshot FROM computer_steps WHERE computer_id = $1 AND step = $2",
                &[&computer_id, &to_i64(step)],
            )
            .await?;
        Ok(match row {
            Some(row) => row.try_get(0)?,
            None => None,
        })
    }

    pub(crate) async fn computer_approval(&self, id: &str) -> Result<Option<(String, String)>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT computer_id, status FROM computer_approvals WHERE id = $1",
                &[&id],
            )
            .await?;
        Ok(match row {
            Some(row) => Some((row.try_get(0)?, row.try_get(1)?)),
            None => None,
        })
    }

    pub(crate) async fn delete_computer(&self, id: &str) -> Result<Option<String>> {
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        let dir = match tx
            .query_opt("SELECT trajectory FROM computers WHERE id = $1", &[&id])
            .await?
        {
            Some(row) => Some(row.try_get::<_, String>(0)?),
            None => None,
        };
        tx.execute("DELETE FROM computer_steps WHERE computer_id = $1", &[&id])
            .await?;
        tx.execute(
            "DELETE FROM computer_approvals WHERE computer_id = $1",
            &[&id],
        )
        .await?;
        tx.execute("DELETE FROM computers WHERE id = $1", &[&id])
            .await?;
        tx.commit().await?;
        Ok(dir)
    }
}
