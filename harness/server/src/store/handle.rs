//! The SQLite backend's handle (one connection behind a mutex) and taking its lock; each
//! table group's file adds its queries to it.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use rusqlite::Connection;

/// The SQLite store: one connection behind a mutex. Every call is a few indexed row
/// operations (tens of microseconds), so callers run them inline on async tasks rather
/// than paying a thread hop each time.
#[derive(Debug)]
pub struct SqliteStore {
    pub(super) conn: Mutex<Connection>,
    /// The replica this process is: the owner written on the live rows it creates
    /// (`None` until the server sets it; such rows belong to no one).
    pub(super) owner: OnceLock<String>,
}

pub(super) fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock cannot leave a transaction open: rusqlite rolls back
    // an unfinished `Transaction` on drop, during the unwinding.
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}
