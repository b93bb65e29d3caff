//! Connecting the PostgreSQL store: parsing its URL, the pool, and applying the migrations
//! the database lacks.

use std::str::FromStr as _;

use cordon_core::clock::now_ms;
use tokio_postgres::Config;

use super::pool::Pool;
use super::schema::{MIGRATION_LOCK, POSTGRES_MIGRATIONS, SCHEMA_VERSION};
use crate::store::columns::to_i64;
use crate::store::error::{Result, StoreError};
use crate::store::location::without_password;

/// The PostgreSQL store: a pool of connections to one database.
#[derive(Debug)]
pub(crate) struct PostgresStore {
    pub(super) pool: Pool,
    /// The replica this process is: the owner written on the live rows it creates.
    pub(super) owner: std::sync::OnceLock<String>,
    /// Wakes event streams when another replica stores an event (`LISTEN`), started by
    /// the first stream that waits on it.
    pub(super) announcements: super::listener::Announcements,
}

impl PostgresStore {
    /// Connects to the database at `url` and migrates it.
    pub(crate) async fn connect(url: &str) -> Result<PostgresStore> {
        let config = Config::from_str(url).map_err(|error| StoreError::Url {
            url: without_password(url),
            message: error.to_string(),
        })?;
        let store = PostgresStore {
            announcements: super::listener::Announcements::new(config.clone()),
            pool: Pool::new(config)?,
            owner: std::sync::OnceLock::new(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Applies the migrations `schema_migrations` does not list, in one transaction under
    /// an advisory lock, so servers starting together against one database migrate it
    /// once; refuses a database a newer build migrated.
    async fn migrate(&self) -> Result<()> {
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version    BIGINT PRIMARY KEY,
                applied_ms BIGINT NOT NULL
            )",
        )
        .await?;
        let mut applied = Vec::new();
        for row in tx
            .query("SELECT version FROM schema_migrations", &[])
            .await?
        {
            applied.push(row.try_get::<_, i64>(0)?);
        }
        if let Some(&found) = applied.iter().max().filter(|&&v| v > SCHEMA_VERSION) {
            return Err(StoreError::SchemaVersion {
                found,
                known: SCHEMA_VERSION,
            });
        }
        let now = to_i64(now_ms());
        for (version, statements) in POSTGRES_MIGRATIONS {
            if applied.contains(version) {
                continue;
            }
            tx.batch_execute(statements).await?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)",
                &[version, &now],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
