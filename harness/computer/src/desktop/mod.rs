//! The desktop backend (feature `desktop`): one isolated X display per session (`Xvfb`),
//! the programs it was asked to launch, input through enigo (XTEST) and capture through
//! x11rb, behind the same [`Backend`] as the browser, so actions, scaling, gates and
//! trajectories are the browser's.
//!
//! - [`DesktopSession::start`] starts `Xvfb -displayfd` on a free display with its own
//!   cookie, connects, and launches the programs with a clean environment (`HOME` in the
//!   session's directory); every process is stopped with the session, on `close`, on drop
//!   and on a failed start (see `xvfb`).
//! - Settling watches the screen instead of sleeping: XDamage on the root window says when
//!   something was drawn, and `/proc` says whether the X server, the launched programs and
//!   what they started (a terminal's shell and its command) are still running (state
//!   `R`/`D`) or waiting. The step is settled when all have been waiting for two polls in
//!   a row and nothing was drawn for `settle_quiet`; a program that keeps drawing or
//!   spinning ends at `settle_cap` with `settled: false`.
//! - The gates see windows: the element under a point (or holding focus) is
//!   `ElementInfo { tag: "window", text: <title>, name: <WM_CLASS class> }`, so rules can
//!   match titles (`window_title`) as well as action kinds and key chords.
//! - `current_url` is `x11:<title of the focused window>` (`x11:` over the bare root):
//!   a desktop has no URL, and the title is what tells the model where keys go.
//!
//! See docs/desktop.md for the design, the process model and the enigo workarounds.
//!
//! ```no_run
//! # async fn demo() -> cordon_computer::Result<()> {
//! use cordon_computer::desktop::{DesktopOptions, DesktopSession, default_rules};
//! use cordon_computer::{Computer, EngineOptions};
//! use cordon_protocol::computer::{Vendor, decode};
//! let mut opts = DesktopOptions::default(); // 1280×800×24, shown to the model as 1024×640
//! opts.launch = vec!["xterm -geometry 80x24+0+0 -e sh -c 'cat > notes.txt'".into()];
//! let session = DesktopSession::start(opts).await?;
//! let mut engine = EngineOptions::default();
//! engine.rules = default_rules();
//! let mut computer = Computer::new(session, engine);
//! for action in [
//!     serde_json::json!({"action": "left_click", "coordinate": [200, 150]}),
//!     serde_json::json!({"action": "type", "text": "hello äöü €\n"}),
//! ] {
//!     let report = computer.step(decode(Vendor::Anthropic, &action)?, Some(&action)).await?;
//!     println!("{:?} {:?}", report.status, report.current_url); // Ok Some("x11:sh")
//! }
//! computer.into_backend().close().await?; // Xvfb, xterm, its shell and cat all stop
//! # Ok(()) }
//! ```

mod input;
mod x11;
mod xvfb;

pub use x11::WindowInfo;
pub use xvfb::{MARKER, ProgramState, ProgramStatus, marked_processes};

use crate::display::{CapturePlan, CssPoint, DisplaySpec, Scaler, Size};
use crate::engine::Backend;
use crate::error::{ActionError, Error, Result};
use crate::gate::{Decision, ElementInfo, Rule, Rules};
use crate::image::{EncodedImage, ImageFormat, encode_rgb, resize_rgb, resize_x4};
use crate::ops::{Op, PX_PER_TICK};
use crate::origin::OriginPolicy;
use enigo::{Enigo, Settings};
use input::{Input, char_keysym, key_keysym};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use x11::{Pixels, X11, bgrx_to_rgb};
use xvfb::{Program, Xvfb};

/// How often settling looks at the screen and the processes.
const TICK: Duration = Duration::from_millis(1);
/// Idle polls in a row that count as settled.
const IDLE_POLLS: u32 = 2;
/// Idle polls in a row before enigo may rebind a keycode. Two were not always enough under
/// load: both looks can fall before a terminal is woken for the presses already sent, and
/// the press then reads the rebound keysym (3 of 218 characters lost in 1 of 6 loaded test
/// runs). A drain happens only when a text outruns the spare keycodes, so the few
/// milliseconds more cost little.
const DRAIN_IDLE_POLLS: u32 = 6;
/// The most wheel notches one scroll sends (each is an XTEST press and release, so a
/// `scroll_amount` of four billion would otherwise keep the step busy for hours).
const MAX_NOTCHES: f64 = 100.0;

/// Runs blocking work (x11rb round trips, enigo's XTEST calls, encoding a capture)
/// without stalling the other tasks of a multi-threaded runtime: the worker hands them to
/// another thread first. A hostile program can hold the server (`XGrabServer`), and then
/// every round trip waits for it.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

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

/// The processes of a session; stopping them is also what `Drop` does.
#[derive(Debug)]
struct Procs {
    id: String,
    xvfb: Option<Xvfb>,
    programs: Vec<Program>,
}

impl Procs {
    fn stop(&mut self) {
        xvfb::stop_all(&self.id, &mut self.programs, self.xvfb.as_mut());
        // Reaped now: their group numbers are free for others and must not be signalled
        // again (`close` stops, and then the drop would).
        self.xvfb = None;
        self.programs.clear();
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        // A session dropped on the runtime (a failed or cancelled request) waits for its
        // processes to stop without holding up other tasks.
        blocking(|| self.stop());
    }
}

/// One isolated X display with its programs.
#[derive(Debug)]
pub struct DesktopSession {
    // Field order is drop order: X connections close before the processes stop.
    input: Input,
    x: X11,
    procs: Procs,
    dir: tempfile::TempDir,
    home: PathBuf,
    scaler: Scaler,
    policy: OriginPolicy,
    opts: DesktopOptions,
    lost: Option<String>,
    exits: Vec<ProgramStatus>,
    /// When something was last drawn on the screen.
    drawn: Option<Instant>,
    /// Descendants of the launched programs, as last seen.
    family: Vec<u32>,
}

fn username(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

/// Connects enigo to `display`. enigo's x11rb connect only reads a cookie from
/// `$XAUTHORITY`, which is process-wide; instead, our uid is let in by name for the
/// moment of the connect (or, without a passwd entry, access control is off for it).
fn connect_enigo(x: &X11, display: u32) -> Result<Enigo> {
    let settings = Settings {
        linux_delay: 0,
        x11_display: Some(format!(":{display}")),
        release_keys_when_dropped: true,
        ..Settings::default()
    };
    let user = username(rustix::process::getuid().as_raw());
    match &user {
        Some(u) => x.allow_local_user(u, true)?,
        None => x.set_access_control(false)?,
    }
    let enigo = Enigo::new(&settings);
    match &user {
        Some(u) => x.allow_local_user(u, false)?,
        None => x.set_access_control(true)?,
    }
    enigo.map_err(|e| Error::Desktop(format!("enigo could not connect to :{display}: {e}")))
}

fn floor_px(v: f64, max: u32) -> i32 {
    (v.floor().max(0.0) as i64).min(i64::from(max.saturating_sub(1))) as i32
}

impl DesktopSession {
    /// Starts the display and the programs, and waits until they have drawn.
    pub async fn start(opts: DesktopOptions) -> Result<Self> {
        let session = tokio::task::spawn_blocking(move || Self::start_blocking(opts))
            .await
            .map_err(|e| Error::Desktop(format!("start task: {e}")))??;
        let mut session = session;
        session.settle_inner().await?;
        Ok(session)
    }

    fn start_blocking(opts: DesktopOptions) -> Result<Self> {
        if !matches!(opts.depth, 16 | 24) {
            return Err(Error::Config(format!(
                "screen depth must be 16 or 24, got {}",
                opts.depth
            )));
        }
        let Size { width, height } = opts.screen;
        if !(64..=8192).contains(&width) || !(64..=8192).contains(&height) {
            return Err(Error::Config(format!(
                "screen {}: each side must be 64..=8192 pixels",
                opts.screen
            )));
        }
        let base = opts.base_dir.clone().unwrap_or_else(std::env::temp_dir);
        // Owner only: it holds the cookie, the programs' logs and their HOME.
        let dir = tempfile::Builder::new()
            .prefix("cordon-desktop-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&base)
            .map_err(|e| Error::Desktop(format!("session directory in {}: {e}", base.display())))?;
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home)
            .map_err(|e| Error::Desktop(format!("creating {}: {e}", home.display())))?;
        let id = xvfb::hex(&xvfb::random_bytes::<8>()?);
        let mut procs = Procs {
            id: id.clone(),
            xvfb: None,
            programs: Vec::new(),
        };
        let server = Xvfb::start(
            &opts.xvfb,
            dir.path(),
            &id,
            (width, height, opts.depth),
            opts.start_timeout,
        )?;
        let (display, socket, cookie) = (server.display, server.socket(), server.cookie);
        procs.xvfb = Some(server);
        let x = X11::connect(&socket, &cookie, opts.shm)?;
        let enigo = connect_enigo(&x, display)?;
        let input = Input::new(enigo, x.key_table()?);
        let scaler = Scaler::new(opts.display.resolve(opts.screen), opts.screen, 1.0);
        let mut session = Self {
            input,
            x,
            procs,
            dir,
            home,
            scaler,
            policy: OriginPolicy::default(),
            opts,
            lost: None,
            exits: Vec::new(),
            drawn: None,
            family: Vec::new(),
        };
        for command in session.opts.launch.clone() {
            session.launch(&command)?;
        }
        session.wait_for_windows()?;
        Ok(session)
    }

    /// Launches one more program into the display (it is not waited for).
    pub fn launch(&mut self, command: &str) -> Result<()> {
        let display = self.display_number();
        let mut env = vec![
            ("DISPLAY".to_owned(), format!(":{display}")),
            (
                "XAUTHORITY".to_owned(),
                self.auth_file().display().to_string(),
            ),
            ("HOME".to_owned(), self.home.display().to_string()),
            ("LANG".to_owned(), "C.UTF-8".to_owned()),
            ("LC_ALL".to_owned(), "C.UTF-8".to_owned()),
        ];
        env.extend(self.opts.env.iter().cloned());
        let index = self.procs.programs.len();
        let program = Program::launch(
            command,
            index,
            self.dir.path(),
            &self.home,
            &self.procs.id,
            &env,
        )?;
        self.procs.programs.push(program);
        Ok(())
    }

    /// Waits until every running program has mapped a window, or some window is up and
    /// everything waits for input (a launched program need not have a window), at most
    /// `settle_cap`.
    fn wait_for_windows(&mut self) -> Result<()> {
        if self.procs.programs.is_empty() {
            return Ok(());
        }
        let until = Instant::now() + self.opts.settle_cap;
        let mut idle = 0;
        loop {
            self.check_server()?;
            self.poll_programs();
            let running = self
                .procs
                .programs
                .iter()
                .filter(|p| p.state == ProgramState::Running)
                .count();
            let windows = self.x.windows()?.len();
            idle = if self.all_idle() { idle + 1 } else { 0 };
            if windows >= running || (windows > 0 && idle > IDLE_POLLS) || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(TICK);
        }
    }

    /// The session's id (the value of [`MARKER`] in every process it started).
    pub fn id(&self) -> &str {
        &self.procs.id
    }

    fn display_number(&self) -> u32 {
        self.procs.xvfb.as_ref().map_or(0, |x| x.display)
    }

    /// The X display name, e.g. `:3`.
    pub fn display(&self) -> String {
        format!(":{}", self.display_number())
    }

    fn auth_file(&self) -> PathBuf {
        self.procs.xvfb.as_ref().map_or_else(
            || self.dir.path().join("Xauthority"),
            |x| x.auth_file.clone(),
        )
    }

    /// `DISPLAY` and `XAUTHORITY` for running a tool of your own in this display.
    pub fn x_env(&self) -> Vec<(String, String)> {
        vec![
            ("DISPLAY".into(), self.display()),
            ("XAUTHORITY".into(), self.auth_file().display().to_string()),
        ]
    }

    /// The session directory (Xauthority, logs, `home/`); removed on close.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `HOME` of the launched programs.
    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn xvfb_pid(&self) -> Option<u32> {
        self.procs.xvfb.as_ref().map(Xvfb::pid)
    }

    /// Whether captures use MIT-SHM.
    pub fn uses_shm(&self) -> bool {
        self.x.uses_shm()
    }

    /// Mapped top-level windows, bottom to top.
    pub fn windows(&mut self) -> Result<Vec<WindowInfo>> {
        let r = self.x.windows();
        self.vet(r)
    }

    /// Every launched program and what it is doing.
    pub fn programs(&mut self) -> Vec<ProgramStatus> {
        self.poll_programs();
        self.procs.programs.iter().map(Program::status).collect()
    }

    /// Programs that exited since the last call.
    pub fn take_exits(&mut self) -> Vec<ProgramStatus> {
        self.poll_programs();
        std::mem::take(&mut self.exits)
    }

    fn poll_programs(&mut self) {
        for p in &mut self.procs.programs {
            if p.poll() {
                self.exits.push(p.status());
            }
        }
    }

    /// Stops every process of the session and removes its directory. (Dropping the
    /// session does the same; this is the orderly way: keys are released and enigo's
    /// connection closed while the server still answers.)
    pub async fn close(self) -> Result<()> {
        let Self {
            mut input,
            x,
            mut procs,
            dir,
            ..
        } = self;
        // Stopping waits for processes (up to a grace period each): not on the runtime.
        tokio::task::spawn_blocking(move || {
            input.release_all();
            drop(input);
            drop(x);
            procs.stop();
            drop(dir);
        })
        .await
        .map_err(|e| Error::Desktop(format!("close task: {e}")))
    }

    /// Fails once the X server is gone, for good.
    fn check_server(&mut self) -> Result<()> {
        if self.lost.is_none()
            && let Some(x) = self.procs.xvfb.as_ref()
            && let Some(status) = x.exited()
        {
            let log = xvfb::tail(&x.log);
            self.lost = Some(format!(
                "Xvfb {} exited ({status}); log: {log}",
                self.display()
            ));
        }
        match &self.lost {
            Some(reason) => Err(Error::DisplayLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Turns an X failure into [`Error::DisplayLost`] when the server is gone.
    fn vet<T>(&mut self, r: Result<T>) -> Result<T> {
        match r {
            Ok(v) => Ok(v),
            Err(e @ Error::Action(_)) => Err(e),
            Err(e) => {
                // Give a dying server a moment to be reaped, so the error says why.
                for _ in 0..50 {
                    self.check_server()?;
                    if !self.x_alive() {
                        std::thread::sleep(Duration::from_millis(2));
                    } else {
                        break;
                    }
                }
                self.check_server()?;
                Err(e)
            }
        }
    }

    fn x_alive(&self) -> bool {
        self.x.sync().is_ok()
    }

    fn point(&self, p: CssPoint) -> (i32, i32) {
        (
            floor_px(p.x, self.opts.screen.width),
            floor_px(p.y, self.opts.screen.height),
        )
    }

    fn element(&self, window: Option<u32>) -> Result<Option<ElementInfo>> {
        let Some(w) = window else {
            return Ok(None);
        };
        let (title, class) = self.x.describe(w)?;
        let mut el = ElementInfo::new("window");
        el.text = title;
        el.name = class.map(|(_, class)| class).filter(|c| !c.is_empty());
        Ok(Some(el))
    }

    /// After a `MappingNotify`: a new layout (not just enigo binding a spare keycode)
    /// means a new table and a new enigo, which reads the map only when it connects. The
    /// old one goes first, so that its bindings are gone from what the new one sees.
    fn refresh_keymap(&mut self) -> Result<()> {
        if self.input.refresh(self.x.key_table()?) {
            return Ok(());
        }
        self.input.disconnect();
        self.x.sync()?;
        let enigo = connect_enigo(&self.x, self.display_number())?;
        let table = self.x.key_table()?;
        self.input.reconnect(enigo, table);
        Ok(())
    }

    /// Waits until the X server and the programs have read their input (idle
    /// [`DRAIN_IDLE_POLLS`] times in a row), without the settle rules about drawing; for
    /// typing that must let clients catch up before enigo rebinds a keycode.
    async fn drain_clients(&mut self) -> Result<()> {
        let until = Instant::now() + self.opts.settle_cap;
        let mut idle = 0;
        while idle < DRAIN_IDLE_POLLS && Instant::now() < until {
            self.check_server()?;
            idle = if self.all_idle() { idle + 1 } else { 0 };
            tokio::time::sleep(TICK).await;
        }
        Ok(())
    }

    fn all_idle(&self) -> bool {
        self.procs
            .xvfb
            .as_ref()
            .is_none_or(|x| xvfb::is_idle(x.pid()))
            && self
                .procs
                .programs
                .iter()
                .filter(|p| p.state == ProgramState::Running)
                .all(|p| xvfb::is_idle(p.pid()))
    }

    /// Reads what the server reported: a changed keyboard map is taken over at once (so
    /// typing right after `setxkbmap` uses the new layout); drawing is remembered.
    fn pump(&mut self) -> Result<bool> {
        let seen = self.x.poll();
        let seen = self.vet(seen)?;
        if seen.mapping {
            let r = self.refresh_keymap();
            self.vet(r)?;
        }
        if seen.damage {
            self.drawn = Some(Instant::now());
        }
        Ok(seen.damage)
    }

    fn running_pids(&self) -> Vec<u32> {
        self.procs
            .programs
            .iter()
            .filter(|p| p.state == ProgramState::Running)
            .map(Program::pid)
            .collect()
    }

    async fn settle_inner(&mut self) -> Result<bool> {
        let deadline = Instant::now() + self.opts.settle_cap;
        let mut idle = 0;
        // What the programs started (the shell in a terminal and the command it runs)
        // counts too: a terminal is idle while `ls` still works on its output. Known
        // from the last look; newcomers are caught by the look before settling.
        let mut family = std::mem::take(&mut self.family);
        loop {
            self.check_server()?;
            self.poll_programs();
            let damage = self.pump()?;
            let drawn = self.drawn;
            let waiting = self.all_idle() && family.iter().all(|p| xvfb::is_idle(*p));
            idle = if waiting && !damage { idle + 1 } else { 0 };
            let quiet = drawn.is_none_or(|t| t.elapsed() >= self.opts.settle_quiet);
            if idle >= IDLE_POLLS && quiet {
                // One more look at the whole family: a process started since the last
                // look (the shell forked a command) may be the one still working.
                let fresh = xvfb::descendants(&self.running_pids());
                let busy = fresh
                    .iter()
                    .any(|(p, state)| matches!(state, 'R' | 'D') || !family.contains(p));
                family = fresh.into_iter().map(|(p, _)| p).collect();
                if !busy {
                    self.family = family;
                    return Ok(true);
                }
                idle = 0;
            }
            if Instant::now() >= deadline {
                self.family = family;
                return Ok(false);
            }
            tokio::time::sleep(TICK).await;
        }
    }

    async fn type_text(&mut self, text: &str) -> Result<()> {
        let chars: Vec<char> = text.chars().collect();
        let mut next = 0;
        let mut drained = false;
        while next < chars.len() {
            // Type until a character needs the clients to catch up first (then wait for
            // them off the blocking section and type it).
            let stop = blocking(|| -> Result<usize> {
                for (i, c) in chars.iter().enumerate().skip(next) {
                    let sym = self.input.resolve(char_keysym(*c)?);
                    if self.input.needs_drain(sym) && !(drained && i == next) {
                        return Ok(i);
                    }
                    let r = self.input.tap(sym);
                    self.vet(r)?;
                }
                Ok(chars.len())
            })?;
            drained = stop < chars.len();
            if drained {
                self.drain_clients().await?;
            }
            next = stop;
        }
        Ok(())
    }

    async fn run_inner(&mut self, op: &Op) -> Result<()> {
        self.check_server()?;
        self.pump()?;
        match op {
            Op::Text { text } => self.type_text(text).await,
            Op::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(())
            }
            other => blocking(|| self.run_blocking(other)),
        }
    }

    fn run_blocking(&mut self, op: &Op) -> Result<()> {
        match op {
            Op::Move { to, .. } => {
                let (x, y) = self.point(*to);
                self.input.move_to(x, y)
            }
            Op::Down { at, button, .. } | Op::Up { at, button, .. } => {
                let (x, y) = self.point(*at);
                self.input.move_to(x, y)?;
                self.input.button(*button, matches!(op, Op::Down { .. }))
            }
            Op::Wheel { at, dx, dy, .. } => {
                let (x, y) = self.point(*at);
                self.input.move_to(x, y)?;
                // X wheels click in notches; at least one for any nonzero distance.
                let notches = |d: f64| {
                    if d == 0.0 {
                        0
                    } else {
                        let n = (d / PX_PER_TICK).round().clamp(-MAX_NOTCHES, MAX_NOTCHES) as i32;
                        if n == 0 { d.signum() as i32 } else { n }
                    }
                };
                self.input.scroll(notches(*dy), false)?;
                self.input.scroll(notches(*dx), true)
            }
            Op::KeyDown { key, .. } => {
                let sym = self.input.resolve(key_keysym(key)?);
                self.input.key_down(sym)
            }
            Op::KeyUp { key, .. } => {
                let sym = self.input.resolve(key_keysym(key)?);
                self.input.key_up(sym)
            }
            other => Err(Error::Action(unsupported_op(other))),
        }
    }

    fn capture_inner(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage> {
        let c = plan.clip;
        let x0 = c.x.floor().max(0.0) as u32;
        let y0 = c.y.floor().max(0.0) as u32;
        let x1 = ((c.x + c.width).ceil() as u32).min(self.opts.screen.width);
        let y1 = ((c.y + c.height).ceil() as u32).min(self.opts.screen.height);
        let frame = self
            .x
            .capture(x0, y0, x1.saturating_sub(x0), y1.saturating_sub(y0));
        let frame = self.vet(frame)?;
        let got = Size::new(frame.width, frame.height);
        let resized = got != plan.out;
        let pixels = match frame.pixels {
            Pixels::Bgrx if resized => bgrx_to_rgb(&resize_x4(self.x.bgrx(got), got, plan.out)?),
            Pixels::Bgrx => bgrx_to_rgb(self.x.bgrx(got)),
            Pixels::Rgb(px) if resized => resize_rgb(px, got, plan.out)?,
            Pixels::Rgb(px) => px,
        };
        Ok(EncodedImage {
            data: encode_rgb(&pixels, plan.out, format)?,
            size: plan.out,
            format,
            resized,
        })
    }
}

fn unsupported_op(op: &Op) -> ActionError {
    let what = match op {
        Op::Navigate { .. } => "navigation (there is no browser here: open a program instead)",
        Op::History { .. } => "back/forward navigation",
        _ => "this operation",
    };
    ActionError::Unsupported {
        what: what.into(),
        backend: "desktop",
    }
}

impl Backend for DesktopSession {
    fn name(&self) -> &'static str {
        "desktop"
    }

    fn scaler(&self) -> Scaler {
        self.scaler
    }

    /// Unused on a desktop (nothing navigates); allow-all.
    fn policy(&self) -> &OriginPolicy {
        &self.policy
    }

    async fn element_at(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.check_server()?;
        let (x, y) = self.point(at);
        blocking(|| {
            let r = self.x.window_at(x, y).and_then(|w| self.element(w));
            self.vet(r)
        })
    }

    async fn focused_element(&mut self) -> Result<Option<ElementInfo>> {
        self.check_server()?;
        blocking(|| {
            let r = self.x.focused_window().and_then(|w| self.element(w));
            self.vet(r)
        })
    }

    async fn current_url(&mut self) -> Result<String> {
        let el = self.focused_element().await?;
        Ok(format!("x11:{}", el.map(|e| e.text).unwrap_or_default()))
    }

    async fn run(&mut self, op: &Op) -> Result<()> {
        let r = self.run_inner(op).await;
        if matches!(&r, Err(e) if !matches!(e, Error::Action(_))) {
            self.input.release_all();
        }
        self.vet(r)
    }

    async fn settle(&mut self) -> Result<bool> {
        self.settle_inner().await
    }

    async fn capture(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage> {
        self.check_server()?;
        blocking(|| self.capture_inner(plan, format))
    }

    fn check(&self, op: &Op) -> std::result::Result<(), ActionError> {
        match op {
            Op::KeyDown { key, .. } | Op::KeyUp { key, .. } => key_keysym(key).map(|_| ()),
            Op::Text { text } => text.chars().try_for_each(|c| char_keysym(c).map(|_| ())),
            Op::Navigate { .. } | Op::History { .. } => Err(unsupported_op(op)),
            _ => Ok(()),
        }
    }

    async fn pointer(&mut self) -> Result<Option<CssPoint>> {
        self.check_server()?;
        let (x, y) = blocking(|| {
            let r = self.x.pointer();
            self.vet(r)
        })?;
        // The centre of the pixel, as the scaler maps model pixels.
        Ok(Some(CssPoint {
            x: f64::from(x) + 0.5,
            y: f64::from(y) + 0.5,
        }))
    }
}
