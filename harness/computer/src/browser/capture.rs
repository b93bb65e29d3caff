//! One capture of the page at the model's size: `Page.captureScreenshot` with `clip.scale`
//! (Chromium draws a new frame after the request and copies it), or, where a session opts
//! in (`SessionOptions::screencast`), the first frame of a screencast for the whole
//! viewport (a copy of what was last drawn: faster, but it can predate the action); on a
//! page that draws only when asked (the headless shell, see `frames`), the screenshot of a
//! frame drawn for the capture (at the model's size where the session draws at the
//! display's scale, see `screens`).

use super::cdp::cdp;
use super::frames::{FrameDriver, drawn_through};
use super::session::BrowserSession;
use crate::display::CapturePlan;
use crate::error::{Error, Result};
use crate::image::{EncodedImage, ImageFormat, fit};
use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, GetLayoutMetricsParams,
    ScreencastFrameAckParams, StartScreencastFormat, StartScreencastParams, StopScreencastParams,
    Viewport,
};
use futures::{FutureExt as _, StreamExt as _};
use std::time::Duration;

/// How long a capture waits for the screencast's first frame before it asks
/// `Page.captureScreenshot` instead.
const SCREENCAST_WAIT: Duration = Duration::from_millis(500);

/// How many frames a capture on a page that draws only when asked draws for a screenshot
/// before it gives up: Chromium takes none while the page's surface is not ready (a page
/// that never drew, a document just committed), and each frame drawn readies it.
const SHOT_ATTEMPTS: u32 = 4;

/// What `Page.captureScreenshot` answers when the page had no surface to copy.
const NO_SURFACE: &str = "Unable to capture screenshot";

impl BrowserSession {
    /// One capture; also returns the scroll offset the clip was placed at.
    pub(super) async fn capture_once(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<(EncodedImage, (f64, f64))> {
        // Chromium renders the clip at the planned scale, so the model's size arrives
        // without a resize here. That costs about a frame (~15 ms): Chromium re-renders the
        // page at the new scale. Capturing at scale 1 and resizing here (decode + SIMD
        // resize + encode) was measured too, and was slower on 2 loaded cores.
        //
        // `Page.captureScreenshot` forces a new frame after the request and copies it once
        // it is drawn, so the image shows every change the page made before: the action's
        // handler and what settling waited for. A screencast's first frame does not wait
        // for that (see `screencast_frame`), so it is used only where the session opted in.
        if let Some(driver) = self.frame_driver() {
            return self.capture_drawn(&driver, plan, format).await;
        }
        if self.screencast_fits(plan)
            && let Some((data, at)) = self.screencast_frame(plan, format).await?
        {
            self.scroll_hint = None;
            return Ok((fit(data, format, plan.out, format)?, at));
        }
        let (page_x, page_y) = self.scroll_offset_now().await?;
        let data = self
            .screenshot(format, clip_at(plan, (page_x, page_y)))
            .await?;
        Ok((fit(data, format, plan.out, format)?, (page_x, page_y)))
    }

    /// The scroll offset the clip is placed at: the one settling read when nothing can
    /// have moved it since, else read now, because wheel scrolling lands on the
    /// compositor after the page's own turn (measured: an offset read while settling was
    /// stale at DPR 2).
    async fn scroll_offset_now(&mut self) -> Result<(f64, f64)> {
        if let Some(offset) = self.scroll_hint.take() {
            return Ok(offset);
        }
        let m = self
            .page
            .execute(GetLayoutMetricsParams::default())
            .await
            .map_err(cdp)?;
        Ok((
            m.result.css_visual_viewport.page_x,
            m.result.css_visual_viewport.page_y,
        ))
    }

    /// A capture on a page that draws only when asked (see `frames`). The whole viewport
    /// at the frame's size (the display, where the session draws at its scale on a screen
    /// of its own; else the viewport) is the screenshot of one frame drawn now: the frame
    /// right after the action. Anything else (a zoomed region, a display the session does
    /// not draw at) is `Page.captureScreenshot` at its own scale, with frames drawn until
    /// it returns: rendered at the model's size by Chromium, which was faster than a full
    /// frame resized here. A session on a screen of its own (see `screens`) has its window
    /// moved to the default screen for that (drawn there at its DPR) and back: its page
    /// sees its devicePixelRatio change and change back, which a zoom can afford. Where
    /// the page's surface is not ready to be copied (a page that has never drawn), the
    /// frame comes without a screenshot and `Page.captureScreenshot` fails with
    /// [`NO_SURFACE`]: either is tried again after the frame drawn, which readies it, up
    /// to [`SHOT_ATTEMPTS`] times.
    async fn capture_drawn(
        &mut self,
        driver: &FrameDriver,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<(EncodedImage, (f64, f64))> {
        if self.whole_viewport(plan) && plan.out == self.frame_size {
            let (mut shot, offset) =
                futures::future::join(driver.shot(format), self.scroll_offset_now()).await;
            for _ in 1..SHOT_ATTEMPTS {
                if !matches!(shot, Ok(None)) {
                    break;
                }
                shot = driver.shot(format).await;
            }
            self.net.drain();
            self.drawn_activity = self.net.activity;
            if let Some(data) = shot? {
                return Ok((fit(data, format, plan.out, format)?, offset?));
            }
        }
        let offset = self.scroll_offset_now().await?;
        let clip = clip_at(plan, offset);
        // `Page.captureScreenshot` never returns for a window on another screen than the
        // default one (measured: the headless shell hangs), so a session drawn at its
        // display's scale takes its window there for it, and back.
        let screen = self.screen;
        if let Some(place) = screen {
            self.move_window_to(place.at_default_screen()).await?;
        }
        let mut attempts = 1;
        let data = loop {
            match drawn_through(driver, self.screenshot(format, clip.clone())).await {
                Err(Error::Browser(m)) if m.contains(NO_SURFACE) && attempts < SHOT_ATTEMPTS => {
                    attempts += 1;
                    driver.draw().await;
                }
                shot => break shot,
            }
        };
        if let Some(place) = screen {
            self.move_window_to(place).await?;
        }
        Ok((fit(data?, format, plan.out, format)?, offset))
    }

    /// Whether `plan` shows the whole viewport.
    fn whole_viewport(&self, plan: &CapturePlan) -> bool {
        plan.clip.x == 0.0
            && plan.clip.y == 0.0
            && plan.clip.width == f64::from(self.viewport.width)
            && plan.clip.height == f64::from(self.viewport.height)
    }

    /// Whether `plan` is the whole viewport shown at the model's size, which the
    /// screencast delivers directly.
    fn screencast_fits(&self, plan: &CapturePlan) -> bool {
        self.screencast
            && self.whole_viewport(plan)
            && plan.out.width <= self.viewport.width
            && plan.out.height <= self.viewport.height
    }

    /// The whole viewport at the model's size from a screencast started now and stopped
    /// after its first frame: the compositor scales the frame (`maxWidth`/`maxHeight`)
    /// and draws it for the screencast, so no re-render at another scale is needed (that
    /// costs `clip.scale` a frame). The first frame is a copy of the next frame the
    /// compositor draws, which need not hold the main frame that carries the action's
    /// changes yet: measured, 66 of 210 bench steps showed the page before the click
    /// (`docs/benchmarks.md`), hence opt-in only. Also returns the scroll offset the
    /// frame was drawn at. `None`: no frame came in time (the caller falls back to
    /// `Page.captureScreenshot`).
    async fn screencast_frame(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<Option<(Vec<u8>, (f64, f64))>> {
        // Frames of an earlier capture that came after its stop.
        while let Some(Some(_)) = self.net.frames.next().now_or_never() {}
        let (cast_format, quality) = match format {
            ImageFormat::Png => (StartScreencastFormat::Png, None),
            ImageFormat::Jpeg { quality } => {
                (StartScreencastFormat::Jpeg, Some(i64::from(quality)))
            }
        };
        self.page
            .execute(StartScreencastParams {
                format: Some(cast_format),
                quality,
                max_width: Some(i64::from(plan.out.width)),
                max_height: Some(i64::from(plan.out.height)),
                every_nth_frame: Some(1),
            })
            .await
            .map_err(cdp)?;
        let frame = tokio::time::timeout(SCREENCAST_WAIT, self.net.frames.next()).await;
        let Ok(Some(frame)) = frame else {
            self.page
                .execute(StopScreencastParams::default())
                .await
                .map_err(cdp)?;
            return Ok(None);
        };
        // The stop and the frame's acknowledgement travel together: one round trip to the
        // browser instead of two, on every step. The stop must reach the browser first (an
        // ack before it could let another frame be drawn for this screencast): `join` polls
        // its first future first, and a command is queued on its first poll.
        let (stopped, _acked) = futures::future::join(
            self.page.execute(StopScreencastParams::default()),
            self.page
                .execute(ScreencastFrameAckParams::new(frame.session_id)),
        )
        .await;
        stopped.map_err(cdp)?;
        let b64: &str = frame.data.as_ref();
        let data = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Error::Browser(format!("screencast frame: {e}")))?;
        let m = &frame.metadata;
        Ok(Some((data, (m.scroll_offset_x, m.scroll_offset_y))))
    }

    /// `Page.captureScreenshot` of `clip`, decoded from base64.
    async fn screenshot(&mut self, format: ImageFormat, clip: Viewport) -> Result<Vec<u8>> {
        let (cdp_format, quality) = match format {
            ImageFormat::Png => (CaptureScreenshotFormat::Png, None),
            ImageFormat::Jpeg { quality } => {
                (CaptureScreenshotFormat::Jpeg, Some(i64::from(quality)))
            }
        };
        let params = CaptureScreenshotParams {
            format: Some(cdp_format),
            quality,
            clip: Some(clip),
            from_surface: Some(true),
            capture_beyond_viewport: Some(false),
            optimize_for_speed: Some(true),
        };
        let shot = self.page.execute(params).await.map_err(cdp)?;
        let b64: &str = shot.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Error::Browser(format!("screenshot data: {e}")))
    }
}

/// The CDP clip of `plan` in document coordinates (the plan's clip is in viewport ones).
fn clip_at(plan: &CapturePlan, (page_x, page_y): (f64, f64)) -> Viewport {
    Viewport {
        x: plan.clip.x + page_x,
        y: plan.clip.y + page_y,
        width: plan.clip.width,
        height: plan.clip.height,
        scale: plan.scale,
    }
}
