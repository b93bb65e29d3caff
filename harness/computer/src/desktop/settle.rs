//! Settling on a desktop: the step is settled when the X server, the launched programs and
//! what they started all wait for input and nothing was drawn for a moment (XDamage,
//! `/proc`); also the waits at start (windows mapped) and while typing (clients caught up).

use super::session::DesktopSession;
use super::xvfb::{self, Program, ProgramState};
use crate::error::Result;
use std::time::{Duration, Instant};

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

impl DesktopSession {
    /// Waits until every running program has mapped a window, or some window is up and
    /// everything waits for input (a launched program need not have a window), at most
    /// `settle_cap`.
    pub(super) fn wait_for_windows(&mut self) -> Result<()> {
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

    /// Waits until the X server and the programs have read their input (idle
    /// [`DRAIN_IDLE_POLLS`] times in a row), without the settle rules about drawing; for
    /// typing that must let clients catch up before enigo rebinds a keycode.
    pub(super) async fn drain_clients(&mut self) -> Result<()> {
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
    pub(super) fn pump(&mut self) -> Result<bool> {
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

    pub(super) async fn settle_inner(&mut self) -> Result<bool> {
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
}
