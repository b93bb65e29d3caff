//! The processes of a desktop session: one `Xvfb` and the programs launched into it.
//!
//! Every process starts with a cleared environment holding a session marker
//! (`CORDON_DESKTOP_SESSION=<id>`), in a process group of its own. Stopping signals each
//! group (TERM, then KILL after a short grace), then sweeps `/proc` for anything still
//! carrying the marker: that catches what left its group, such as the shell `xterm` starts
//! in a new session on its terminal. Nothing here needs `unsafe`: the display number comes
//! back on Xvfb's stdout (`-displayfd 1`), groups come from `CommandExt::process_group`,
//! signals from rustix.

use crate::error::{Error, Result};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use std::io::{BufRead as _, BufReader, Read as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that marks every process of a session.
pub const MARKER: &str = "CORDON_DESKTOP_SESSION";
/// `PATH` for launched programs (the host's is not passed on).
const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// How long TERM has before KILL.
const GRACE: Duration = Duration::from_millis(300);

/// A fresh random token: the session id and the X cookie.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N]> {
    let mut out = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut out))
        .map_err(|e| Error::Desktop(format!("reading /dev/urandom: {e}")))?;
    Ok(out)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One entry of an Xauthority file (FamilyWild: any host, this display number).
fn xauth_entry(display: Option<u32>, cookie: &[u8]) -> Vec<u8> {
    let number = display.map(|d| d.to_string()).unwrap_or_default();
    let mut out = Vec::new();
    out.extend_from_slice(&0xffffu16.to_be_bytes());
    for field in [&b""[..], number.as_bytes(), b"MIT-MAGIC-COOKIE-1", cookie] {
        out.extend_from_slice(&(field.len() as u16).to_be_bytes());
        out.extend_from_slice(field);
    }
    out
}

fn io(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let what = format!("{what} {}", path.display());
    move |e| Error::Desktop(format!("{what}: {e}"))
}

/// The last lines of a log file, for error messages.
pub(crate) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// The environment every process of the session starts with.
fn base_env(cmd: &mut Command, id: &str) {
    cmd.env_clear().env("PATH", SAFE_PATH).env(MARKER, id);
}

/// A running `Xvfb`.
pub(crate) struct Xvfb {
    child: Child,
    pub display: u32,
    pub cookie: [u8; 16],
    /// The Xauthority file launched programs get (`XAUTHORITY`).
    pub auth_file: PathBuf,
    pub log: PathBuf,
}

impl std::fmt::Debug for Xvfb {
    // Not derived: the cookie is the key to the display and must not end up in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Xvfb")
            .field("pid", &self.child.id())
            .field("display", &self.display)
            .field("auth_file", &self.auth_file)
            .field("log", &self.log)
            .finish_non_exhaustive()
    }
}

/// Writes an Xauthority file readable by its owner only (the session directory is private
/// too, but the cookie is the key to the display, so it does not rely on that alone).
fn write_auth(path: &Path, display: Option<u32>, cookie: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(&xauth_entry(display, cookie))
}

impl Xvfb {
    /// Starts Xvfb on a free display and waits until it accepts connections.
    pub fn start(
        exe: &Path,
        dir: &Path,
        id: &str,
        screen: (u32, u32, u8),
        timeout: Duration,
    ) -> Result<Self> {
        let cookie = random_bytes::<16>()?;
        let auth_file = dir.join("Xauthority");
        // The server reads every cookie in the file and ignores the display number.
        write_auth(&auth_file, None, &cookie).map_err(io("writing", &auth_file))?;
        let log = dir.join("xvfb.log");
        let log_file = std::fs::File::create(&log).map_err(io("creating", &log))?;
        let (w, h, depth) = screen;
        let mut cmd = Command::new(exe);
        base_env(&mut cmd, id);
        cmd.args(["-displayfd", "1", "-nolisten", "tcp", "-noreset", "-auth"])
            .arg(&auth_file)
            .args(["-screen", "0", &format!("{w}x{h}x{depth}")])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .process_group(0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::XvfbMissing {
                    path: exe.display().to_string(),
                });
            }
            Err(e) => return Err(Error::Desktop(format!("starting {}: {e}", exe.display()))),
        };
        // -displayfd writes the number it picked once the socket listens.
        let stdout = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let _read = BufReader::new(out).read_line(&mut line);
            }
            let _gone = tx.send(line);
        });
        let failed = |child: &mut Child, why: String| {
            stop_group(child, GRACE);
            Error::Desktop(format!("Xvfb did not start: {why}; log: {}", tail(&log)))
        };
        let line = match rx.recv_timeout(timeout) {
            Ok(line) => line,
            Err(_) => return Err(failed(&mut child, format!("no display after {timeout:?}"))),
        };
        let display = match line.trim().parse::<u32>() {
            Ok(d) => d,
            Err(_) => {
                let why = match ended(&child) {
                    Some(s) => format!("it exited ({})", describe_status(s)),
                    None => format!("unexpected -displayfd output {line:?}"),
                };
                return Err(failed(&mut child, why));
            }
        };
        if let Err(e) = write_auth(&auth_file, Some(display), &cookie) {
            return Err(failed(
                &mut child,
                format!("writing {}: {e}", auth_file.display()),
            ));
        }
        Ok(Self {
            child,
            display,
            cookie,
            auth_file,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the server ended, once it has. The child is left unreaped (`WNOWAIT`): while
    /// it is a zombie its pid stays taken, so the lock file naming it keeps other servers
    /// off the display number until [`Xvfb::stop`] has cleaned up.
    pub fn exited(&self) -> Option<String> {
        ended(&self.child).map(describe_status)
    }

    /// The server's socket.
    pub fn socket(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/.X11-unix/X{}", self.display))
    }

    pub fn stop(&mut self) {
        let leader = self.child.id();
        signal_group(leader, Signal::TERM);
        let until = Instant::now() + GRACE;
        while self.exited().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        signal_group(leader, Signal::KILL);
        // Wait for the exit but do not reap yet: a zombie's pid is not reused and another
        // Xvfb sees the lock naming it as live, so nobody can take the display number
        // between reading the lock and removing it below.
        if let Some(p) = pid(leader) {
            let _dead = rustix::process::waitid(
                WaitId::Pid(p),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            );
        }
        // A server that was killed (not stopped) leaves its lock and socket behind; they
        // are ours to remove while the lock still names it.
        let lock = PathBuf::from(format!("/tmp/.X{}-lock", self.display));
        let owner = std::fs::read_to_string(&lock).ok();
        if owner.is_some_and(|o| o.trim().parse::<u32>().ok() == Some(leader)) {
            let _gone = std::fs::remove_file(self.socket());
            let _gone = std::fs::remove_file(&lock);
        }
        let _reaped = self.child.wait();
    }
}

/// What a launched program is doing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProgramState {
    Running,
    /// Exited by itself; `code` is its exit status, `signal` the signal that ended it.
    Exited {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
}

/// A program launched into the display.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct ProgramStatus {
    pub command: String,
    pub pid: u32,
    #[serde(flatten)]
    pub state: ProgramState,
    /// Its stdout and stderr.
    pub log: PathBuf,
}

#[derive(Debug)]
pub(crate) struct Program {
    pub command: String,
    child: Child,
    pub log: PathBuf,
    pub state: ProgramState,
}

impl Program {
    /// Launches `command` (split like a shell would, but run without one) into the display.
    pub fn launch(
        command: &str,
        index: usize,
        dir: &Path,
        home: &Path,
        id: &str,
        env: &[(String, String)],
    ) -> Result<Self> {
        let argv = shell_words::split(command)
            .map_err(|e| Error::Desktop(format!("--launch {command:?}: {e}")))?;
        let Some((exe, args)) = argv.split_first() else {
            return Err(Error::Desktop("--launch: empty command".into()));
        };
        let log = dir.join(format!("program-{index}.log"));
        let out = std::fs::File::create(&log).map_err(io("creating", &log))?;
        let err = out.try_clone().map_err(io("opening", &log))?;
        let mut cmd = Command::new(exe);
        base_env(&mut cmd, id);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(home)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| Error::Desktop(format!("launching {command:?}: {e}")))?;
        Ok(Self {
            command: command.to_owned(),
            child,
            log,
            state: ProgramState::Running,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Updates the state; true if the program exited since the last poll. The program is
    /// not reaped until the session stops (see [`ended`]).
    pub fn poll(&mut self) -> bool {
        if self.state != ProgramState::Running {
            return false;
        }
        match ended(&self.child) {
            Some((code, signal)) => {
                self.state = ProgramState::Exited { code, signal };
                true
            }
            None => false,
        }
    }

    pub fn status(&self) -> ProgramStatus {
        ProgramStatus {
            command: self.command.clone(),
            pid: self.pid(),
            state: self.state.clone(),
            log: self.log.clone(),
        }
    }

    pub fn signal_group(&self, sig: Signal) {
        signal_group(self.child.id(), sig);
    }

    /// Whether the program has exited.
    pub fn done(&mut self) -> bool {
        self.poll();
        self.state != ProgramState::Running
    }

    pub fn kill(&mut self) {
        stop_group(&mut self.child, Duration::ZERO);
        self.poll();
    }
}

/// How `child` ended (exit code, signal), once it has, without reaping it: until it is
/// reaped its pid, and so the number of the process group it led, cannot be reused, so
/// signals to that group never reach a newcomer's (another session's Xvfb, say).
fn ended(child: &Child) -> Option<(Option<i32>, Option<i32>)> {
    let status = rustix::process::waitid(
        WaitId::Pid(pid(child.id())?),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    )
    .ok()??;
    Some((status.exit_status(), status.terminating_signal()))
}

fn describe_status(s: (Option<i32>, Option<i32>)) -> String {
    match s {
        (Some(c), _) => format!("exit status {c}"),
        (_, Some(sig)) => format!("signal {sig}"),
        _ => "unknown status".into(),
    }
}

fn pid(n: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(n).ok()?)
}

fn signal_group(leader: u32, sig: Signal) {
    if let Some(p) = pid(leader) {
        // ESRCH (the group is gone) is what we want anyway.
        let _gone = rustix::process::kill_process_group(p, sig);
    }
}

/// TERM to the child's group, KILL after `grace`, and reap the child (last: see [`ended`]).
fn stop_group(child: &mut Child, grace: Duration) {
    let leader = child.id();
    if grace > Duration::ZERO {
        signal_group(leader, Signal::TERM);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if ended(child).is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    signal_group(leader, Signal::KILL);
    let _reaped = child.wait();
}

/// Stops the programs, then the server, then anything else carrying the marker.
pub(crate) fn stop_all(id: &str, programs: &mut [Program], xvfb: Option<&mut Xvfb>) {
    // What the programs started, found through its parents while they live: a process
    // that left the group and cleared its environment (`setsid env -i daemon`) escapes
    // both the group signals and the marker sweep.
    let running: Vec<u32> = programs
        .iter()
        .filter(|p| p.state == ProgramState::Running)
        .map(Program::pid)
        .collect();
    let family: Vec<(u32, u64)> = descendants(&running)
        .into_iter()
        .filter_map(|(p, _)| Some((p, start_time(p)?)))
        .collect();
    for p in programs.iter() {
        if p.state == ProgramState::Running {
            p.signal_group(Signal::TERM);
        }
    }
    let until = Instant::now() + GRACE;
    while Instant::now() < until && !programs.iter_mut().all(Program::done) {
        std::thread::sleep(Duration::from_millis(2));
    }
    for p in programs.iter_mut() {
        // The group may outlive its leader; KILL it either way.
        p.kill();
    }
    for (p, started) in family {
        // The start time tells a process from a newcomer that reused its pid.
        if start_time(p) == Some(started)
            && let Some(p) = pid(p)
        {
            let _gone = rustix::process::kill_process(p, Signal::KILL);
        }
    }
    if let Some(x) = xvfb {
        x.stop();
    }
    for _round in 0..3 {
        let left = marked_processes(id);
        if left.is_empty() {
            break;
        }
        for p in left {
            if let Some(p) = pid(p) {
                let _gone = rustix::process::kill_process(p, Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Live (not zombie) processes whose environment carries `MARKER=id`.
pub fn marked_processes(id: &str) -> Vec<u32> {
    let needle = format!("{MARKER}={id}");
    processes()
        .filter(|(pid, dir)| {
            std::fs::read(dir.join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                && !is_zombie(*pid)
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Every process in `/proc`, with its directory there.
fn processes() -> impl Iterator<Item = (u32, PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((pid, entry.path()))
        })
}

fn is_zombie(pid: u32) -> bool {
    task_states(pid).is_none_or(|s| s.iter().all(|c| *c == 'Z' || *c == 'X'))
}

/// The fields of a `/proc/…/stat` line after the command name, from the state (field 3)
/// on. The name is skipped by its last `)`: it may hold spaces and parentheses.
fn stat_fields(stat: &str) -> impl Iterator<Item = &str> {
    stat.rfind(')')
        .map_or("", |i| &stat[i + 1..])
        .split_whitespace()
}

/// When `pid` started (field 22 of its stat, in clock ticks since boot).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat).nth(22 - 3)?.parse().ok()
}

/// The scheduler state of every thread of `pid` (`R`, `S`, `D`, …), or `None` if it is gone.
pub(crate) fn task_states(pid: u32) -> Option<Vec<char>> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for t in dir.flatten() {
        if let Ok(stat) = std::fs::read_to_string(t.path().join("stat"))
            && let Some(state) = stat_fields(&stat).next().and_then(|s| s.chars().next())
        {
            out.push(state);
        }
    }
    Some(out)
}

/// Every descendant of `roots` (not the roots themselves) with its scheduler state, from
/// one pass over `/proc/*/stat`.
pub(crate) fn descendants(roots: &[u32]) -> Vec<(u32, char)> {
    let mut table = Vec::new();
    for (pid, dir) in processes() {
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let mut fields = stat_fields(&stat);
        let state = fields.next().and_then(|s| s.chars().next());
        let ppid = fields.next().and_then(|s| s.parse::<u32>().ok());
        if let (Some(state), Some(ppid)) = (state, ppid) {
            table.push((pid, ppid, state));
        }
    }
    let mut out: Vec<(u32, char)> = Vec::new();
    let mut parents: Vec<u32> = roots.to_vec();
    while let Some(parent) = parents.pop() {
        for (pid, _, state) in table.iter().filter(|(_, pp, _)| *pp == parent) {
            if !out.iter().any(|(p, _)| p == pid) {
                out.push((*pid, *state));
                parents.push(*pid);
            }
        }
    }
    out
}

/// Whether `pid` is waiting (no thread running or in uninterruptible sleep).
pub(crate) fn is_idle(pid: u32) -> bool {
    task_states(pid).is_none_or(|s| !s.iter().any(|c| matches!(c, 'R' | 'D')))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn xauthority_entries_follow_the_file_format() {
        let e = xauth_entry(Some(12), &[0xab; 16]);
        let mut want = vec![0xff, 0xff, 0, 0, 0, 2, b'1', b'2', 0, 18];
        want.extend_from_slice(b"MIT-MAGIC-COOKIE-1");
        want.extend_from_slice(&[0, 16]);
        want.extend_from_slice(&[0xab; 16]);
        assert_eq!(e, want);
    }

    #[test]
    fn descendants_are_found_through_their_parents() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let me = std::process::id();
        let until = Instant::now() + Duration::from_secs(5);
        let found = loop {
            let found = descendants(&[me]);
            if found.len() >= 2 || Instant::now() > until {
                break found;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        stop_group(&mut child, Duration::ZERO);
        assert!(found.iter().any(|(p, _)| *p == child.id()), "{found:?}");
        assert!(found.len() >= 2, "sh and its sleep: {found:?}");
    }

    #[test]
    fn this_process_is_running_and_unmarked() {
        let me = std::process::id();
        assert!(task_states(me).is_some_and(|s| !s.is_empty()));
        assert!(!is_zombie(me));
        assert!(marked_processes("no-such-session").is_empty());
    }
}
