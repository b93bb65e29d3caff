//! Opening the SQLite store: creating the database file privately, the connection's
//! pragmas, and applying its migrations after checking their version.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use cordon_core::clock::now_ms;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::columns::to_i64;
use super::db_file::{companions, make_private};
use super::error::{Result, StoreError};
use super::handle::SqliteStore;
use super::schema::{SCHEMA_VERSION, SQLITE_MIGRATIONS};

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it; recovering from
    /// an unclean stop is the caller's next step ([`SqliteStore::recover`]).
    pub fn open(path: &Path) -> Result<SqliteStore> {
        // SQLite's names for no file (`:memory:`) or a URI it parses itself (`file:…`).
        let text = path.to_string_lossy();
        if text == ":memory:" || text.starts_with("file:") {
            return SqliteStore::setup(Connection::open(path)?);
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
        let store = SqliteStore::setup(Connection::open(path)?)?;
        // WAL mode created them just now, or they predate this run.
        for companion in companions(path) {
            make_private(&companion, false)?;
        }
        Ok(store)
    }

    /// A store that lives in memory only (tests, `--db :memory:`).
    pub fn in_memory() -> Result<SqliteStore> {
        SqliteStore::setup(Connection::open_in_memory()?)
    }

    fn setup(mut conn: Connection) -> Result<SqliteStore> {
        conn.busy_timeout(Duration::from_secs(5))?;
        // WAL: readers never block the writer, and a commit is one append to the log.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            owner: std::sync::OnceLock::new(),
        })
    }
}

/// Applies the migrations `schema_migrations` does not list, in one transaction (a second
/// process opening the file waits for it), after refusing a file a newer build migrated.
fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            applied_ms INTEGER NOT NULL
        )",
    )?;
    let applied: Vec<i64> = {
        let mut statement = tx.prepare("SELECT version FROM schema_migrations")?;
        let rows = statement.query_map([], |row| row.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    // Files from before `schema_migrations` record their version in `meta` only.
    let has_meta = tx
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    let in_meta: Option<String> = if has_meta {
        tx.query_row("SELECT value FROM meta WHERE key = 'schema'", [], |row| {
            row.get(0)
        })
        .optional()?
    } else {
        None
    };
    let found = applied
        .iter()
        .copied()
        .chain(in_meta.and_then(|v| v.parse::<i64>().ok()))
        .max()
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaVersion {
            found,
            known: SCHEMA_VERSION,
        });
    }
    let now = to_i64(now_ms());
    for (version, statements) in SQLITE_MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.execute_batch(statements)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_ms) VALUES (?1, ?2)",
            params![version, now],
        )?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)",
        params![SCHEMA_VERSION.to_string()],
    )?;
    tx.commit()?;
    Ok(())
}
