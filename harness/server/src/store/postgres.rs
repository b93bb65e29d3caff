//! The PostgreSQL backend (`--db postgres://…`): the SQLite backend's rows and
//! transactions on `tokio-postgres`, with a pool of its own and numbered migrations.

// Leaves: the pool and the tables.
mod pool;
mod schema;
// Announcements of stored events (`LISTEN`), on a connection of their own.
mod listener;
// The handle: connecting and migrating.
mod connection;
// The table groups' queries.
mod computers;
mod conversations;
mod envs;
mod executions;
mod gateway_records;
mod maintenance;
mod paused;
mod replicas;

pub(crate) use connection::PostgresStore;
