//! How to start Chromium ([`BrowserOptions`]) and how one session looks and what it may
//! do ([`SessionOptions`]), with the defaults and limits they refer to.

use crate::display::{DisplaySpec, Size};
use crate::origin::{OriginPattern, OriginPolicy};
use std::path::PathBuf;
use std::time::Duration;

/// Debian's real binary (`/usr/bin/chromium` is a wrapper that adds flags).
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// Debian's old headless shell (`chromium-headless-shell`): it keeps begin-frame control,
/// so a step's screenshot can be a frame drawn right after the action (see
/// [`BrowserOptions::frames_on_demand`] and [`BrowserOptions::frame_scale`]). Opt-in
/// (`CORDON_CHROMIUM` or [`BrowserOptions::executable`]): only with a frame scale equal
/// to the sessions' model scale is its step faster than [`DEFAULT_CHROMIUM`]'s (figures
/// in `docs/benchmarks.md`).
pub const HEADLESS_SHELL: &str = "/usr/lib/chromium/chromium-headless-shell";

/// Most pages (the session's own, tabs, popups) one session may have open at once. A page
/// that opens windows in a loop gets its extra windows closed as they open, so it cannot
/// take the shared Chromium down; the model is told in the step's text.
pub const MAX_OPEN_PAGES: usize = 20;

/// How long a step waits at most for the page to settle, by default.
pub const DEFAULT_SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// How to start Chromium.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrowserOptions {
    pub executable: PathBuf,
    /// Upper bound on one CDP command (a hung browser fails the step instead of hanging it).
    pub request_timeout: Duration,
    pub extra_args: Vec<String>,
    /// Draw frames as soon as they are ready instead of at the 60 Hz tick
    /// (`--disable-gpu-vsync --disable-frame-rate-limit`). A capture is then faster, but a
    /// page with a running animation costs far more CPU (figures in `docs/benchmarks.md`,
    /// "The 60 Hz frame clock"). Off by default; worth it for one or two busy sessions.
    pub uncapped_frames: bool,
    /// Start Chromium without its own sandbox (`--no-sandbox`). Chromium's sandbox cannot
    /// run as root, and [`Browser::launch`](super::Browser::launch) refuses to start Chromium as root unless this
    /// is set: the choice to drop that layer is the operator's, made explicitly
    /// (`--no-browser-sandbox`).
    pub no_sandbox: bool,
    /// Origins every session may reach at private-network addresses although they are not
    /// on its allow-list (the operator's `--allow-origin`).
    pub allow_origins: Vec<OriginPattern>,
    /// Lifts the private-network rule for every session (`--allow-private-network`).
    pub allow_private_network: bool,
    /// Draw frames only when Cordon asks (`--enable-begin-frame-control`): a step's
    /// screenshot is then the frame drawn right after the action, instead of waiting for
    /// Chromium's next 60 Hz tick. Only the old headless shell ([`HEADLESS_SHELL`]) can;
    /// `None` (the default) turns it on exactly when `executable` is that binary.
    pub frames_on_demand: Option<bool>,
    /// With frames on demand: a device scale factor for Chromium to render every page at
    /// (`--force-device-scale-factor`), e.g. `Some(0.8)` where sessions show a 1280×800
    /// viewport as 1024×640: each frame then comes at the model's size as drawn, with no
    /// resize here (figures in `docs/benchmarks.md`). Sessions at another scale are
    /// captured at their own. `None` (the default): frames at the viewport's size,
    /// resized here. Only for sessions at DPR 1: a page emulating another DPR on top of a
    /// forced scale sees it rounded (`devicePixelRatio` 2.0000000298) and was measured to
    /// show stale tiles.
    pub frame_scale: Option<f64>,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            executable: std::env::var_os("CORDON_CHROMIUM")
                .map_or_else(|| PathBuf::from(DEFAULT_CHROMIUM), PathBuf::from),
            request_timeout: Duration::from_secs(15),
            extra_args: Vec::new(),
            uncapped_frames: false,
            no_sandbox: false,
            allow_origins: Vec::new(),
            allow_private_network: false,
            frames_on_demand: None,
            frame_scale: None,
        }
    }
}

impl BrowserOptions {
    pub fn executable(mut self, path: impl Into<PathBuf>) -> Self {
        self.executable = path.into();
        self
    }

    /// Whether this browser draws frames on demand (see [`Self::frames_on_demand`]).
    pub fn draws_on_demand(&self) -> bool {
        self.frames_on_demand
            .unwrap_or_else(|| super::frames::is_headless_shell(&self.executable))
    }
}

/// How one session looks and what it may do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionOptions {
    /// CSS pixels.
    pub viewport: Size,
    pub dpr: f64,
    pub display: DisplaySpec,
    pub policy: OriginPolicy,
    /// `Some(dir)`: downloads are allowed and land in `dir`. `None`: refused.
    pub downloads: Option<PathBuf>,
    /// The longest a step waits for the page to settle (`settle_timeout_ms` over HTTP):
    /// for its network to go quiet and then for the screen to stop changing. At the cap
    /// the page is captured as it is and the step says `settle: timeout`. Default
    /// [`DEFAULT_SETTLE_TIMEOUT`].
    pub settle_cap: Duration,
    /// Opened when the session starts.
    pub start_url: Option<String>,
    /// Capture the whole viewport as the first frame of a screencast started for it,
    /// scaled by the compositor, instead of `Page.captureScreenshot`. Off by default: that
    /// frame is a copy of what the compositor last drew, which can predate the action's
    /// effects (measured: 66 of 210 bench steps showed the page before the click, see
    /// `docs/benchmarks.md`), while `Page.captureScreenshot` makes Chromium draw a new
    /// frame after the action and copies that one. `true` trades that guarantee for about
    /// a frame less per step.
    /// Zoomed regions always use `Page.captureScreenshot`.
    pub screencast: bool,
    /// Files a file chooser of the page is answered with (one for a single-file input,
    /// all for a multiple one). Empty: every file chooser is refused and nothing is
    /// uploaded. The `file-upload` gate rule still applies to clicks on file inputs.
    pub uploads: Vec<PathBuf>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            viewport: Size::new(1280, 800),
            dpr: 1.0,
            display: DisplaySpec::Fixed {
                size: Size::new(1024, 640),
            },
            policy: OriginPolicy::default(),
            downloads: None,
            settle_cap: DEFAULT_SETTLE_TIMEOUT,
            start_url: None,
            screencast: false,
            uploads: Vec::new(),
        }
    }
}
