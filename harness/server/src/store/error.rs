//! The store's error type and its `Result`.

use super::schema::SCHEMA_VERSION;

/// A failure of the store (the database file, or a row that does not decode).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
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
    /// The file was written by a newer Cordon.
    #[error(
        "database schema version {found} is newer than this build understands ({SCHEMA_VERSION})"
    )]
    SchemaVersion {
        /// The version in the file.
        found: i64,
    },
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
