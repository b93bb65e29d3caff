//! `cordon-server`'s integration tests: the store suite, run against SQLite and against
//! a real PostgreSQL cluster.

mod backing;
mod postgres_cluster;
mod store_suite;
