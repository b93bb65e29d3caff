//! The database a store-suite test runs on: a SQLite file in a temporary directory, or a
//! fresh database on the test binary's PostgreSQL cluster. A test may open it more than
//! once (a restart).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::OnceLock;

use cordon_server::store::Store;

use crate::postgres_cluster::PgCluster;

/// Where a test's store lives.
pub enum Backing {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Backing {
    pub fn sqlite() -> Backing {
        Backing::Sqlite(tempfile::tempdir().unwrap())
    }

    /// A fresh database on the cluster this test binary shares (started on first use; its
    /// watchdog stops it when the binary exits).
    pub fn postgres() -> Backing {
        static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
        Backing::Postgres(
            CLUSTER
                .get_or_init(PgCluster::start)
                .create_database("suite"),
        )
    }

    /// Opens the store (again: a server restart).
    pub async fn open(&self) -> Store {
        self.try_open().await.unwrap()
    }

    pub async fn try_open(&self) -> cordon_server::store::Result<Store> {
        match self {
            Backing::Sqlite(dir) => Store::open(&dir.path().join("cordon.db")),
            Backing::Postgres(url) => Store::connect(url).await,
        }
    }

    /// Records a migration no build has yet, as a newer build would.
    pub async fn record_future_migration(&self) {
        match self {
            Backing::Sqlite(dir) => {
                let conn = rusqlite::Connection::open(dir.path().join("cordon.db")).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_ms) VALUES (9999, 0)",
                    [],
                )
                .unwrap();
            }
            Backing::Postgres(url) => {
                let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let driver = tokio::spawn(connection);
                client
                    .execute(
                        "INSERT INTO schema_migrations (version, applied_ms) VALUES (9999, 0)",
                        &[],
                    )
                    .await
                    .unwrap();
                drop(client);
                let _ = driver.await;
            }
        }
    }
}
