//! Frames on demand (Chromium's old headless shell with begin-frame control): a session's
//! pages draw only when Cordon issues `HeadlessExperimental.beginFrame`, so the capture is
//! a frame drawn right after the action (with its screenshot in the same command) instead
//! of a wait for Chromium's next 60 Hz tick. Everything else that needs the page to draw —
//! `requestAnimationFrame`, animations and transitions, pointer moves and wheel input,
//! which Chromium holds until the next frame — runs with [`pumped`], which draws frames at
//! 60 Hz for as long as it waits.

use super::cdp::cdp;
use crate::error::{Error, Result};
use crate::image::ImageFormat;
use base64::Engine as _;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::headless_experimental::{
    BeginFrameParams, BeginFrameReturns, ScreenshotParams, ScreenshotParamsFormat,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The frame interval Chromium's own clock would keep (60 Hz).
const FRAME_INTERVAL: Duration = Duration::from_micros(16_667);

/// Whether `executable` is Chromium's old headless shell, the binary that still has
/// begin-frame control (`HeadlessExperimental.beginFrame`); new headless has not.
pub(super) fn is_headless_shell(executable: &std::path::Path) -> bool {
    executable
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("headless-shell") || n.contains("headless_shell"))
}

/// Draws the frames of one page that draws only when asked, one frame of the browser at
/// a time (see `Shared::frame_turn`).
#[derive(Clone)]
pub(super) struct FrameDriver {
    page: Page,
    turn: Arc<tokio::sync::Mutex<()>>,
    /// The page's window is on a screen of its own (see `screens`): every frame is drawn
    /// with a screenshot. The headless shell presents such a window's frames only when
    /// one is copied: after three or four uncopied frames it stopped drawing the page (no
    /// damage), and the next copy showed it as it was frames ago (a 400 ms transition at
    /// 20% when the page was at its end); with a copy every third frame, an element that
    /// moved away still showed where it had been. Copying every frame kept every
    /// screenshot current.
    copy_each: bool,
}

impl FrameDriver {
    pub(super) fn new(page: Page, turn: Arc<tokio::sync::Mutex<()>>, copy_each: bool) -> Self {
        Self {
            page,
            turn,
            copy_each,
        }
    }

    async fn begin(&self, params: BeginFrameParams) -> Result<BeginFrameReturns> {
        let _turn = self.turn.lock().await;
        let frame = self.page.execute(params).await.map_err(cdp)?;
        Ok(frame.result)
    }

    /// Draws one frame (no screenshot kept; one taken and dropped on a screen of its own,
    /// see `copy_each`). Errors (a page being replaced) are left to the commands that
    /// follow.
    pub(super) async fn draw(&self) {
        if self.copy_each {
            // The cheapest copy there is; only its side effect (presenting) matters.
            let _drawn = self.shot(ImageFormat::Jpeg { quality: 1 }).await;
        } else {
            let _drawn = self.begin(BeginFrameParams::default()).await;
        }
    }

    /// Draws one frame and returns its screenshot (the whole view, at its window's size
    /// times its screen's device pixel ratio), or `None` when Chromium took none (it can
    /// fail while the renderer starts).
    pub(super) async fn shot(&self, format: ImageFormat) -> Result<Option<Vec<u8>>> {
        let (shot_format, quality) = match format {
            ImageFormat::Png => (ScreenshotParamsFormat::Png, None),
            ImageFormat::Jpeg { quality } => {
                (ScreenshotParamsFormat::Jpeg, Some(i64::from(quality)))
            }
        };
        let params = BeginFrameParams {
            screenshot: Some(ScreenshotParams {
                format: Some(shot_format),
                quality,
                optimize_for_speed: Some(true),
            }),
            ..BeginFrameParams::default()
        };
        let frame = self.begin(params).await?;
        let Some(data) = frame.screenshot_data.as_ref() else {
            return Ok(None);
        };
        let b64: &str = data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map(Some)
            .map_err(|e| Error::Browser(format!("frame screenshot: {e}")))
    }
}

/// Runs `work`; on a page that draws only when asked (`driver` is `Some`) also draws a
/// frame every [`FRAME_INTERVAL`] while `work` is pending, the first one an interval after
/// the start (work that ends sooner, like a click, draws nothing). A frame still in
/// flight when `work` ends is awaited, so the caller's next frame never overlaps it.
pub(super) async fn pumped<T>(driver: Option<&FrameDriver>, work: impl Future<Output = T>) -> T {
    let Some(driver) = driver else {
        return work.await;
    };
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            () = tokio::time::sleep(FRAME_INTERVAL) => {}
        }
        let frame = driver.draw();
        tokio::pin!(frame);
        tokio::select! {
            out = &mut work => {
                frame.await;
                return out;
            }
            () = &mut frame => {}
        }
    }
}

/// Runs `work` (a `Page.captureScreenshot`, which waits for frames) while drawing frames
/// back to back: Chromium renders the clip at its scale over a few frames, and
/// [`pumped`]'s 60 Hz pace was measured to make that capture several times slower.
pub(super) async fn drawn_through<T>(driver: &FrameDriver, work: impl Future<Output = T>) -> T {
    tokio::pin!(work);
    loop {
        let frame = driver.draw();
        tokio::pin!(frame);
        tokio::select! {
            out = &mut work => {
                frame.await;
                return out;
            }
            () = &mut frame => {}
        }
    }
}
