//! Where the gateway keeps what must outlive its process ([`GatewayStore`]): records
//! (small JSON values under a kind and a key: calls waiting for approval, continuations,
//! what a turn set aside, containers' states) and blobs (a paused container's session).
//!
//! The gateway works without one, keeping all of it in memory; with one, everything at
//! rest between two client requests survives a restart of the process ("Restarts" in
//! `docs/gateway.md`). [`MemoryGatewayStore`] keeps it in memory (tests, library use);
//! `cordon serve` implements the trait over its database and object store.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;
use serde_json::Value;

/// The store failed (I/O, database, object store): what was asked is not known to be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the gateway's store failed: {0}")]
pub struct GatewayStoreError(pub String);

/// Result of a [`GatewayStore`] call.
pub type StoreResult<T> = Result<T, GatewayStoreError>;

/// Kinds of records the gateway keeps.
pub mod kinds {
    /// A call handed to the client for approval, by `conversation/call id`.
    pub const ASK: &str = "ask";
    /// What turns handed to the client set aside, by conversation (one record each).
    pub const ASIDES: &str = "asides";
    /// The conversation a handed-back turn belongs to, by the digest that continues it.
    pub const CONTINUATION: &str = "continuation";
    /// A code-execution container's state, by container id.
    pub const CONTAINER: &str = "container";
    /// The container of a program suspended on client tools, by the code call's id.
    pub const PROGRAM: &str = "program";
    /// Keys the gateway makes once and shares between its processes (`continuation`).
    pub const KEY: &str = "key";
}

/// Where the gateway keeps what must outlive its process. Implementations are shared by
/// every process serving the same clients (one database, one object store).
pub trait GatewayStore: Send + Sync + std::fmt::Debug {
    /// Keeps `value` under (`kind`, `key`), replacing what was there.
    fn put<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<()>>;
    /// The value under (`kind`, `key`).
    fn get<'a>(&'a self, kind: &'a str, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>>;
    /// Takes the value under (`kind`, `key`) out: of callers racing, one gets it.
    fn take<'a>(&'a self, kind: &'a str, key: &'a str)
    -> BoxFuture<'a, StoreResult<Option<Value>>>;
    /// Keeps `value` under (`kind`, `key`) unless a value is there; returns the value kept.
    fn put_new<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<Value>>;
    /// Keeps `bytes` under `key` (a paused container: `gateway/<container id>`).
    fn put_blob<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<()>>;
    /// The bytes under `key`.
    fn get_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Vec<u8>>>>;
    /// Deletes the bytes under `key` (none there is fine).
    fn delete_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<()>>;
}

/// The object key of a paused container's session.
pub fn container_blob_key(container: &str) -> String {
    format!("gateway/{container}")
}

/// A [`GatewayStore`] in memory: share one between two gateways to stand for a process
/// and the one that replaces it (tests, library use).
#[derive(Debug, Default)]
pub struct MemoryGatewayStore {
    records: Mutex<HashMap<(String, String), Value>>,
    blobs: Mutex<HashMap<String, Vec<u8>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryGatewayStore {
    /// How many records of `kind` are kept.
    pub fn count(&self, kind: &str) -> usize {
        lock(&self.records)
            .keys()
            .filter(|(k, _)| k == kind)
            .count()
    }

    /// The keys of the blobs kept.
    pub fn blob_keys(&self) -> Vec<String> {
        lock(&self.blobs).keys().cloned().collect()
    }
}

fn pair(kind: &str, key: &str) -> (String, String) {
    (kind.to_owned(), key.to_owned())
}

impl GatewayStore for MemoryGatewayStore {
    fn put<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<()>> {
        lock(&self.records).insert(pair(kind, key), value.clone());
        Box::pin(async { Ok(()) })
    }

    fn get<'a>(&'a self, kind: &'a str, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        let value = lock(&self.records).get(&pair(kind, key)).cloned();
        Box::pin(async { Ok(value) })
    }

    fn take<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        let value = lock(&self.records).remove(&pair(kind, key));
        Box::pin(async { Ok(value) })
    }

    fn put_new<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<Value>> {
        let kept = lock(&self.records)
            .entry(pair(kind, key))
            .or_insert_with(|| value.clone())
            .clone();
        Box::pin(async { Ok(kept) })
    }

    fn put_blob<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<()>> {
        lock(&self.blobs).insert(key.to_owned(), bytes);
        Box::pin(async { Ok(()) })
    }

    fn get_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Vec<u8>>>> {
        let bytes = lock(&self.blobs).get(key).cloned();
        Box::pin(async { Ok(bytes) })
    }

    fn delete_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        lock(&self.blobs).remove(key);
        Box::pin(async { Ok(()) })
    }
}
