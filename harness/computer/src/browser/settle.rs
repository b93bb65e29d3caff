//! Settling: after the input, wait until the page has reacted and its network is quiet,
//! then capture once the screen is still (or the cap is reached), following popups and
//! leaving error pages of refused redirects on the way.

use super::cdp::{cdp, eval_on};
use super::frames::pumped;
use super::session::BrowserSession;
use super::state::locked;
use crate::display::CapturePlan;
use crate::error::{Error, Result};
use crate::image::{EncodedImage, ImageFormat};
use crate::step::SettleEnd;
use chromiumoxide::cdp::browser_protocol::page::{
    GetNavigationHistoryParams, NavigateToHistoryEntryParams,
};
use futures::{FutureExt as _, StreamExt as _};
use std::time::Duration;

/// How long a step waits for script motion that was still running when the previous
/// step ended (`settle: timeout` or `moving`): the page's own motion, not the action's.
pub(super) const AMBIENT_WAIT: Duration = Duration::from_millis(300);

/// How long the page's DOM must go unchanged (while no finite animation runs) for a screen
/// that was moving to count as stable: a few frames of a 60 Hz page, longer than the
/// 13 ms tick of jQuery-style animations.
const STABLE_QUIET_MS: f64 = 50.0;

/// One reading of the page's motion script.
#[derive(Clone, Copy, Debug)]
struct Motion {
    /// Milliseconds since the DOM last changed.
    since_change_ms: f64,
    /// Milliseconds until the running finite animations and transitions end.
    animation_left_ms: f64,
    /// `requestAnimationFrame` callbacks not run yet.
    frame_callbacks: f64,
    /// Timers that may drive script motion, not run yet: short ones (they can fire within
    /// [`STABLE_QUIET_MS`]) the input set or that change the DOM (see `MOTION_JS`).
    motion_timers: f64,
}

impl Motion {
    /// Whether a timer that may move the page is waiting: script motion ticking on
    /// timers (or about to start on one the input set), whose next tick may come after a
    /// capture that was quicker than the tick.
    fn ticking(&self) -> bool {
        self.motion_timers > 0.0
    }
}

/// The visual viewport's scroll offset as `[x, y]`, read in the page (see `scroll_offset`).
macro_rules! scroll_offset_js {
    () => {
        "(() => { const v = window.visualViewport; \
         return v ? [v.pageLeft, v.pageTop] : [window.scrollX, window.scrollY]; })()"
    };
}

/// One task turn, so work the input queued (timers at 0, promise chains, navigations) has
/// started before we look at the network. No animation-frame wait: `captureScreenshot`
/// produces a fresh frame itself, and waiting for one here as well cost a whole frame
/// (see `docs/benchmarks.md`).
///
/// It resolves to the scroll offset as of that turn.
const TASK_TURN_JS: &str = concat!(
    "new Promise(r => setTimeout(() => r(",
    scroll_offset_js!(),
    "), 0))"
);

/// The same reading without waiting for the page's timers: one round trip, which still
/// orders after the input (and after every event the page sent before it).
const PAGE_TURN_JS: &str = scroll_offset_js!();

/// `[x, y]` from the settle turn, if it is a plausible scroll offset (the page could have
/// replaced `visualViewport`; then `getLayoutMetrics` is asked instead).
fn scroll_offset(v: &serde_json::Value) -> Option<(f64, f64)> {
    let a = v.as_array()?;
    let (x, y) = (a.first()?.as_f64()?, a.get(1)?.as_f64()?);
    (a.len() == 2 && x.is_finite() && y.is_finite() && x >= 0.0 && y >= 0.0).then_some((x, y))
}

/// After wheel input the scroll lands on the compositor, not in the page's turn: wait for a
/// drawn frame before capturing (measured: without it the DPR-2 capture showed the old
/// scroll position).
const NEXT_FRAME_JS: &str = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))";

/// Frames drawn after the main frame loaded, on a page that draws only when asked, before
/// settling ends. The headless shell shows a change the new document makes in the frame
/// after it only once the document has drawn a few frames: measured, a click right after
/// the load showed in its step's screenshot after 0 frames in 0 of 4 runs, after 1 in 3
/// of 4, after 2 or 3 in 8 of 8.
const WARM_FRAMES: usize = 3;

impl BrowserSession {
    /// Waits until the page has reacted to the input and its network is quiet.
    ///
    /// With `defer_timers`, the page's timer turn (work queued at 0 ms, a navigation started
    /// from a timer) is not awaited here but run alongside the capture, which then captures
    /// again if the page started work in it: awaiting it first aligned the capture with the
    /// frame after next and cost a whole frame (see `docs/benchmarks.md`), while such work
    /// nearly always lands before the frame the capture waits for anyway.
    ///
    /// On a page that draws only when asked, frames are drawn while settling waits (for
    /// an animation frame, the network, a popup), as Chromium's clock would.
    pub(super) async fn settle_inner(&mut self, defer_timers: bool) -> Result<bool> {
        let driver = self.frame_driver();
        pumped(driver.as_ref(), self.settle_phases(defer_timers)).await
    }

    async fn settle_phases(&mut self, defer_timers: bool) -> Result<bool> {
        self.settle_deadline = Some(tokio::time::Instant::now() + self.settle_cap);
        let settled = self.settle_once(defer_timers).await?;
        self.settle_end = if settled {
            SettleEnd::Quiet
        } else {
            SettleEnd::Timeout
        };
        if self.leave_error_page().await? {
            return self.settle_once(false).await;
        }
        Ok(settled)
    }

    /// After the guard refused a redirect of the session's own navigation, the page shows
    /// Chromium's error page: go back to the entry before it. Returns whether it did.
    async fn leave_error_page(&mut self) -> Result<bool> {
        let error_page = locked(&self.browser.shared.refused)
            .get_mut(&self.id)
            .and_then(|l| l.iter_mut().find(|r| r.error_page))
            .map(|r| r.error_page = false)
            .is_some();
        if !error_page {
            return Ok(false);
        }
        let h = self
            .page
            .execute(GetNavigationHistoryParams::default())
            .await
            .map_err(cdp)?;
        let Some(entry) = usize::try_from(h.result.current_index - 1)
            .ok()
            .and_then(|i| h.result.entries.get(i))
        else {
            return Ok(false);
        };
        self.page
            .execute(NavigateToHistoryEntryParams::new(entry.id))
            .await
            .map_err(cdp)?;
        self.needs_frame = true;
        Ok(true)
    }

    async fn settle_once(&mut self, defer_timers: bool) -> Result<bool> {
        let deadline = self
            .settle_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + self.settle_cap);
        self.scroll_hint = None;
        self.deferred_turn = false;
        let mut scroll = None;
        // 1. Let the page react to the input: one animation frame plus a task turn. Errors
        //    mean the document is being replaced, which the network wait below covers.
        //    A popup hides this page (no more frames), so watch for one meanwhile.
        let mut popup = self.pending_popup.take();
        while let Some(Some(t)) = self.popups.next().now_or_never() {
            popup = Some(t);
        }
        if popup.is_none() {
            let framed = std::mem::take(&mut self.needs_frame);
            self.deferred_turn = defer_timers && !framed;
            let js = if framed {
                NEXT_FRAME_JS
            } else if self.deferred_turn {
                PAGE_TURN_JS
            } else {
                TASK_TURN_JS
            };
            let turn = eval_on(self.page.clone(), js.into());
            tokio::select! {
                r = tokio::time::timeout_at(deadline, turn) => {
                    // The scroll offset read in the same turn saves `getLayoutMetrics` at
                    // capture, unless the compositor may still move it (wheel, history).
                    if !framed && let Ok(Ok(v)) = r {
                        scroll = scroll_offset(&v);
                    }
                }
                Some(t) = self.popups.next() => popup = Some(t),
            }
            while let Some(Some(t)) = self.popups.next().now_or_never() {
                popup = Some(t);
            }
        }
        if let Some(target) = popup {
            scroll = None;
            self.deferred_turn = false;
            self.follow(target, deadline).await?;
            let turn = eval_on(self.page.clone(), TASK_TURN_JS.into());
            let _turn = tokio::time::timeout_at(deadline, turn).await;
        }
        // 2. Wait for the network to go quiet and the main frame to finish loading.
        self.net.drain();
        self.answer_file_choosers().await?;
        if self.net.quiet() {
            // Nothing happened after the page's turn: its scroll offset is still current.
            self.scroll_hint = scroll;
        }
        let waited = !self.net.quiet();
        while !self.net.quiet() {
            // Wakes now and then to notice a popup the request guard closed.
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(50));
            match tokio::time::timeout_at(wake, self.net.events.next()).await {
                Ok(Some(ev)) => {
                    self.net.apply(ev);
                    self.net.drain();
                }
                Ok(None) if self.leave_refused_popup().await? => {}
                Ok(None) => return Err(Error::SessionClosed("page event stream ended".into())),
                Err(_) if self.leave_refused_popup().await? => {}
                Err(_) if tokio::time::Instant::now() < deadline => {}
                Err(_) => {
                    // Cap reached (long poll, streaming, endless loading): capture anyway.
                    self.net.inflight.clear();
                    self.net.loading = false;
                    self.net.awaiting_load = false;
                    self.deferred_turn = false;
                    return Ok(false);
                }
            }
        }
        if waited {
            // What the page does with a response (a promise chain that paints it) runs
            // after the response has arrived: give it a turn and a drawn frame, bounded (a
            // hidden page draws none).
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(100));
            let turn = eval_on(self.page.clone(), NEXT_FRAME_JS.into());
            let _turn = tokio::time::timeout_at(wake, turn).await;
            self.net.drain();
        }
        if std::mem::take(&mut self.net.loaded_since_warm)
            && let Some(driver) = self.frame_driver()
        {
            for _ in 0..WARM_FRAMES {
                driver.draw().await;
            }
        }
        Ok(true)
    }

    /// Captures once the screen is stable: after the capture, asks the page whether its
    /// DOM changed since the capture was requested or a finite animation still runs; if
    /// so, waits until nothing has changed for [`STABLE_QUIET_MS`] and no finite
    /// animation runs (up to the settle deadline) and captures again.
    pub(super) async fn capture_inner(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<EncodedImage> {
        let deadline = self
            .settle_deadline
            .take()
            .unwrap_or_else(|| tokio::time::Instant::now() + self.settle_cap);
        // Script motion that outlasted the previous step is the page's own (a ticker, a
        // clock): waited for briefly, not up to the timeout on every step.
        let script_deadline = if self.ambient {
            deadline.min(tokio::time::Instant::now() + AMBIENT_WAIT)
        } else {
            deadline
        };
        self.ambient = false;
        let mut requested = tokio::time::Instant::now();
        let mut image = self.capture_after_settle(plan, format).await?;
        loop {
            // A page that draws only when asked has run none of its frame callbacks since
            // the capture's frame: draw one, so motion driven by animation frames shows.
            // An animation running in the captured frame may end in that one (its clock
            // jumps to the frame's time), so it is read before as well.
            // Nothing to draw for when no animation runs and no frame callback waits:
            // the frame would change nothing, and it costs a copy on a screen of the
            // session's own (see `frames`).
            let mut animating = false;
            let mut reading = None;
            if let Some(driver) = self.frame_driver() {
                let before = self.motion().await;
                animating = before.is_some_and(|m| m.animation_left_ms > 0.0);
                let frame_work = before.is_none_or(|m| m.frame_callbacks > 0.0);
                if animating || frame_work {
                    driver.draw().await;
                } else {
                    reading = before;
                }
            }
            if reading.is_none() {
                reading = self.motion().await;
            }
            let Some(reading) = reading else {
                return Ok(image);
            };
            let (since, mut wait) = (reading.since_change_ms, reading.animation_left_ms);
            if animating {
                // Not settled: wait (below) at least one frame, then capture again.
                wait = wait.max(1.0);
            }
            // A change within the capture's own time may postdate its frame.
            let elapsed = requested.elapsed().as_secs_f64() * 1000.0;
            if since + 2.0 >= elapsed && wait <= 0.0 && !reading.ticking() {
                return Ok(image);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline || (now >= script_deadline && wait <= 0.0) {
                self.settle_end = if now >= deadline {
                    SettleEnd::Timeout
                } else {
                    SettleEnd::Moving
                };
                self.ambient = true;
                return Ok(image);
            }
            let (mut since, mut wait, mut ticking) = (since, wait, reading.ticking());
            while since < STABLE_QUIET_MS || wait > 0.0 || ticking {
                let until_ = if wait > 0.0 {
                    deadline
                } else {
                    script_deadline
                };
                // An animation's last frame is drawn after its end time: one frame more.
                let pause = (wait + 17.0)
                    .max(STABLE_QUIET_MS - since)
                    .clamp(5.0, 1000.0);
                let until = tokio::time::Instant::now() + Duration::from_secs_f64(pause / 1000.0);
                // A page that draws only when asked moves only while frames are drawn.
                let driver = self.frame_driver();
                pumped(driver.as_ref(), tokio::time::sleep_until(until.min(until_))).await;
                if tokio::time::Instant::now() >= until_ {
                    break;
                }
                match self.motion().await {
                    Some(m) => {
                        (since, wait, ticking) =
                            (m.since_change_ms, m.animation_left_ms, m.ticking());
                    }
                    None => break,
                }
            }
            let now = tokio::time::Instant::now();
            self.settle_end = if now >= deadline {
                SettleEnd::Timeout
            } else if now >= script_deadline && since < STABLE_QUIET_MS {
                SettleEnd::Moving
            } else {
                SettleEnd::Stable
            };
            requested = tokio::time::Instant::now();
            image = self.capture_once(plan, format).await?.0;
            if matches!(self.settle_end, SettleEnd::Timeout | SettleEnd::Moving) {
                self.ambient = true;
                return Ok(image);
            }
        }
    }

    /// The page's motion reading (see [`MOTION_JS`](super::page_setup::MOTION_JS)); `None`
    /// where there is none (no document of ours, an error page, a script that broke it).
    async fn motion(&mut self) -> Option<Motion> {
        let v = eval_on(
            self.page.clone(),
            "window.__cordonMotion ? window.__cordonMotion() : null".into(),
        )
        .await
        .ok()?;
        let a = v.as_array()?;
        let (since, wait) = (a.first()?.as_f64()?, a.get(2)?.as_f64()?);
        // A document from before this script's last change lacks the counts: it may
        // have frame callbacks waiting, and is taken to have no motion timers.
        let count = |i: usize, absent: f64| {
            a.get(i)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(absent)
        };
        (since.is_finite() && wait.is_finite()).then(|| Motion {
            since_change_ms: since,
            animation_left_ms: wait,
            frame_callbacks: count(3, 1.0),
            motion_timers: count(4, 0.0),
        })
    }

    async fn capture_after_settle(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<EncodedImage> {
        if self.leave_refused_popup().await? {
            self.deferred_turn = false;
            self.scroll_hint = None;
        }
        if !std::mem::take(&mut self.deferred_turn) {
            return Ok(self.capture_once(plan, format).await?.0);
        }
        // The timer turn settling deferred, alongside the capture (see `settle_inner`).
        let deadline = tokio::time::Instant::now() + self.settle_cap;
        let before = self.net.activity;
        let turn =
            tokio::time::timeout_at(deadline, eval_on(self.page.clone(), TASK_TURN_JS.into()));
        let (shot, turn) = tokio::join!(self.capture_once(plan, format), turn);
        self.net.drain();
        if let Some(Some(t)) = self.popups.next().now_or_never() {
            self.pending_popup = Some(t);
        }
        if let Ok((image, clipped_at)) = shot
            && self.net.activity == before
            && self.pending_popup.is_none()
            && let Ok(Ok(offset)) = &turn
            && scroll_offset(offset) == Some(clipped_at)
        {
            return Ok(image);
        }
        // The page started loading or fetching, opened a popup or scrolled after the input:
        // the shot may predate the result. Settle fully and capture what the page became.
        self.settle_inner(false).await?;
        Ok(self.capture_once(plan, format).await?.0)
    }
}
