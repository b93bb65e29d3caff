//! The PostgreSQL backend (`--db postgres://…`): the SQLite backend's rows and
//! transactions on `tokio-postgres`, with a pool of its own and numbered migrations.

// Leaves: the pool and the tables.
mod pool;
mod schema;
// The handle: connecting and migrating.
mod connection;
// The table groups' queries.
mod computers;
mod conversations;
mod executions;
mod maintenance;

pub(crate) use connection::PostgresStore;
