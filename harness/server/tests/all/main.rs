//! `cordon-server`'s integration tests: the store suite, run against SQLite and against
//! a real PostgreSQL cluster (replicas' rows too); pausing and resuming sandboxes over HTTP.

mod backing;
mod paused_sandboxes;
mod postgres_cluster;
// First: its `store_suite!` runs the replica suite's tests too.
#[macro_use]
mod store_suite;
mod at_rest_suite;
mod replica_suite;
