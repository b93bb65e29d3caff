//! The store's error type and its `Result`.

/// A failure of the store (the database, or a row that does not decode).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL reported an error, or the connection to it failed.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The `postgres://` URL does not parse.
    #[error("the database URL {url} does not parse: {message}")]
    Url {
        /// The URL, without its password.
        url: String,
        /// Why it does not parse.
        message: String,
    },
    /// A stored JSON column does not decode (written by an incompatible version?).
    #[error("stored data does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    /// The database's directory or file could not be created or made private.
    #[error("cannot create or restrict {path}: {source}")]
    Io {
        /// The directory or file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The store is being dropped (its PostgreSQL connections are closing).
    #[error("the store is shutting down")]
    ShuttingDown,
    /// The database was migrated by a newer Cordon.
    #[error("database schema version {found} is newer than this build understands ({known})")]
    SchemaVersion {
        /// The version in the database.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
