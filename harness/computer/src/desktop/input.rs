//! Input through enigo's x11rb backend (XTEST), on the session's display only, with
//! `linux_delay = 0` (its 12 ms default costs ~24 ms per click; nothing was lost at 0).
//!
//! Keys go by keysym, which makes typing independent of the layout: a keysym the server's
//! map has at level 1 or 2 is pressed as that keycode (with Shift for level 2); any other
//! keysym is handed to enigo, which binds it to a spare keycode for the press. The enigo
//! pitfalls worked around here (see docs/desktop.md):
//! - enigo only looks at level 1 of the map, so every shifted character (`A`, `!`, `:`)
//!   would cost a remap; the level-2 lookup with an explicit Shift avoids that.
//! - a remapped keycode is reused once the spare ones run out. A client that has not yet
//!   read the press from the previous binding then sees the new keysym, so characters get
//!   lost or swapped at speed (the desktop typing tests catch it; see docs/desktop.md).
//!   [`Input::needs_drain`] tells the session to let clients catch up before that happens.
//! - legacy keysyms beyond Latin-1 are not understood by every client (xterm drops
//!   `ifonlyif`, ⇔): [`Input::resolve`] types such characters by their Unicode keysym.
//! - enigo reads the map once: when the layout changes (`setxkbmap`), the session builds a
//!   new table and a new enigo connection.

use super::x11::KeyTable;
use crate::error::{ActionError, Error};
use cordon_protocol::computer::{Button, Key};
use enigo::{Axis, Coordinate, Direction, Enigo, Keyboard as _, Mouse as _};
use std::collections::HashSet;
use xkeysym::Keysym;

/// The keysym for a key of the protocol's vocabulary (DOM `key` names, single characters).
pub(crate) fn key_keysym(key: &Key) -> Result<u32, ActionError> {
    let name = key.as_str();
    let sym = match name {
        "Control" => Keysym::Control_L,
        "Shift" => Keysym::Shift_L,
        "Alt" => Keysym::Alt_L,
        "Meta" => Keysym::Super_L,
        "Enter" => Keysym::Return,
        "Tab" => Keysym::Tab,
        "Escape" => Keysym::Escape,
        "Backspace" => Keysym::BackSpace,
        "Delete" => Keysym::Delete,
        "Insert" => Keysym::Insert,
        "Home" => Keysym::Home,
        "End" => Keysym::End,
        "PageUp" => Keysym::Prior,
        "PageDown" => Keysym::Next,
        "ArrowUp" => Keysym::Up,
        "ArrowDown" => Keysym::Down,
        "ArrowLeft" => Keysym::Left,
        "ArrowRight" => Keysym::Right,
        "CapsLock" => Keysym::Caps_Lock,
        " " => Keysym::space,
        _ => {
            if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<u32>().ok())
                && (1..=35).contains(&n)
            {
                return Ok(Keysym::F1.raw() + n - 1);
            }
            let mut chars = name.chars();
            return match (chars.next(), chars.next()) {
                (Some(c), None) => char_keysym(c),
                _ => Err(unsupported_key(name)),
            };
        }
    };
    Ok(sym.raw())
}

fn unsupported_key(name: &str) -> ActionError {
    ActionError::Unsupported {
        what: format!("key `{}`", name.escape_default()),
        backend: "desktop",
    }
}

/// The keysym that types `c`. Control characters other than tab, newline, escape and
/// backspace have no key, nor do Unicode non-characters.
pub(crate) fn char_keysym(c: char) -> Result<u32, ActionError> {
    let sym = match c {
        '\n' | '\r' => Keysym::Return,
        '\t' => Keysym::Tab,
        '\u{1b}' => Keysym::Escape,
        '\u{8}' => Keysym::BackSpace,
        c if c.is_control() => {
            return Err(ActionError::Invalid(format!(
                "character U+{:04X} cannot be typed on the desktop: send a key instead",
                u32::from(c)
            )));
        }
        c => Keysym::from_char(c),
    };
    if sym == Keysym::NoSymbol {
        return Err(ActionError::Invalid(format!(
            "character U+{:04X} has no keysym and cannot be typed",
            u32::from(c)
        )));
    }
    Ok(sym.raw())
}

/// A key we pressed and have not released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    sym: u32,
    /// Shift pressed for it (a level-2 keysym) that goes up with it.
    with_shift: bool,
}

pub(crate) struct Input {
    /// `None` only while reconnecting after a layout change.
    enigo: Option<Enigo>,
    table: KeyTable,
    /// Keycodes that were spare at start: enigo's to bind. Excluded from `table`, because
    /// enigo rebinds them behind our back.
    pool: HashSet<u8>,
    /// Keysyms enigo has bound to pool keycodes right now (mirrors its bookkeeping: it
    /// binds until the pool is full, then unbinds everything not held and starts over).
    bound: HashSet<u32>,
    held: Vec<Held>,
    /// The pointer buttons we hold down.
    buttons: Vec<Button>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("keysyms", &self.table.keys.len())
            .field("spare", &self.table.spare)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

fn fault(e: enigo::InputError) -> Error {
    Error::Desktop(format!("input: {e}"))
}

fn enigo_button(b: Button) -> Result<enigo::Button, ActionError> {
    Ok(match b {
        Button::Left => enigo::Button::Left,
        Button::Right => enigo::Button::Right,
        Button::Middle => enigo::Button::Middle,
        Button::Back => enigo::Button::Back,
        Button::Forward => enigo::Button::Forward,
        other => {
            return Err(ActionError::Unsupported {
                what: format!("button {other:?}"),
                backend: "desktop",
            });
        }
    })
}

fn no_enigo() -> Error {
    Error::Desktop("input: not connected (a layout change failed to reconnect)".into())
}

impl Input {
    /// `table` is the server's map as `enigo` saw it when it connected: its spare keycodes
    /// are enigo's pool.
    pub fn new(enigo: Enigo, table: KeyTable) -> Self {
        Self {
            enigo: Some(enigo),
            pool: table.spare_codes.iter().copied().collect(),
            table,
            bound: HashSet::new(),
            held: Vec::new(),
            buttons: Vec::new(),
        }
    }

    fn enigo(&mut self) -> Result<&mut Enigo, Error> {
        self.enigo.as_mut().ok_or_else(no_enigo)
    }

    /// Takes a fresh map from the server. Returns false if the layout itself changed (not
    /// just enigo's bindings in its pool): then enigo, which read the map once, must be
    /// reconnected ([`Input::disconnect`], [`Input::reconnect`]).
    pub fn refresh(&mut self, mut fresh: KeyTable) -> bool {
        fresh.keys.retain(|_, (code, _)| !self.pool.contains(code));
        if fresh.keys != self.table.keys || fresh.shift != self.table.shift {
            return false;
        }
        true
    }

    /// Lets go of everything and drops enigo's connection (which unbinds its keycodes).
    pub fn disconnect(&mut self) {
        self.release_all();
        self.enigo = None;
        self.bound.clear();
    }

    pub fn reconnect(&mut self, enigo: Enigo, table: KeyTable) {
        *self = Self::new(enigo, table);
    }

    /// True if typing `sym` makes enigo rebind keycodes it bound earlier: the session
    /// should first wait for clients to read the keys they have been sent.
    pub fn needs_drain(&self, sym: u32) -> bool {
        !self.table.keys.contains_key(&sym)
            && !self.bound.contains(&sym)
            && self.bound.len() >= self.table.spare.max(1)
    }

    /// The keysym to press for `sym`: itself if the layout has a key for it; otherwise,
    /// for a character beyond Latin-1, its Unicode keysym (`0x1000000 + code point`),
    /// because not every client understands the legacy ones (xterm drops `ifonlyif`, ⇔).
    pub fn resolve(&self, sym: u32) -> u32 {
        if self.table.keys.contains_key(&sym) || (0xff00..=0xffff).contains(&sym) {
            return sym;
        }
        match Keysym::new(sym).key_char() {
            Some(c) if u32::from(c) > 0xff => {
                let uni = 0x0100_0000 + u32::from(c);
                if self.table.keys.contains_key(&uni) || sym < 0x0100_0000 {
                    uni
                } else {
                    sym
                }
            }
            _ => sym,
        }
    }

    /// Records that enigo binds `sym` (what its `make_room` does when the pool is full).
    fn note_binding(&mut self, sym: u32) {
        if self.bound.contains(&sym) {
            return;
        }
        if self.bound.len() >= self.table.spare.max(1) {
            let held: HashSet<u32> = self.held.iter().map(|h| h.sym).collect();
            self.bound.retain(|s| held.contains(s));
        }
        self.bound.insert(sym);
    }

    fn shift_held(&self) -> bool {
        self.held.iter().any(|h| h.sym == Keysym::Shift_L.raw())
    }

    fn raw(&mut self, code: u8, dir: Direction) -> Result<(), Error> {
        self.enigo()?.raw(u16::from(code), dir).map_err(fault)
    }

    pub fn key_down(&mut self, sym: u32) -> Result<(), Error> {
        let with_shift = self.press(sym, Direction::Press)?;
        self.held.push(Held { sym, with_shift });
        Ok(())
    }

    pub fn key_up(&mut self, sym: u32) -> Result<(), Error> {
        let with_shift = match self.held.iter().rposition(|h| h.sym == sym) {
            Some(i) => self.held.remove(i).with_shift,
            None => false,
        };
        match self.table.keys.get(&sym).copied() {
            Some((code, _)) => self.raw(code, Direction::Release)?,
            None => self
                .enigo()?
                .key(enigo::Key::Other(sym), Direction::Release)
                .map_err(fault)?,
        }
        if with_shift && let Some(shift) = self.table.shift {
            self.raw(shift, Direction::Release)?;
        }
        Ok(())
    }

    /// Presses and releases `sym` (one typed character).
    pub fn tap(&mut self, sym: u32) -> Result<(), Error> {
        self.press(sym, Direction::Click).map(|_| ())
    }

    /// Press (or click) `sym`; returns whether an implicit Shift is still held for it.
    fn press(&mut self, sym: u32, dir: Direction) -> Result<bool, Error> {
        match self.table.keys.get(&sym).copied() {
            Some((code, level)) => {
                let shift = match (level, self.table.shift) {
                    (1, Some(s)) if !self.shift_held() => Some(s),
                    _ => None,
                };
                if let Some(s) = shift {
                    self.raw(s, Direction::Press)?;
                }
                self.raw(code, dir)?;
                if dir == Direction::Click
                    && let Some(s) = shift
                {
                    self.raw(s, Direction::Release)?;
                    return Ok(false);
                }
                Ok(shift.is_some())
            }
            None => {
                self.note_binding(sym);
                self.enigo()?
                    .key(enigo::Key::Other(sym), dir)
                    .map_err(|e| match e {
                        // Every spare keycode is bound to a key that is held down.
                        enigo::InputError::Mapping(_) | enigo::InputError::Unmapping(_) => {
                            Error::Action(ActionError::Invalid(format!(
                                "cannot type keysym 0x{sym:x} now: every spare keycode is \
                                 held; release some keys first ({e})"
                            )))
                        }
                        e => fault(e),
                    })?;
                Ok(false)
            }
        }
    }

    pub fn move_to(&mut self, x: i32, y: i32) -> Result<(), Error> {
        self.enigo()?
            .move_mouse(x, y, Coordinate::Abs)
            .map_err(fault)
    }

    pub fn button(&mut self, b: Button, down: bool) -> Result<(), Error> {
        let eb = enigo_button(b)?;
        let dir = if down {
            Direction::Press
        } else {
            Direction::Release
        };
        self.enigo()?.button(eb, dir).map_err(fault)?;
        if down {
            self.buttons.push(b);
        } else if let Some(i) = self.buttons.iter().position(|h| *h == b) {
            self.buttons.remove(i);
        }
        Ok(())
    }

    /// Wheel notches (X buttons 4–7); positive is down / right.
    pub fn scroll(&mut self, notches: i32, horizontal: bool) -> Result<(), Error> {
        if notches == 0 {
            return Ok(());
        }
        let axis = if horizontal {
            Axis::Horizontal
        } else {
            Axis::Vertical
        };
        self.enigo()?.scroll(notches, axis).map_err(fault)
    }

    /// Lets go of every key and button we hold (after a failed step, before closing).
    pub fn release_all(&mut self) {
        while let Some(h) = self.held.last().copied() {
            if self.key_up(h.sym).is_err() {
                self.held.pop();
            }
        }
        for b in std::mem::take(&mut self.buttons) {
            if let (Ok(eb), Some(enigo)) = (enigo_button(b), self.enigo.as_mut()) {
                let _released = enigo.button(eb, Direction::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn protocol_keys_map_to_keysyms() {
        let k = |s: &str| key_keysym(&Key::parse(s).unwrap());
        assert_eq!(k("Return").unwrap(), 0xff0d);
        assert_eq!(k("ctrl").unwrap(), 0xffe3);
        assert_eq!(k("Page_Down").unwrap(), 0xff56);
        assert_eq!(k("F1").unwrap(), 0xffbe);
        assert_eq!(k("F24").unwrap(), 0xffd5);
        assert_eq!(k("space").unwrap(), 0x20);
        assert_eq!(k("a").unwrap(), u32::from('a'));
        assert_eq!(k("A").unwrap(), u32::from('A'));
        assert_eq!(k("ä").unwrap(), 0xe4);
        assert_eq!(k("€").unwrap(), 0x20ac);
        assert_eq!(char_keysym('\n').unwrap(), 0xff0d);
        let e = char_keysym('\u{7}').unwrap_err();
        assert!(e.to_string().contains("U+0007"), "{e}");
        let e = k("\u{1}").unwrap_err();
        assert!(e.to_string().contains("U+0001"), "{e}");
        assert!(char_keysym('\u{fffe}').is_err());
    }
}
