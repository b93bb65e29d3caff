//! Sessions of the session protocol: one row per session holding its whole state (the
//! gateway's `SessionState` as JSON), so a session outlives the process that ran it.

use rusqlite::{OptionalExtension, params};

use cordon_core::clock::now_ms;

use super::columns::{to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

impl SqliteStore {
    /// Writes a session's state (creating the row the first time).
    pub fn save_session(&self, id: &str, state: &str) -> Result<()> {
        let now = to_i64(now_ms());
        lock(&self.conn).execute(
            "INSERT INTO sessions (id, state, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?3) \
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            params![id, state, now],
        )?;
        Ok(())
    }

    /// A session's state and when it last changed (Unix ms).
    pub fn load_session(&self, id: &str) -> Result<Option<(String, u64)>> {
        Ok(lock(&self.conn)
            .query_row(
                "SELECT state, updated_ms FROM sessions WHERE id = ?1",
                params![id],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?)),
            )
            .optional()?
            .map(|(state, updated)| (state, to_u64(updated))))
    }

    /// Deletes a session; whether it existed.
    pub fn delete_session(&self, id: &str) -> Result<bool> {
        Ok(lock(&self.conn).execute("DELETE FROM sessions WHERE id = ?1", params![id])? > 0)
    }

    /// Deletes sessions idle since before `cutoff_ms`; how many.
    pub fn purge_sessions(&self, cutoff_ms: u64) -> Result<usize> {
        Ok(lock(&self.conn).execute(
            "DELETE FROM sessions WHERE updated_ms < ?1",
            params![to_i64(cutoff_ms)],
        )?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn sessions_are_saved_replaced_loaded_and_purged() {
        let store = SqliteStore::in_memory().unwrap();
        assert_eq!(store.load_session("sess_1").unwrap(), None);
        store.save_session("sess_1", "{\"a\":1}").unwrap();
        store.save_session("sess_1", "{\"a\":2}").unwrap();
        let (state, updated) = store.load_session("sess_1").unwrap().unwrap();
        assert_eq!(state, "{\"a\":2}");
        assert!(updated > 0);
        assert_eq!(store.purge_sessions(updated).unwrap(), 0);
        assert_eq!(store.purge_sessions(updated + 1).unwrap(), 1);
        assert!(!store.delete_session("sess_1").unwrap());
    }
}
