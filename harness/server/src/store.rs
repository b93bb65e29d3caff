//! The store behind the HTTP API — SQLite (a file, the default) or PostgreSQL
//! (`--db postgres://…`, for servers that keep their state in a shared database), one
//! async API over both ([`Store`]): sandboxes, executions, the append-only event log
//! and approvals; computer sessions, their trajectory steps and approvals (the screenshots
//! themselves are files in the session's trajectory directory, written before the step's
//! row, so a row never points at a missing file).
//!
//! Every event is written here, with its sequence number, *before* anyone is told about
//! it; SSE streams, `Last-Event-ID` resumption and `GET /v1/executions/{id}` all read from
//! the log, so what a client sees is exactly what survives a crash.
//!
//! Each write that changes more than one row (an event that ends an execution, the
//! recovery after a restart) is one transaction, so a reader never sees half of it. A
//! SQLite database runs in WAL mode with `synchronous = NORMAL`: a committed transaction survives
//! the process being killed (`kill -9`); only an operating-system crash may lose the last
//! few commits, never corrupt the file.
//!
//! The file is private: created 0600 (its `-wal` and `-shm` files too, which SQLite gives
//! the database file's mode) in a directory created 0700 if Cordon creates it. Files that
//! already exist lose their group and other bits when the store opens (never gain any);
//! an existing directory keeps its mode.
//!
//! Why here and not in `cordon-core`: the store's rows are the HTTP API's resources, and
//! `rusqlite` compiles SQLite from C; in core it would be built into every crate that only
//! wants the tool layer (the sandbox, computer use, the guest tests).

// Leaves: column conversions, the error, where the store lives, the SQLite handle and
// its tables and their version.
mod columns;
mod error;
mod handle;
mod location;
mod schema;
// Opening SQLite: the connection (pragmas, migrations) and the file on disk.
mod connection;
mod db_file;
// SQLite: one file per table group; each adds its queries to `SqliteStore`.
mod approvals;
mod computers;
mod conversations;
mod envs;
mod events;
mod executions;
mod meta;
mod sandboxes;
// Replicas: heartbeats, owners (its tables and shared SQL first).
mod replicas;
mod replicas_schema;
// Paused sandboxes (beside `sandboxes`, whose rows they change).
mod paused;
mod sessions;
// The model gateway's records between two client requests (`GatewayStore`).
mod gateway_records;
// Operations across table groups.
mod purge;
mod recovery;
// PostgreSQL: the same rows and queries on `tokio-postgres`.
mod postgres;
// The `Store` both sit behind.
mod backend;
#[cfg(test)]
mod test_rows;

pub use approvals::ApprovalRow;
pub use backend::Store;
pub use computers::{ComputerRow, ComputerStepRow};
pub use conversations::{
    ConversationEntryRow, ConversationRow, ConversationSummary, NewConversationEntry,
};
pub use db_file::default_db_path;
pub use envs::{ENV_CLOSED, ENV_INTERRUPTED, ENV_LIVE, EnvEpisodeRow, EnvRow};
pub use error::{Result, StoreError};
pub use events::{EventRow, event_type};
pub use executions::{ExecutionRow, RUNNING};
pub use location::{DbLocation, is_postgres_url};
pub use purge::Purged;
pub use recovery::{COMPUTER_RESTART_REASON, ENV_RESTART_REASON, SANDBOX_RESTART_REASON};
pub use replicas_schema::{LiveOwner, Owned, Recovery};
pub use sandboxes::SandboxRow;
