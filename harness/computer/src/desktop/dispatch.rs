//! Running screen ops on the display: each [`Op`] becomes XTEST input through
//! [`Input`](super::input::Input) (pointer, buttons, wheel notches, keys), and text is typed
//! character by character, letting clients catch up before a keycode is rebound.

use super::blocking::blocking;
use super::input::{char_keysym, key_keysym};
use super::session::DesktopSession;
use crate::error::{ActionError, Error, Result};
use crate::lowering::PX_PER_TICK;
use crate::op::Op;
use std::time::Duration;

/// The most wheel notches one scroll sends (each is an XTEST press and release, so a
/// `scroll_amount` of four billion would otherwise keep the step busy for hours).
const MAX_NOTCHES: f64 = 100.0;

impl DesktopSession {
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

    pub(super) async fn run_inner(&mut self, op: &Op) -> Result<()> {
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
}

pub(super) fn unsupported_op(op: &Op) -> ActionError {
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
