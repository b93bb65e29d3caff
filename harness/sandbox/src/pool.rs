//! Instances for executions from wasmtime's pool: the image's spare if it is ready, else
//! one made now, waiting briefly for slots still being returned ([`Returning`] counts
//! those) when the pool is full.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::image::{GuestImage, LiveInstance, instantiate};

/// A fresh instance of `image`: the spare one if it is ready, else one made now.
pub(crate) async fn fresh_instance(
    returning: &AtomicUsize,
    image: &GuestImage,
) -> Result<LiveInstance, String> {
    // A full pool may only be waiting for slots whose results were just delivered (or for
    // a spare being made); wait for those (a slot's reset takes micro- to milliseconds),
    // not for anything else. The count is read before each attempt: a slot is freed (a
    // spare put up) before it stops being counted, so when nothing was being returned as
    // an attempt began, a full pool is really full.
    let patience = Instant::now() + RETURN_PATIENCE;
    loop {
        let returning = returning.load(Ordering::SeqCst);
        // A spare still being made is not waited for: making one here runs alongside it
        // on another core (measured: waiting made back-to-back executions slower).
        if let Some(live) = image.spare.take() {
            return Ok(live);
        }
        match instantiate(image).await {
            Ok(live) => return Ok(live),
            Err(message) if returning == 0 || Instant::now() > patience => return Err(message),
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

/// How long an execution that finds the pool full waits for slots being returned.
const RETURN_PATIENCE: Duration = Duration::from_millis(100);

/// Counts a fresh instance as being returned to the pool while it lives.
pub(crate) struct Returning<'a>(&'a AtomicUsize);

impl<'a> Returning<'a> {
    pub(crate) fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Returning(count)
    }
}

impl Drop for Returning<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Makes `image`'s spare instance if it has none (before a first execution, and after a
/// session took it), counted as a slot being returned while it is made.
pub(crate) async fn make_spare(returning: &AtomicUsize, image: &GuestImage) {
    let returning = Returning::start(returning);
    image.spare.refill(image).await;
    drop(returning);
}
