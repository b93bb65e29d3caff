//! Computer sessions: one row per session, its trajectory steps and its approvals (the
//! screenshots themselves are files in the session's trajectory directory).

use cordon_core::clock::now_ms;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::columns::{row_tuple, to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

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

/// The columns [`SqliteStore::computer`] reads, in the order of its `SELECT`.
type ComputerColumns = (
    String,
    String,
    String,
    i64,
    i64,
    i64,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
    i64,
    Option<String>,
);

impl SqliteStore {
    /// Records a new computer session as `live`.
    pub fn insert_computer(&self, row: &ComputerRow) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO computers (id, setup, trajectory, ttl_ms, created_ms, expires_ms, state, reason, current_url, steps, owner)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
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
                self.owner(),
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
            .query_row(params![id], row_tuple::<ComputerColumns>)
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
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::store::test_rows::{computer, step};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_spent_computer_approval_expires_and_the_session_stops_showing_it() {
        let store = SqliteStore::in_memory().unwrap();
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
}
