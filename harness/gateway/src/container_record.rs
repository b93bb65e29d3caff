//! A code-execution container as the gateway store keeps it ([`ContainerRecord`]): its
//! state, its language and expiry, and which process last held it. Its paused session is
//! the blob `gateway/<container id>`.

use cordon_protocol::execution::Language;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::gateway_store::{GatewayStore, StoreResult, container_blob_key, kinds};

/// What a container was when its record was last written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RecordedState {
    /// Idle and paused: its session is the blob, any process brings it back.
    Paused,
    /// A program in it waits for client tool results: its guest frame lives only in the
    /// process that ran it (`process`), so elsewhere it was interrupted.
    Suspended,
    /// Idle longer than its time to live.
    Expired,
    /// Closed to make room for newer containers.
    Evicted,
    /// Its program was found interrupted by a restart: it cannot be used again.
    Interrupted,
}

/// A container's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ContainerRecord {
    pub(crate) state: RecordedState,
    pub(crate) language: Language,
    /// When it expires (Unix ms), idle.
    pub(crate) expires_ms: u64,
    /// The gateway process that wrote it (a fresh id per process).
    pub(crate) process: String,
    /// The code call whose program waits (`Suspended`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server_id: Option<String>,
}

/// Writes `record` for container `id` (and, for a suspended program, which container its
/// code call's program waits in).
pub(crate) async fn write(
    store: &dyn GatewayStore,
    id: &str,
    record: &ContainerRecord,
) -> StoreResult<()> {
    if let Some(server_id) = &record.server_id {
        store
            .put(kinds::PROGRAM, server_id, &Value::String(id.to_owned()))
            .await?;
    }
    let value = serde_json::to_value(record)
        .map_err(|e| crate::gateway_store::GatewayStoreError(format!("container record: {e}")))?;
    store.put(kinds::CONTAINER, id, &value).await
}

/// The record of container `id`; a record that does not read back is none.
pub(crate) async fn read(
    store: &dyn GatewayStore,
    id: &str,
) -> StoreResult<Option<ContainerRecord>> {
    Ok(store
        .get(kinds::CONTAINER, id)
        .await?
        .and_then(|value| serde_json::from_value(value).ok()))
}

/// The container whose program waits in the code call `server_id`, by its record.
pub(crate) async fn waiting_in(
    store: &dyn GatewayStore,
    server_id: &str,
) -> StoreResult<Option<String>> {
    Ok(store
        .get(kinds::PROGRAM, server_id)
        .await?
        .and_then(|value| value.as_str().map(str::to_owned)))
}

/// Marks container `id` ended (`state`) and deletes its paused session.
pub(crate) async fn end(
    store: &dyn GatewayStore,
    id: &str,
    mut record: ContainerRecord,
    state: RecordedState,
) -> StoreResult<()> {
    record.state = state;
    write(store, id, &record).await?;
    store.delete_blob(&container_blob_key(id)).await
}
