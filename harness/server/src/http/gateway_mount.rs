//! The model gateway as the HTTP API mounts it ([`Mount`]): the loop of `cordon-gateway`
//! with the server's sandbox, computer sessions and operator tools, the store its
//! conversations are recorded in (and what it keeps between requests: the store and the
//! object store, [`StoreRecords`]), and their retention.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_gateway::{Entry, Gateway, Recorder};
use cordon_sandbox::Sandbox;
use serde_json::Value;

use super::computer_sessions::ComputerSessions;
use super::gateway_computers::GatewayComputers;
use super::gateway_records::StoreRecords;
use super::gateway_sessions::Sessions;
use super::gateway_setup::GatewaySetup;
use crate::objects::Objects;
use crate::store::{NewConversationEntry, Store};

/// The gateway as mounted: the loop and the store its conversations go to.
#[derive(Debug)]
pub(crate) struct Mount {
    pub(super) gateway: Gateway,
    pub(super) store: Arc<Store>,
    pub(super) sessions: Sessions,
    /// Where paused containers are (`gateway/<container id>`).
    pub(super) objects: Objects,
}

impl Mount {
    pub(crate) fn new(
        setup: GatewaySetup,
        sandbox: Sandbox,
        store: Arc<Store>,
        objects: Objects,
        computers: Arc<ComputerSessions>,
        has_token: bool,
    ) -> Self {
        // With a server token the client's credential is that token: never forward it.
        let options = setup
            .options
            .clone()
            .forward_client_key(setup.options.forward_client_key && !has_token);
        let mut gateway = Gateway::new(setup.upstream, options)
            .with_sandbox(sandbox)
            .with_recorder(Arc::new(StoreRecorder(store.clone())))
            .with_store(Arc::new(StoreRecords {
                store: store.clone(),
                objects: objects.clone(),
            }))
            .with_computers(Arc::new(GatewayComputers {
                sessions: computers,
                asked: Mutex::new(HashMap::new()),
            }));
        if let Some(tools) = setup.tools {
            gateway = gateway.with_operator_tools(tools);
        }
        Mount {
            gateway,
            store,
            sessions: Sessions::new(setup.session_ttl, setup.default_model),
            objects,
        }
    }
}

/// Deletes conversations not updated for `retain` now and then (at start, then every
/// `retain / 4`, at least every second and at most every hour), like the other histories.
pub(crate) fn spawn_retention(mount: &Arc<Mount>, retain: Duration) {
    let every = (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let retain_ms = u64::try_from(retain.as_millis()).unwrap_or(u64::MAX);
    crate::periodic::spawn_periodic(mount, every, move |mount| async move {
        let now = cordon_core::clock::now_ms();
        if let Err(error) = mount
            .store
            .purge_conversations(now.saturating_sub(retain_ms))
            .await
        {
            eprintln!("cordon serve: deleting old conversations failed: {error}");
        }
        purge_gateway_records(&mount, now.saturating_sub(retain_ms)).await;
        let session_ttl_ms = u64::try_from(mount.sessions.ttl.as_millis()).unwrap_or(u64::MAX);
        if let Err(error) = mount
            .store
            .purge_sessions(now.saturating_sub(session_ttl_ms))
            .await
        {
            eprintln!("cordon serve: deleting expired sessions failed: {error}");
        }
    });
}

/// Deletes what the gateway kept between requests and nobody came back for since
/// `cutoff_ms` (calls never approved, containers at rest: their paused sessions too).
async fn purge_gateway_records(mount: &Mount, cutoff_ms: u64) {
    let purged = match mount.store.purge_gateway_records(cutoff_ms).await {
        Ok(purged) => purged,
        Err(error) => {
            eprintln!("cordon serve: deleting old gateway records failed: {error}");
            return;
        }
    };
    for (kind, key) in purged {
        if kind == cordon_gateway::gateway_store::kinds::CONTAINER {
            let blob = cordon_gateway::gateway_store::container_blob_key(&key);
            if let Err(error) = mount.objects.delete(&blob).await {
                eprintln!("cordon serve: deleting {blob} failed: {error}");
            }
        }
    }
}

/// Records conversations in the store; a failing write is reported, never fatal. The
/// gateway's `Recorder` is synchronous: each call waits for the store ([`Store::wait`]).
#[derive(Debug)]
struct StoreRecorder(Arc<Store>);

impl Recorder for StoreRecorder {
    fn begin(&self, conversation: &str, upstream: &str) {
        if let Err(error) = self
            .0
            .wait(self.0.begin_conversation(conversation, upstream))
        {
            eprintln!("cordon serve: recording conversation {conversation}: {error}");
        }
    }

    fn record(&self, conversation: &str, entry: Entry) {
        let row = NewConversationEntry {
            kind: entry.kind,
            call_id: entry.call_id.as_deref(),
            round: entry.round.map(u64::from),
            duration_ms: entry.duration_ms,
            data: &entry.data,
        };
        if let Err(error) = self
            .0
            .wait(self.0.append_conversation_entry(conversation, &row))
        {
            eprintln!("cordon serve: recording conversation {conversation}: {error}");
        }
    }

    fn knows(&self, conversation: &str) -> bool {
        self.0
            .wait(self.0.conversation_exists(conversation))
            .unwrap_or(false)
    }

    fn keep_response(&self, id: &str, parent: Option<&str>, items: &Value) {
        if let Err(error) = self.0.wait(self.0.keep_response(id, parent, items)) {
            eprintln!("cordon serve: keeping response {id}: {error}");
        }
    }

    fn response(&self, id: &str) -> Option<(Option<String>, Value)> {
        self.0.wait(self.0.response(id)).ok().flatten()
    }
}
