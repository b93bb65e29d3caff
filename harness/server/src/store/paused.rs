//! Paused sandboxes: a live sandbox's state moved to the object store (`paused`), brought
//! back (`live`), or ended while paused. Each change is a compare-and-set on the state, so
//! of two callers racing for one sandbox exactly one sees `true`.

use rusqlite::params;

use super::columns::to_i64;
use super::error::Result;
use super::handle::{SqliteStore, lock};
use super::sandboxes::{SANDBOX_COLUMNS, SandboxRow, read_sandbox};

impl SqliteStore {
    /// Records a live sandbox as paused, its state at `paused_key` (`paused_bytes` long),
    /// expiring at `expires_ms`. Returns whether it was live.
    pub fn pause_sandbox(
        &self,
        id: &str,
        paused_bytes: u64,
        paused_key: &str,
        expires_ms: u64,
    ) -> Result<bool> {
        let changed = lock(&self.conn).execute(
            "UPDATE sandboxes SET state = 'paused', paused_bytes = ?2, paused_key = ?3,
                 expires_ms = ?4
             WHERE id = ?1 AND state = 'live'",
            params![id, to_i64(paused_bytes), paused_key, to_i64(expires_ms)],
        )?;
        Ok(changed > 0)
    }

    /// Records a paused sandbox as live again, expiring at `expires_ms`. Returns whether
    /// it was paused.
    pub fn resume_sandbox(&self, id: &str, expires_ms: u64) -> Result<bool> {
        let changed = lock(&self.conn).execute(
            "UPDATE sandboxes SET state = 'live', paused_bytes = NULL, paused_key = NULL,
                 expires_ms = ?2, owner = ?3
             WHERE id = ?1 AND state = 'paused'",
            params![id, to_i64(expires_ms), self.owner()],
        )?;
        Ok(changed > 0)
    }

    /// Ends a paused sandbox (`expired`, `interrupted`) with the reason; its row keeps the
    /// key of the object to delete. Returns whether it was paused.
    pub fn end_paused_sandbox(&self, id: &str, state: &str, reason: &str) -> Result<bool> {
        let changed = lock(&self.conn).execute(
            "UPDATE sandboxes SET state = ?2, reason = ?3 WHERE id = ?1 AND state = 'paused'",
            params![id, state, reason],
        )?;
        Ok(changed > 0)
    }

    /// Up to `limit` paused sandboxes whose expiry is at or before `now_ms`, soonest first.
    pub fn paused_sandboxes_expired(&self, now_ms: u64, limit: usize) -> Result<Vec<SandboxRow>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare(&format!(
            "SELECT {SANDBOX_COLUMNS} FROM sandboxes
             WHERE state = 'paused' AND expires_ms <= ?1 ORDER BY expires_ms LIMIT ?2"
        ))?;
        let mut rows = statement.query(params![
            to_i64(now_ms),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ])?;
        let mut found = Vec::new();
        while let Some(row) = rows.next()? {
            found.push(read_sandbox(row)?);
        }
        Ok(found)
    }
}
