//! Replicas in SQLite: the heartbeat rows and the live owner of a thing. (SQLite serves
//! one host; these keep its rows the same as PostgreSQL's, where several replicas share a
//! database.) A paused sandbox changes owner in `paused.rs`'s resume, whose
//! compare-and-set on its state lets one replica of two win.

use rusqlite::{OptionalExtension as _, params};

use super::columns::to_i64;
use super::error::Result;
use super::handle::{SqliteStore, lock};
use super::replicas_schema::{LiveOwner, Owned, live_owner_sql, sqlite};

impl SqliteStore {
    /// This replica's id, once set: the owner its new live rows get.
    pub(super) fn owner(&self) -> Option<&str> {
        self.owner.get().map(String::as_str)
    }

    /// Records this replica's heartbeat (creating its row); returns whether the row was
    /// there (`false`: first beat, or another replica found it dead and removed it).
    pub fn beat_replica(&self, id: &str, address: &str, now_ms: u64) -> Result<bool> {
        let conn = lock(&self.conn);
        let updated = conn.execute(
            "UPDATE replicas SET seen_at_ms = ?2, address = ?3 WHERE id = ?1",
            params![id, to_i64(now_ms), address],
        )?;
        if updated == 0 {
            conn.execute(
                "INSERT INTO replicas (id, address, seen_at_ms) VALUES (?1, ?2, ?3)",
                params![id, address, to_i64(now_ms)],
            )?;
        }
        Ok(updated > 0)
    }

    /// Marks this replica's heartbeat as long past (it is stopping): the next recovery of
    /// any other replica ends what it still owned, without waiting for the lease.
    pub fn retire_replica(&self, id: &str) -> Result<()> {
        lock(&self.conn).execute(
            "UPDATE replicas SET seen_at_ms = 0 WHERE id = ?1",
            params![id],
        )?;
        Ok(())
    }

    /// The live owner of a thing: one indexed read.
    pub fn live_owner(
        &self,
        owned: Owned,
        id: &str,
        alive_since_ms: u64,
    ) -> Result<Option<LiveOwner>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare_cached(&sqlite(live_owner_sql(owned)))?;
        let owner = statement
            .query_row(params![id, to_i64(alive_since_ms)], |row| {
                Ok(LiveOwner {
                    replica: row.get(0)?,
                    address: row.get(1)?,
                })
            })
            .optional()?;
        Ok(owner)
    }
}
