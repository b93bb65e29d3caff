//! Opening the store: creating the database file privately, the connection's pragmas, and
//! creating the tables and checking their schema version.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::db_file::{companions, make_private};
use super::error::{Result, StoreError};
use super::handle::Store;
use super::schema::{CONVERSATIONS_SCHEMA, SCHEMA, SCHEMA_VERSION, SESSIONS_SCHEMA};

impl Store {
    /// Opens (creating if needed) the database at `path`, and recovers from an unclean
    /// stop: see [`Store::recover`].
    pub fn open(path: &Path) -> Result<Store> {
        // SQLite's names for no file (`:memory:`) or a URI it parses itself (`file:…`).
        let text = path.to_string_lossy();
        if text == ":memory:" || text.starts_with("file:") {
            return Store::setup(Connection::open(path)?);
        }
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| StoreError::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
        }
        // Create the file before SQLite does (it would use 0644 less the umask); SQLite then
        // creates `-wal` and `-shm` with the database file's mode.
        make_private(path, true)?;
        for companion in companions(path) {
            make_private(&companion, false)?;
        }
        let store = Store::setup(Connection::open(path)?)?;
        // WAL mode created them just now, or they predate this run.
        for companion in companions(path) {
            make_private(&companion, false)?;
        }
        Ok(store)
    }

    /// A store that lives in memory only (tests, `--db :memory:`).
    pub fn in_memory() -> Result<Store> {
        Store::setup(Connection::open_in_memory()?)
    }

    fn setup(conn: Connection) -> Result<Store> {
        conn.busy_timeout(Duration::from_secs(5))?;
        // WAL: readers never block the writer, and a commit is one append to the log.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(CONVERSATIONS_SCHEMA)?;
        conn.execute_batch(SESSIONS_SCHEMA)?;
        let found: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
                row.get(0)
            })
            .optional()?;
        match found.and_then(|v| v.parse::<i64>().ok()) {
            Some(version) if version > SCHEMA_VERSION => {
                return Err(StoreError::SchemaVersion { found: version });
            }
            // Older files got the new tables above; nothing else changed.
            Some(version) if version == SCHEMA_VERSION => {}
            _ => {
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)",
                    params![SCHEMA_VERSION.to_string()],
                )?;
            }
        }
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }
}
