//! Screens at a session's display scale, for frames on demand: a session whose model
//! display is its viewport scaled down (e.g. 1024×640 for 1280×800) gets its window on a
//! headless screen whose device pixel ratio is that scale (`Emulation.addScreen`), so the
//! page draws at the display's size and one `beginFrame` screenshot is the model's image.
//!
//! Why screens: the headless shell takes a frame's screenshot from the window's own
//! compositor, at the window's size in DIP times its screen's device pixel ratio. A
//! page's emulated device scale factor (`Emulation.setDeviceMetricsOverride`) changes
//! what the page rasterizes at, not that size (measured: at 0.8 the frame stays
//! 1280×800 with the page drawn at 0.8 and stretched back; its `scale` parameter shrinks
//! the picture but leaves input where it was, 25% off). `--force-device-scale-factor`
//! sets every window's ratio at once, and a page emulating another ratio on top of it
//! reads a rounded one (2.0000000298 for 2). A screen per scale keeps the ratio a
//! session's own: its page is not emulated, it reads the screen's (0.8 as a float,
//! `0.800000011920929`), and sessions on the default screen keep their exact DPR.

use super::cdp::cdp;
use crate::display::Size;
use crate::error::Result;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::browser::{
    Bounds, GetWindowForTargetParams, SetWindowBoundsParams,
};
use chromiumoxide::cdp::browser_protocol::emulation::AddScreenParams;
use std::collections::HashMap;

/// Where the first added screen starts (DIP), clear of the default screen at the origin.
const FIRST_LEFT: i64 = 10_000;
/// Space left between added screens (DIP), so no two touch.
const GAP: i64 = 1_000;

/// Whether a session's pages draw at its display's scale, on a screen of their own: frames
/// on demand, `wanted`
/// ([`SessionOptions::render_at_display_scale`](super::SessionOptions::render_at_display_scale)),
/// DPR 1, and a display that is the viewport scaled down with its exact aspect (each frame
/// then comes out at the display's size to the pixel).
pub(super) fn draws_at_display_scale(
    on_demand: bool,
    wanted: bool,
    dpr: f64,
    viewport: Size,
    display: Size,
) -> bool {
    let (vw, vh) = (u64::from(viewport.width), u64::from(viewport.height));
    let (dw, dh) = (u64::from(display.width), u64::from(display.height));
    let same_aspect = dw * vh == dh * vw;
    on_demand && wanted && dpr == 1.0 && same_aspect && dw < vw && dw > 0
}

/// The screens added to one Chromium process, by the viewport and display they serve.
#[derive(Default)]
pub(super) struct Screens {
    /// The generation (Chromium process) these screens belong to; a new one starts over.
    generation: u64,
    /// `(viewport, display)` → the screen's top-left corner (DIP).
    placed: HashMap<(Size, Size), (i64, i64)>,
    next_left: i64,
}

/// Where a session's windows go: the screen for its viewport and display.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ScreenPlace {
    pub(super) left: i64,
    pub(super) top: i64,
    pub(super) viewport: Size,
}

impl ScreenPlace {
    /// The same window on the default screen (at the origin, device pixel ratio 1).
    pub(super) fn at_default_screen(self) -> Self {
        Self {
            left: 0,
            top: 0,
            ..self
        }
    }
}

/// The screen of `viewport` shown at `display` in `generation`, added through `page`
/// (any page of that process: screens are the browser's) when it is not there yet. Its
/// size is the viewport in DIP, so a page's `screen` is its window's size.
pub(super) async fn screen_for(
    screens: &tokio::sync::Mutex<Screens>,
    generation: u64,
    page: &Page,
    viewport: Size,
    display: Size,
) -> Result<ScreenPlace> {
    let mut screens = screens.lock().await;
    if screens.generation != generation {
        *screens = Screens {
            generation,
            placed: HashMap::new(),
            next_left: FIRST_LEFT,
        };
    }
    if let Some(&(left, top)) = screens.placed.get(&(viewport, display)) {
        return Ok(ScreenPlace {
            left,
            top,
            viewport,
        });
    }
    let left = screens.next_left;
    let mut add =
        AddScreenParams::new(left, 0, i64::from(display.width), i64::from(display.height));
    add.device_pixel_ratio = Some(f64::from(display.width) / f64::from(viewport.width));
    let added = page.execute(add).await.map_err(cdp)?;
    let info = &added.result.screen_info;
    screens.next_left = left + i64::from(viewport.width) + GAP;
    screens
        .placed
        .insert((viewport, display), (info.left, info.top));
    Ok(ScreenPlace {
        left: info.left,
        top: info.top,
        viewport,
    })
}

/// Moves `page`'s window onto `place`'s screen, at the viewport's size (DIP).
pub(super) async fn move_window(
    browser: &chromiumoxide::Browser,
    page: &Page,
    place: ScreenPlace,
) -> Result<()> {
    let window = browser
        .execute(GetWindowForTargetParams {
            target_id: Some(page.target_id().clone()),
        })
        .await
        .map_err(cdp)?;
    let bounds = Bounds {
        left: Some(place.left),
        top: Some(place.top),
        width: Some(i64::from(place.viewport.width)),
        height: Some(i64::from(place.viewport.height)),
        window_state: None,
    };
    browser
        .execute(SetWindowBoundsParams::new(window.result.window_id, bounds))
        .await
        .map_err(cdp)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::draws_at_display_scale;
    use crate::display::Size;

    #[test]
    fn only_dpr_one_sessions_with_a_smaller_display_of_the_same_aspect() {
        let vp = Size::new(1280, 800);
        let small = Size::new(1024, 640);
        assert!(draws_at_display_scale(true, true, 1.0, vp, small));
        assert!(draws_at_display_scale(
            true,
            true,
            1.0,
            vp,
            Size::new(800, 500)
        ));
        // Not drawn on demand, opted out, another DPR, no smaller, another aspect.
        assert!(!draws_at_display_scale(false, true, 1.0, vp, small));
        assert!(!draws_at_display_scale(true, false, 1.0, vp, small));
        assert!(!draws_at_display_scale(true, true, 2.0, vp, small));
        assert!(!draws_at_display_scale(true, true, 1.0, vp, vp));
        assert!(!draws_at_display_scale(
            true,
            true,
            1.0,
            vp,
            Size::new(1000, 640)
        ));
    }
}
