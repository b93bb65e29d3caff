//! The `meta` table: the store's own key/value settings (its schema version, …).

use rusqlite::{OptionalExtension, params};

use super::error::Result;
use super::handle::{SqliteStore, lock};

impl SqliteStore {
    /// A value of the `meta` table.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(lock(&self.conn)
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                params![key],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Sets (or with `None` removes) a value of the `meta` table.
    pub fn set_meta(&self, key: &str, value: Option<&str>) -> Result<()> {
        let conn = lock(&self.conn);
        match value {
            Some(value) => conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![key, value],
            )?,
            None => conn.execute("DELETE FROM meta WHERE key = ?1", params![key])?,
        };
        Ok(())
    }
}
