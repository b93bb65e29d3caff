//! Calls handed to the client for approval (an `ask` tool, a computer gate), kept until a
//! `cordon_approval` answers them: in memory, and in the gateway's store when it has one
//! (so an approval sent after a restart finds its call).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bounded_map::BoundedMap;
use crate::gateway_store::{GatewayStore, GatewayStoreError, StoreResult, kinds};

/// A call handed to the client for approval, as the model made it. Only these can be
/// approved, each once, and what runs is this input, not the client's copy of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Asked {
    pub(crate) name: String,
    pub(crate) input: Value,
    /// A computer action a gate asked about (else an operator tool).
    pub(crate) computer: bool,
}

/// Calls waiting for a `cordon_approval`, by conversation and call id.
#[derive(Debug)]
pub(crate) struct Asks {
    calls: BoundedMap<Asked>,
    store: Option<Arc<dyn GatewayStore>>,
}

const ASKS_MAX: usize = 10_000;

impl Asks {
    pub(crate) fn new(store: Option<Arc<dyn GatewayStore>>) -> Self {
        Asks {
            calls: BoundedMap::new(ASKS_MAX),
            store,
        }
    }

    /// Keeps `asked` under `key` until it is answered.
    pub(crate) async fn keep(&self, key: &str, asked: Asked) -> StoreResult<()> {
        if let Some(store) = &self.store {
            let value = serde_json::to_value(&asked)
                .map_err(|e| GatewayStoreError(format!("an asked call: {e}")))?;
            store.put(kinds::ASK, key, &value).await?;
        }
        self.calls.insert(key, asked);
        Ok(())
    }

    /// The call kept under `key`, if still unanswered.
    pub(crate) async fn find(&self, key: &str) -> StoreResult<Option<Asked>> {
        if let Some(asked) = self.calls.get(key) {
            return Ok(Some(asked));
        }
        match &self.store {
            Some(store) => Ok(store.get(kinds::ASK, key).await?.and_then(read)),
            None => Ok(None),
        }
    }

    /// Takes the call kept under `key` out: of two requests racing with one approval (in
    /// one process or two), one gets it.
    pub(crate) async fn take(&self, key: &str) -> StoreResult<Option<Asked>> {
        let here = self.calls.remove(key);
        match &self.store {
            Some(store) => Ok(store.take(kinds::ASK, key).await?.and_then(read)),
            None => Ok(here),
        }
    }
}

fn read(value: Value) -> Option<Asked> {
    serde_json::from_value(value).ok()
}
