//! [`StoreRecords`]: the gateway's [`GatewayStore`] over the server's store (records in
//! the `gateway_records` table) and object store (paused containers, `gateway/<id>`), so
//! what the gateway holds between two client requests survives a restart of `cordon serve`.

use std::sync::Arc;

use bytes::Bytes;
use cordon_gateway::gateway_store::StoreResult;
use cordon_gateway::{GatewayStore, GatewayStoreError};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::objects::Objects;
use crate::store::Store;

/// The server's store and object store as the gateway's.
#[derive(Debug)]
pub(crate) struct StoreRecords {
    pub(crate) store: Arc<Store>,
    pub(crate) objects: Objects,
}

fn failed(error: impl std::fmt::Display) -> GatewayStoreError {
    GatewayStoreError(error.to_string())
}

/// A stored value read back; one that is not JSON reads as none (it was not written here).
fn parsed(text: Option<String>) -> Option<Value> {
    text.and_then(|text| serde_json::from_str(&text).ok())
}

impl GatewayStore for StoreRecords {
    fn put<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            self.store
                .put_gateway_record(kind, key, &value.to_string())
                .await
                .map_err(failed)
        })
    }

    fn get<'a>(&'a self, kind: &'a str, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        Box::pin(async move {
            let text = self.store.gateway_record(kind, key).await.map_err(failed)?;
            Ok(parsed(text))
        })
    }

    fn take<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, StoreResult<Option<Value>>> {
        Box::pin(async move {
            let text = self
                .store
                .take_gateway_record(kind, key)
                .await
                .map_err(failed)?;
            Ok(parsed(text))
        })
    }

    fn put_new<'a>(
        &'a self,
        kind: &'a str,
        key: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, StoreResult<Value>> {
        Box::pin(async move {
            let text = self
                .store
                .put_new_gateway_record(kind, key, &value.to_string())
                .await
                .map_err(failed)?;
            parsed(Some(text)).ok_or_else(|| failed(format!("the record {kind}/{key} is not JSON")))
        })
    }

    fn put_blob<'a>(&'a self, key: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            self.objects
                .put(key, Bytes::from(bytes))
                .await
                .map_err(failed)
        })
    }

    fn get_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<Option<Vec<u8>>>> {
        Box::pin(async move {
            let bytes = self.objects.get(key).await.map_err(failed)?;
            Ok(bytes.map(|bytes| bytes.to_vec()))
        })
    }

    fn delete_blob<'a>(&'a self, key: &'a str) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move { self.objects.delete(key).await.map_err(failed) })
    }
}
