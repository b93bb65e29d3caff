//! A computer session as `cordon computer` sets it up and `cordon replay` sets it up again:
//! the shape of `session.json`, and the browser, session, desktop and engine options made
//! from it.

use std::path::{Path, PathBuf};

use cordon_computer::EngineOptions;
use cordon_computer::browser::{Browser, BrowserOptions, SessionOptions};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::origin::OriginPolicy;
use cordon_protocol::computer::Vendor;
use serde::{Deserialize, Serialize};

/// How a desktop session was set up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DesktopMeta {
    pub screen: Size,
    pub depth: u8,
    pub launch: Vec<String>,
}

/// Everything needed to set the session up again (`session.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct SessionMeta {
    #[serde(default)]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desktop: Option<DesktopMeta>,
    pub viewport: Size,
    pub dpr: f64,
    /// The page reads `dpr` exactly, never the display's scale
    /// (`SessionOptions::render_at_display_scale` off).
    #[serde(default)]
    pub exact_dpr: bool,
    pub display: DisplaySpec,
    pub policy: OriginPolicy,
    pub image_format: ImageFormat,
    pub rules: Rules,
    pub vendor: Vendor,
}

/// Starts Chromium for one session.
pub async fn launch(
    chromium: Option<&Path>,
    uncapped_frames: bool,
    no_sandbox: bool,
) -> anyhow::Result<Browser> {
    let mut opts = BrowserOptions::default();
    if let Some(p) = chromium {
        opts = opts.executable(p);
    }
    opts.uncapped_frames = uncapped_frames;
    opts.no_sandbox = no_sandbox;
    Ok(Browser::launch(opts).await?)
}

/// The browser session `meta` describes.
pub fn session_options(meta: &SessionMeta, downloads: Option<PathBuf>) -> SessionOptions {
    let mut o = SessionOptions::default();
    o.viewport = meta.viewport;
    o.dpr = meta.dpr;
    o.display = meta.display;
    o.policy = meta.policy.clone();
    o.start_url = Some(meta.url.clone());
    o.downloads = downloads;
    o.render_at_display_scale = !meta.exact_dpr;
    o
}

/// The desktop session `meta` and `d` describe.
#[cfg(feature = "desktop")]
pub fn desktop_options(
    meta: &SessionMeta,
    d: &DesktopMeta,
    xvfb: Option<&Path>,
) -> cordon_computer::desktop::DesktopOptions {
    let mut o = cordon_computer::desktop::DesktopOptions::default();
    o.screen = d.screen;
    o.depth = d.depth;
    o.display = meta.display;
    o.launch = d.launch.clone();
    if let Some(x) = xvfb {
        o.xvfb = x.to_owned();
    }
    o
}

/// The error for a desktop session in a build without the `desktop` feature.
#[cfg(not(feature = "desktop"))]
pub fn no_desktop() -> anyhow::Error {
    anyhow::anyhow!("this cordon was built without the `desktop` feature")
}

/// The engine options of a session: its approval rules and screenshot format.
pub fn engine_options(meta: &SessionMeta) -> EngineOptions {
    let mut engine = EngineOptions::default();
    engine.rules = meta.rules.clone();
    engine.format = meta.image_format;
    engine
}
