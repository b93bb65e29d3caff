//! How to start Chromium ([`BrowserOptions`]) and how one session looks and what it may
//! do ([`SessionOptions`]), with the defaults and limits they refer to.

use crate::display::{DisplaySpec, Size};
use crate::origin::{OriginPattern, OriginPolicy};
use std::path::PathBuf;
use std::time::Duration;

/// Debian's real binary (`/usr/bin/chromium` is a wrapper that adds flags): new headless,
/// drawing on Chromium's own 60 Hz frame clock. The default where [`HEADLESS_SHELL`] is
/// not installed.
pub const CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// Debian's old headless shell (`chromium-headless-shell`): it keeps begin-frame control,
/// so a step's screenshot is a frame drawn right after the action, at the model's size
/// (see [`BrowserOptions::frames_on_demand`] and
/// [`SessionOptions::render_at_display_scale`]). The default binary where it is installed
/// (figures in `docs/benchmarks.md`).
pub const HEADLESS_SHELL: &str = "/usr/lib/chromium/chromium-headless-shell";

/// The binary [`BrowserOptions::default`] starts: `CORDON_CHROMIUM` when set, else
/// [`HEADLESS_SHELL`] when it is installed, else [`CHROMIUM`].
pub fn default_chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CORDON_CHROMIUM") {
        return PathBuf::from(path);
    }
    if std::path::Path::new(HEADLESS_SHELL).exists() {
        PathBuf::from(HEADLESS_SHELL)
    } else {
        PathBuf::from(CHROMIUM)
    }
}

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
    /// Chromium's next 60 Hz tick. Only the old headless shell ([`HEADLESS_SHELL`], the
    /// default binary where installed) can; `None` (the default) turns it on exactly when
    /// `executable` is that binary.
    pub frames_on_demand: Option<bool>,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            executable: default_chromium(),
            request_timeout: Duration::from_secs(15),
            extra_args: Vec::new(),
            uncapped_frames: false,
            no_sandbox: false,
            allow_origins: Vec::new(),
            allow_private_network: false,
            frames_on_demand: None,
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
    /// With frames on demand, at DPR 1, where the display is the viewport scaled down with
    /// the same aspect (the default 1024×640 of 1280×800): draw the session's pages at the
    /// display's scale, so one drawn frame is the model's image, with no re-render or
    /// resize (see `docs/computer-use.md`, "Frames on demand"). The page then reads that
    /// scale as its `devicePixelRatio` (0.8, as the float `0.800000011920929`); CSS
    /// pixels, layout and input are unchanged. On by default; `false` keeps the page at
    /// DPR 1 exactly and captures with `Page.captureScreenshot` at the display's scale
    /// (slower: Chromium draws the page again at that scale over a few frames).
    pub render_at_display_scale: bool,
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
            render_at_display_scale: true,
        }
    }
}
