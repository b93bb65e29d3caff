//! [`Replica`]: this process as one of several `cordon serve` replicas on one database —
//! its id (`rpl_…`, on every answer as `x-cordon-replica`), the address other replicas
//! reach it at (`--replica-address`), its heartbeat, and the periodic recovery that ends
//! what dead replicas owned.
//!
//! Without an address the server runs alone, as before replicas: no heartbeat, no
//! forwarding, and the recovery at start ends every live row not owned by a live replica.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cordon_core::clock::now_ms;
use cordon_core::ids::fresh_id;

use crate::store::{Recovery, Store, StoreError};

/// How long a replica may go without a heartbeat before the others take it for dead,
/// unless told otherwise (`--replica-lease`).
pub const DEFAULT_REPLICA_LEASE: Duration = Duration::from_secs(10);

/// How long connecting to another replica may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// What an execution that was running in a dead replica ends with.
const INTERRUPTED_REASON: &str = "the server running this execution stopped before it \
    ended (its process exited or was killed, or as a replica it stopped renewing its lease); \
    run it again";

/// Reads `--replica-address`: an `http://` URL with a host and no path, query or user
/// (replicas talk plain HTTP on a private network, as they talk to PostgreSQL); returns it
/// without a trailing `/`.
pub fn parse_replica_address(text: &str) -> Result<String, String> {
    let hint = "give the URL other replicas reach this server at, e.g.                 --replica-address http://10.0.0.5:7420";
    let url = url::Url::parse(text.trim()).map_err(|error| format!("{text:?}: {error}; {hint}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "{text:?}: replicas talk plain http:// on a private network (no TLS); {hint}"
        ));
    }
    if url.host_str().is_none_or(str::is_empty)
        || !matches!(url.path(), "" | "/")
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(format!("{text:?}: only a host and a port; {hint}"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// This process as a replica.
pub(crate) struct Replica {
    /// `rpl_…`, fresh per process.
    pub(crate) id: String,
    /// Where other replicas reach this one; `None`: running alone.
    pub(crate) address: Option<String>,
    /// A replica whose heartbeat is older than this is dead.
    pub(crate) lease: Duration,
    /// Set when the server stops: the heartbeat stops renewing.
    retired: AtomicBool,
    /// Forwards requests to the other replicas (with an address only).
    pub(crate) client: Option<reqwest::Client>,
}

impl Replica {
    pub(crate) fn new(address: Option<String>, lease: Duration) -> Result<Replica, reqwest::Error> {
        let client = match address {
            Some(_) => Some(
                reqwest::Client::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .tcp_nodelay(true)
                    // Replicas talk plain HTTP on a private network, as they talk to
                    // PostgreSQL.
                    .tls_built_in_root_certs(false)
                    // Answers pass through as they are, redirects included.
                    .redirect(reqwest::redirect::Policy::none())
                    .build()?,
            ),
            None => None,
        };
        Ok(Replica {
            id: fresh_id("rpl"),
            address: address.map(|address| address.trim_end_matches('/').to_owned()),
            lease,
            retired: AtomicBool::new(false),
            client,
        })
    }

    /// The host name of this replica's address: other replicas name it in `Host`, so the
    /// host guard serves it.
    pub(crate) fn host(&self) -> Option<String> {
        let url = url::Url::parse(self.address.as_deref()?).ok()?;
        crate::guard::parse_allowed_host(url.host_str()?).ok()
    }

    /// Heartbeats older than this (Unix ms) are a dead replica's.
    pub(crate) fn alive_since_ms(&self) -> u64 {
        let lease_ms = u64::try_from(self.lease.as_millis()).unwrap_or(u64::MAX);
        now_ms().saturating_sub(lease_ms)
    }

    /// Registers this replica (with an address), then ends what dead replicas and servers
    /// that ran alone left live. Returns how many executions were interrupted.
    pub(crate) async fn start(&self, store: &Store) -> Result<usize, StoreError> {
        store.set_replica(&self.id);
        if let Some(address) = &self.address {
            store.beat_replica(&self.id, address, now_ms()).await?;
        }
        self.recover(store, true).await
    }

    async fn recover(&self, store: &Store, orphans: bool) -> Result<usize, StoreError> {
        let recovery = Recovery {
            me: &self.id,
            dead_before_ms: self.alive_since_ms(),
            orphans,
        };
        store.recover(INTERRUPTED_REASON, &recovery).await
    }

    /// With an address: renews the heartbeat every quarter lease and, each time, ends
    /// what replicas that stopped renewing theirs owned. For as long as `self` lives.
    pub(crate) fn spawn_heartbeat(self: &Arc<Self>, store: Arc<Store>) {
        let Some(address) = self.address.clone() else {
            return;
        };
        let every = (self.lease / 4).max(Duration::from_millis(50));
        crate::periodic::spawn_periodic(self, every, move |replica| {
            let (store, address) = (store.clone(), address.clone());
            async move {
                if replica.retired.load(Ordering::SeqCst) {
                    return;
                }
                match store.beat_replica(&replica.id, &address, now_ms()).await {
                    Ok(true) => {}
                    Ok(false) => eprintln!(
                        "cordon serve: replica {} missed its lease (the others took it for dead \
                         and ended what it owned); it is back",
                        replica.id
                    ),
                    Err(error) => eprintln!(
                        "cordon serve: replica {} could not renew its lease: {error}",
                        replica.id
                    ),
                }
                if let Err(error) = replica.recover(&store, false).await {
                    eprintln!("cordon serve: ending what dead replicas owned failed: {error}");
                }
            }
        });
    }

    /// Stops renewing the heartbeat and marks it long past, so the other replicas end what
    /// this one still owns at their next beat instead of after the lease.
    pub(crate) async fn retire(&self, store: &Store) {
        if self.address.is_none() || self.retired.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Err(error) = store.retire_replica(&self.id).await {
            eprintln!(
                "cordon serve: replica {} could not retire: {error}",
                self.id
            );
        }
    }
}
