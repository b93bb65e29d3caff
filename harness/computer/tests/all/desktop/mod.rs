//! The desktop backend against a real Xvfb and real Debian programs (`xterm` running
//! `cat > file`, `xmessage` buttons, `xev` logging what it receives). Needs `xvfb`,
//! `xterm` and `x11-utils` (tests/bootstrap.sh installs them).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod capture;
mod faults;
mod gates;
mod input;
mod isolation;
mod typing;

use cordon_computer::desktop::{DesktopOptions, DesktopSession, ProgramState, ProgramStatus};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::gate::Rules;
use cordon_computer::{Computer, EngineOptions, Status, StepReport};
use cordon_protocol::computer::{ComputerCall, Vendor, decode};
use std::path::Path;
use std::time::{Duration, Instant};

/// The model display the tests use: 1280×800 shown as 1024×640 (factor 0.8).
pub fn opts(launch: &[&str]) -> DesktopOptions {
    let mut o = DesktopOptions::default();
    o.screen = Size::new(1280, 800);
    o.display = DisplaySpec::Fixed {
        size: Size::new(1024, 640),
    };
    o.launch = launch.iter().map(|s| (*s).to_owned()).collect();
    o
}

pub async fn start(launch: &[&str]) -> DesktopSession {
    DesktopSession::start(opts(launch)).await.unwrap()
}

pub fn computer(session: DesktopSession, rules: Rules) -> Computer<DesktopSession> {
    let mut e = EngineOptions::default();
    e.rules = rules;
    Computer::new(session, e)
}

/// A model coordinate for a screen pixel at the 0.8 factor (the pixel's centre maps back
/// into the same screen pixel).
pub fn m(x: i64, y: i64) -> [i64; 2] {
    [(x * 4) / 5, (y * 4) / 5]
}

pub async fn step(c: &mut Computer<DesktopSession>, v: serde_json::Value) -> StepReport {
    let call: ComputerCall = decode(Vendor::Anthropic, &v).unwrap();
    c.step(call, Some(&v)).await.unwrap()
}

pub async fn ok_step(c: &mut Computer<DesktopSession>, v: serde_json::Value) -> StepReport {
    let r = step(c, v.clone()).await;
    assert_eq!(r.status, Status::Ok, "{v}: {:?}", r.error);
    r
}

/// Waits (bounded) until program `index` has exited.
pub async fn exited(session: &mut DesktopSession, index: usize) -> ProgramStatus {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let p = session.programs().swap_remove(index);
        if p.state != ProgramState::Running || Instant::now() > until {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (bounded) until `path` holds exactly `want`, and returns what it holds.
pub async fn file_becomes(path: &Path, want: &str) -> String {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let got = std::fs::read_to_string(path).unwrap_or_default();
        if got == want || Instant::now() > until {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `exit` codes of `xmessage -buttons a:11,…` and friends.
pub fn exit_code(p: &ProgramStatus) -> Option<i32> {
    match p.state {
        ProgramState::Exited { code, .. } => code,
        _ => None,
    }
}

/// Runs an X tool (xwininfo, setxkbmap, …) in the session's display.
pub fn x_tool(session: &DesktopSession, argv: &[&str]) -> String {
    let out = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(session.x_env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a process still exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with(['Z', 'X']))
        })
        .is_some_and(|zombie| !zombie)
}
