//! What the server keeps about the gateway's session-protocol sessions besides the store
//! ([`Sessions`]): their idle time to live, the default model, and which run a turn now.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Sessions idle longer than this expire unless told otherwise.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(60 * 60);

/// What the server keeps about sessions besides the store.
#[derive(Debug)]
pub(crate) struct Sessions {
    /// Idle time after which a session expires.
    pub(crate) ttl: Duration,
    /// The model of sessions that name none.
    pub(crate) default_model: Option<String>,
    /// Sessions running a turn now: one turn at a time per session.
    pub(super) busy: Mutex<HashSet<String>>,
}

impl Sessions {
    pub(crate) fn new(ttl: Duration, default_model: Option<String>) -> Self {
        Sessions {
            ttl,
            default_model,
            busy: Mutex::new(HashSet::new()),
        }
    }

    pub(super) fn claim(&self, id: &str) -> bool {
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_owned())
    }

    pub(super) fn release(&self, id: &str) {
        self.busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}
