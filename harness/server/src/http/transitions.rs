//! [`Transitions`]: one lane per sandbox id for the changes between live and paused
//! (pause, bring back, delete or expire a paused one), so two requests for the same
//! sandbox never pause or resume it twice in this process; different sandboxes never
//! wait for each other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The lanes in use, by sandbox id; a lane goes when nobody holds or waits for it.
#[derive(Default)]
pub(super) struct Transitions {
    lanes: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// Held while one transition of a sandbox runs.
pub(super) struct InTransition<'a> {
    transitions: &'a Transitions,
    id: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Transitions {
    /// Waits for the sandbox's lane and holds it until the result is dropped.
    pub(super) async fn enter(&self, id: &str) -> InTransition<'_> {
        let lane = self
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(id.to_owned())
            .or_default()
            .clone();
        InTransition {
            transitions: self,
            id: id.to_owned(),
            guard: Some(lane.lock_owned().await),
        }
    }
}

impl Drop for InTransition<'_> {
    fn drop(&mut self) {
        let mut lanes = self
            .transitions
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.guard = None;
        // Waiters clone the lane under this same lock, so a count of one (the map's)
        // means nobody else holds or waits for it.
        if lanes
            .get(&self.id)
            .is_some_and(|lane| Arc::strong_count(lane) == 1)
        {
            lanes.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_transition_per_sandbox_at_a_time_and_lanes_are_dropped() {
        let transitions = Arc::new(Transitions::default());
        let first = transitions.enter("sbx_a").await;
        // Another sandbox does not wait.
        drop(transitions.enter("sbx_b").await);
        let waiting = {
            let transitions = transitions.clone();
            tokio::spawn(async move {
                let _second = transitions.enter("sbx_a").await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the second waits for the first");
        drop(first);
        waiting.await.unwrap_or_default();
        assert!(
            transitions
                .lanes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        );
    }
}
