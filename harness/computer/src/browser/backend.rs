//! [`BrowserSession`] as a [`Backend`]: every call fails at once on a lost Chromium, is
//! dropped when Chromium goes away during it, and (where idempotent) is sent again across
//! a frame swap.

use super::options::MAX_OPEN_PAGES;
use super::session::BrowserSession;
use super::state::locked;
use crate::backend::Backend;
use crate::display::{CapturePlan, CssPoint, Scaler};
use crate::error::{ActionError, Error, Result};
use crate::gate::ElementInfo;
use crate::image::{EncodedImage, ImageFormat};
use crate::op::Op;
use crate::origin::OriginPolicy;
use crate::step::SettleEnd;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Backend for BrowserSession {
    fn name(&self) -> &'static str {
        "browser"
    }

    fn settle_end(&self) -> Option<SettleEnd> {
        Some(self.settle_end)
    }

    fn take_refusal(&mut self) -> Option<ActionError> {
        let refused = locked(&self.browser.shared.refused).remove(&self.id)?;
        let first = refused.into_iter().next()?;
        Some(ActionError::Blocked {
            url: first.url,
            reason: first.reason,
        })
    }

    fn take_notes(&mut self) -> Vec<String> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(self.proxy.take_refusals());
        let closed = self.warden.closed.swap(0, Ordering::Relaxed);
        if closed > 0 {
            notes.push(format!(
                "The page tried to open more windows than a session may have open at once \
                 ({MAX_OPEN_PAGES}); Cordon closed {closed} of them."
            ));
        }
        notes
    }

    fn scaler(&self) -> Scaler {
        self.scaler
    }

    fn policy(&self) -> &OriginPolicy {
        &self.policy
    }

    async fn element_at(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.element_at_inner(at)).await;
        self.vet(r).await
    }

    async fn focused_element(&mut self) -> Result<Option<ElementInfo>> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.focused_element_inner()).await;
        self.vet(r).await
    }

    async fn current_url(&mut self) -> Result<String> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.current_url_inner()).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }

    async fn run(&mut self, op: &Op) -> Result<()> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.run_inner(op)).await;
        self.vet(r).await
    }

    async fn settle(&mut self) -> Result<bool> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.settle_inner(true)).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }

    async fn capture(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.capture_inner(plan, format)).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }
}

/// What Chromium answers a command sent to a page while its main frame is being swapped
/// (an error page committing for a refused redirect, then the session going back from it):
/// a moment later the page answers again. Seen under load: a step whose navigation was
/// refused failed with it instead of reporting the refusal.
const FRAME_SWAP_ERROR: &str = "Not attached to an active page";
/// Times an idempotent command (settling, capturing, reading the URL) is sent again after
/// [`FRAME_SWAP_ERROR`], and the pause before each.
const FRAME_SWAP_RETRIES: u32 = 5;
const FRAME_SWAP_PAUSE: Duration = Duration::from_millis(40);

/// Whether `r` failed only because the page's frame was being swapped and the command is
/// worth sending again: then, after a pause, counting the attempt in `swaps`.
async fn frame_swapping<T>(r: &Result<T>, swaps: &mut u32) -> bool {
    let swapping = matches!(r, Err(Error::Browser(message)) if message.contains(FRAME_SWAP_ERROR));
    if !swapping || *swaps >= FRAME_SWAP_RETRIES {
        return false;
    }
    *swaps += 1;
    tokio::time::sleep(FRAME_SWAP_PAUSE).await;
    true
}

/// Runs `op` unless generation `generation` is lost first (then it is dropped: a dead
/// process would otherwise hold it until the request timeout).
async fn watch_lost<T>(
    lost: &mut tokio::sync::watch::Receiver<u64>,
    generation: u64,
    op: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::select! {
        r = op => r,
        _ = lost.wait_for(|g| *g >= generation) => Err(Error::BrowserLost {
            reason: "Chromium went away during the step".into(),
        }),
    }
}

impl BrowserSession {
    /// Fails at once when this session's browser is already known to be lost.
    pub(super) fn guard(&mut self) -> Result<()> {
        if self.lost.is_none() {
            self.lost = self.browser.shared.lost_reason(self.generation);
        }
        match &self.lost {
            Some(reason) => Err(Error::BrowserLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Turns a failure caused by a lost browser into [`Error::BrowserLost`]. A timed-out
    /// command asks the browser whether it still answers; if not, it is lost.
    async fn vet<T>(&mut self, r: Result<T>) -> Result<T> {
        let e = match r {
            Ok(v) => return Ok(v),
            Err(e @ Error::Action(_)) => return Err(e),
            Err(e) => e,
        };
        let timed_out = matches!(&e, Error::Browser(m) if m.contains("timed out"));
        if timed_out && self.browser.shared.lost_reason(self.generation).is_none() {
            // Marks the generation lost if the browser itself no longer answers.
            let _alive = self.browser.probe(self.generation).await;
        }
        match self.browser.shared.lost_reason(self.generation) {
            Some(reason) => {
                self.lost = Some(reason.clone());
                Err(Error::BrowserLost { reason })
            }
            None => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_frame_swap_is_retried_and_only_a_few_times() {
        let swapped: Result<()> = Err(Error::Browser(
            "Error -32000: Not attached to an active page".into(),
        ));
        let mut swaps = 0;
        for _ in 0..FRAME_SWAP_RETRIES {
            assert!(frame_swapping(&swapped, &mut swaps).await);
        }
        assert!(
            !frame_swapping(&swapped, &mut swaps).await,
            "retries are bounded"
        );
        let mut swaps = 0;
        let other: Result<()> = Err(Error::Browser("Error -32000: Cannot navigate".into()));
        assert!(!frame_swapping(&other, &mut swaps).await);
        assert!(!frame_swapping(&Ok(()), &mut swaps).await);
        assert_eq!(swaps, 0);
    }
}
