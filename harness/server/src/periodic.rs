//! [`spawn_periodic`]: the background tasks that expire idle sessions and delete old
//! histories, each alive only as long as what it looks after.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Calls `tick` now and then every `every` after it finished, for as long as `owner` lives:
/// the task holds only a weak reference between ticks, so dropping the owner ends it.
pub(crate) fn spawn_periodic<T, F, Fut>(owner: &Arc<T>, every: Duration, tick: F)
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let owner = Arc::downgrade(owner);
    tokio::spawn(async move {
        loop {
            let Some(owner) = owner.upgrade() else { return };
            tick(owner).await;
            tokio::time::sleep(every).await;
        }
    });
}
