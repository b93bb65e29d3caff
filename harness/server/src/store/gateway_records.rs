//! What the model gateway keeps between two client requests so it outlives the process
//! (`cordon_gateway::GatewayStore`): one small JSON value per (kind, key) — calls waiting
//! for approval, continuations, set-aside calls, containers' states. Paused containers'
//! sessions are in the object store, not here. The DDL of both backends is here too.

use rusqlite::{OptionalExtension, params};

use cordon_core::clock::now_ms;

use super::columns::to_i64;
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// The SQLite table (migration 6).
pub(super) const SQLITE_GATEWAY_RECORDS: &str = "
CREATE TABLE gateway_records (
    kind        TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE INDEX gateway_records_by_age ON gateway_records (updated_ms);
";

/// The PostgreSQL table (migration 4).
pub(crate) const POSTGRES_GATEWAY_RECORDS: &str = r#"
CREATE TABLE gateway_records (
    kind        TEXT COLLATE "C" NOT NULL,
    key         TEXT COLLATE "C" NOT NULL,
    value       TEXT NOT NULL,
    updated_ms  BIGINT NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE INDEX gateway_records_by_age ON gateway_records (updated_ms);
"#;

/// Records of this kind are never purged (keys every process shares).
pub(crate) const KEPT_KIND: &str = cordon_gateway::gateway_store::kinds::KEY;

impl SqliteStore {
    /// Keeps `value` under (`kind`, `key`), replacing what was there.
    pub fn put_gateway_record(&self, kind: &str, key: &str, value: &str) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT INTO gateway_records (kind, key, value, updated_ms) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value, \
             updated_ms = excluded.updated_ms",
            params![kind, key, value, to_i64(now_ms())],
        )?;
        Ok(())
    }

    /// The value under (`kind`, `key`).
    pub fn gateway_record(&self, kind: &str, key: &str) -> Result<Option<String>> {
        Ok(lock(&self.conn)
            .query_row(
                "SELECT value FROM gateway_records WHERE kind = ?1 AND key = ?2",
                params![kind, key],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Deletes the value under (`kind`, `key`) and returns it: one caller gets it.
    pub fn take_gateway_record(&self, kind: &str, key: &str) -> Result<Option<String>> {
        Ok(lock(&self.conn)
            .query_row(
                "DELETE FROM gateway_records WHERE kind = ?1 AND key = ?2 RETURNING value",
                params![kind, key],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Keeps `value` under (`kind`, `key`) unless one is there; returns the value kept.
    pub fn put_new_gateway_record(&self, kind: &str, key: &str, value: &str) -> Result<String> {
        let conn = lock(&self.conn);
        conn.execute(
            "INSERT INTO gateway_records (kind, key, value, updated_ms) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (kind, key) DO NOTHING",
            params![kind, key, value, to_i64(now_ms())],
        )?;
        Ok(conn.query_row(
            "SELECT value FROM gateway_records WHERE kind = ?1 AND key = ?2",
            params![kind, key],
            |row| row.get(0),
        )?)
    }

    /// Deletes records not written since `cutoff_ms` (not the shared keys); returns the
    /// (kind, key) of each.
    pub fn purge_gateway_records(&self, cutoff_ms: u64) -> Result<Vec<(String, String)>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare(
            "DELETE FROM gateway_records WHERE updated_ms < ?1 AND kind <> ?2 RETURNING kind, key",
        )?;
        let rows = statement
            .query_map(params![to_i64(cutoff_ms), KEPT_KIND], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn records_are_replaced_taken_once_kept_first_and_purged() {
        let store = SqliteStore::in_memory().unwrap();
        assert_eq!(store.gateway_record("ask", "c/1").unwrap(), None);
        store.put_gateway_record("ask", "c/1", "1").unwrap();
        store.put_gateway_record("ask", "c/1", "2").unwrap();
        assert_eq!(
            store.gateway_record("ask", "c/1").unwrap().as_deref(),
            Some("2")
        );
        assert_eq!(
            store.take_gateway_record("ask", "c/1").unwrap().as_deref(),
            Some("2")
        );
        assert_eq!(store.take_gateway_record("ask", "c/1").unwrap(), None);
        assert_eq!(store.put_new_gateway_record("key", "k", "a").unwrap(), "a");
        assert_eq!(store.put_new_gateway_record("key", "k", "b").unwrap(), "a");
        store
            .put_gateway_record("container", "container_1", "{}")
            .unwrap();
        let purged = store.purge_gateway_records(u64::MAX / 2).unwrap();
        assert_eq!(purged, [("container".to_owned(), "container_1".to_owned())]);
        assert_eq!(
            store.gateway_record("key", "k").unwrap().as_deref(),
            Some("a")
        );
    }
}
