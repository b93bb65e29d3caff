//! How one desktop session looks and what runs in it ([`DesktopOptions`]), and the gate
//! rules that make sense on a desktop ([`default_rules`]).

use crate::display::{DisplaySpec, Size};
use crate::gate::{Decision, Rule, Rules};
use std::path::PathBuf;
use std::time::Duration;

/// How one desktop session looks and what runs in it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DesktopOptions {
    /// The X screen in pixels.
    pub screen: Size,
    /// Bits per pixel of the screen: 16 or 24.
    pub depth: u8,
    /// The model display (what the model sees; the screen is scaled to it).
    pub display: DisplaySpec,
    /// Programs to launch into the display, each a command line split like a shell would
    /// (`xterm -e 'cat > f'`) but run without a shell.
    pub launch: Vec<String>,
    /// Extra environment for the launched programs (on top of `DISPLAY`, `XAUTHORITY`,
    /// `HOME`, `PATH`, `LANG`, `LC_ALL`; nothing else of the host's is passed on).
    pub env: Vec<(String, String)>,
    /// The `Xvfb` binary (`CORDON_XVFB` or `Xvfb` on `PATH`).
    pub xvfb: PathBuf,
    /// Where the session directory goes (the system temp dir by default).
    pub base_dir: Option<PathBuf>,
    /// The longest the X server may take to come up.
    pub start_timeout: Duration,
    /// The longest a step waits for the screen to settle; also the longest start waits
    /// for the launched programs to map their windows.
    pub settle_cap: Duration,
    /// How long nothing may be drawn before the screen counts as settled.
    pub settle_quiet: Duration,
    /// Use MIT-SHM for captures when the server has it (plain GetImage otherwise).
    pub shm: bool,
}

impl Default for DesktopOptions {
    fn default() -> Self {
        Self {
            screen: Size::new(1280, 800),
            depth: 24,
            display: DisplaySpec::Fixed {
                size: Size::new(1024, 640),
            },
            launch: Vec::new(),
            env: Vec::new(),
            xvfb: std::env::var_os("CORDON_XVFB")
                .map_or_else(|| PathBuf::from("Xvfb"), PathBuf::from),
            base_dir: None,
            start_timeout: Duration::from_secs(10),
            settle_cap: Duration::from_secs(3),
            settle_quiet: Duration::from_millis(3),
            shm: true,
        }
    }
}

/// Rules that make sense on a desktop: ask before any Ctrl+Alt chord (they switch
/// terminals and kill X servers on real machines).
pub fn default_rules() -> Rules {
    let mut rules = Rules::allow_all();
    rules.rules.push(
        Rule::new("ctrl-alt-chord", Decision::Ask)
            .actions(&["key", "hold_key"])
            .keys(&["ctrl+alt+*"]),
    );
    rules
}
