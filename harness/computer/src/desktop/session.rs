//! [`DesktopSession`]: one isolated X display with its programs. Starting it (Xvfb, the X
//! connection, enigo, the launched programs), its handles, noticing a lost server, and
//! stopping every process with it.

use super::blocking::blocking;
use super::input::Input;
use super::options::DesktopOptions;
use super::x11::{WindowInfo, X11};
use super::xvfb::{self, Program, ProgramStatus, Xvfb};
use crate::display::{CssPoint, Scaler, Size};
use crate::error::{Error, Result};
use crate::gate::ElementInfo;
use crate::origin::OriginPolicy;
use enigo::{Enigo, Settings};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The processes of a session; stopping them is also what `Drop` does.
#[derive(Debug)]
pub(super) struct Procs {
    pub(super) id: String,
    pub(super) xvfb: Option<Xvfb>,
    pub(super) programs: Vec<Program>,
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
    pub(super) input: Input,
    pub(super) x: X11,
    pub(super) procs: Procs,
    pub(super) dir: tempfile::TempDir,
    pub(super) home: PathBuf,
    pub(super) scaler: Scaler,
    pub(super) policy: OriginPolicy,
    pub(super) opts: DesktopOptions,
    pub(super) lost: Option<String>,
    pub(super) exits: Vec<ProgramStatus>,
    /// When something was last drawn on the screen.
    pub(super) drawn: Option<Instant>,
    /// Descendants of the launched programs, as last seen.
    pub(super) family: Vec<u32>,
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

    /// The session's id (the value of [`MARKER`](super::MARKER) in every process it started).
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

    pub(super) fn poll_programs(&mut self) {
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
    pub(super) fn check_server(&mut self) -> Result<()> {
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
    pub(super) fn vet<T>(&mut self, r: Result<T>) -> Result<T> {
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

    pub(super) fn point(&self, p: CssPoint) -> (i32, i32) {
        (
            floor_px(p.x, self.opts.screen.width),
            floor_px(p.y, self.opts.screen.height),
        )
    }

    pub(super) fn element(&self, window: Option<u32>) -> Result<Option<ElementInfo>> {
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
    pub(super) fn refresh_keymap(&mut self) -> Result<()> {
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
}
