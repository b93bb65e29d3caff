//! Running screen ops in the page: CDP `Input.*` mouse, wheel and key events (with the
//! key table), inserted text, navigation and history.

use super::cdp::cdp;
use super::frames::pumped;
use super::net_watch::NetEvent;
use super::session::BrowserSession;
use super::state::locked;
use crate::display::CssPoint;
use crate::error::{Error, Result};
use crate::op::{Op, modifier_bit};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::{
    GetNavigationHistoryParams, NavigateParams, NavigateToHistoryEntryParams,
};
use cordon_protocol::computer::{Button, Key};
use futures::StreamExt as _;
use std::sync::Arc;
use std::time::Duration;

fn mouse_button(b: Button) -> (MouseButton, i64) {
    match b {
        Button::Left => (MouseButton::Left, 1),
        Button::Right => (MouseButton::Right, 2),
        Button::Middle => (MouseButton::Middle, 4),
        Button::Back => (MouseButton::Back, 8),
        Button::Forward => (MouseButton::Forward, 16),
        // A button added to the protocol later: the primary button is the safe guess.
        _ => (MouseButton::Left, 1),
    }
}

/// (key, code, windowsVirtualKeyCode, text) for a canonical key.
fn key_def(key: &Key) -> (String, String, i64, Option<String>) {
    let k = key.as_str();
    let named = |code: &str, vk: i64, text: Option<&str>| {
        (k.to_owned(), code.to_owned(), vk, text.map(str::to_owned))
    };
    match k {
        "Enter" => named("Enter", 13, Some("\r")),
        "Tab" => named("Tab", 9, Some("\t")),
        "Escape" => named("Escape", 27, None),
        "Backspace" => named("Backspace", 8, None),
        "Delete" => named("Delete", 46, None),
        "Insert" => named("Insert", 45, None),
        "Home" => named("Home", 36, None),
        "End" => named("End", 35, None),
        "PageUp" => named("PageUp", 33, None),
        "PageDown" => named("PageDown", 34, None),
        "ArrowLeft" => named("ArrowLeft", 37, None),
        "ArrowUp" => named("ArrowUp", 38, None),
        "ArrowRight" => named("ArrowRight", 39, None),
        "ArrowDown" => named("ArrowDown", 40, None),
        "Control" => named("ControlLeft", 17, None),
        "Shift" => named("ShiftLeft", 16, None),
        "Alt" => named("AltLeft", 18, None),
        "Meta" => named("MetaLeft", 91, None),
        "CapsLock" => named("CapsLock", 20, None),
        " " => named("Space", 32, Some(" ")),
        f if f.len() > 1 && f.starts_with('F') && f[1..].parse::<i64>().is_ok() => {
            let n = f[1..].parse::<i64>().unwrap_or(1);
            named(f, 111 + n, None)
        }
        _ => {
            let c = k.chars().next().unwrap_or(' ');
            let (code, vk) = if c.is_ascii_alphabetic() {
                (
                    format!("Key{}", c.to_ascii_uppercase()),
                    i64::from(c.to_ascii_uppercase() as u8),
                )
            } else if c.is_ascii_digit() {
                (format!("Digit{c}"), i64::from(c as u8))
            } else {
                (String::new(), 0)
            };
            (k.to_owned(), code, vk, Some(k.to_owned()))
        }
    }
}

impl BrowserSession {
    async fn mouse(
        &self,
        kind: DispatchMouseEventType,
        at: CssPoint,
        button: Option<MouseButton>,
        count: Option<i64>,
        modifiers: u8,
    ) -> Result<()> {
        let mut p = DispatchMouseEventParams::new(kind, at.x, at.y);
        p.button = button;
        p.buttons = Some(self.buttons);
        p.click_count = count;
        p.modifiers = Some(i64::from(modifiers));
        self.page.execute(p).await.map_err(cdp)?;
        Ok(())
    }

    async fn key(&self, kind: DispatchKeyEventType, key: &Key, modifiers: u8) -> Result<()> {
        let (name, code, vk, text) = key_def(key);
        // Text only when no command modifier is held, so Ctrl+A selects instead of typing.
        let text = text.filter(|_| modifiers & !crate::op::modifier::SHIFT == 0);
        let kind = match (kind, &text) {
            (DispatchKeyEventType::KeyDown, None) => DispatchKeyEventType::RawKeyDown,
            (k, _) => k,
        };
        let mut p = DispatchKeyEventParams::new(kind.clone());
        p.key = Some(name);
        if !code.is_empty() {
            p.code = Some(code);
        }
        p.windows_virtual_key_code = Some(vk);
        p.native_virtual_key_code = Some(vk);
        p.modifiers = Some(i64::from(modifiers));
        if kind != DispatchKeyEventType::KeyUp {
            p.unmodified_text.clone_from(&text);
            p.text = text;
        }
        self.page.execute(p).await.map_err(cdp)?;
        Ok(())
    }

    /// Runs `op`. On a page that draws only when asked, frames are drawn while it takes
    /// longer than a frame: Chromium holds pointer moves and wheel input until the next
    /// frame, and a navigation or a sleep should see the page move as it would.
    pub(super) async fn run_inner(&mut self, op: &Op) -> Result<()> {
        let driver = self.frame_driver();
        if let Some(frames) = &driver
            && !matches!(
                op,
                Op::Navigate { .. } | Op::History { .. } | Op::Sleep { .. }
            )
        {
            self.net.drain();
            if self.net.activity != self.drawn_activity {
                frames.draw().await;
                self.drawn_activity = self.net.activity;
            }
        }
        pumped(driver.as_ref(), self.run_op(op)).await
    }

    async fn run_op(&mut self, op: &Op) -> Result<()> {
        self.needs_frame |= matches!(op, Op::Wheel { .. } | Op::Move { .. } | Op::History { .. });
        match op {
            Op::Move { to, pressed } => {
                let b = pressed.map(|b| mouse_button(b).0);
                self.mouse(DispatchMouseEventType::MouseMoved, *to, b, None, 0)
                    .await
            }
            Op::Down {
                at,
                button,
                count,
                modifiers,
            }
            | Op::Up {
                at,
                button,
                count,
                modifiers,
            } => {
                let (b, bit) = mouse_button(*button);
                let kind = if matches!(op, Op::Down { .. }) {
                    self.buttons |= bit;
                    DispatchMouseEventType::MousePressed
                } else {
                    self.buttons &= !bit;
                    DispatchMouseEventType::MouseReleased
                };
                self.mouse(kind, *at, Some(b), Some(i64::from(*count)), *modifiers)
                    .await
            }
            Op::Wheel {
                at,
                dx,
                dy,
                modifiers,
            } => {
                let mut p =
                    DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, at.x, at.y);
                p.delta_x = Some(*dx);
                p.delta_y = Some(*dy);
                p.modifiers = Some(i64::from(*modifiers));
                self.page.execute(p).await.map_err(cdp)?;
                Ok(())
            }
            Op::KeyDown { key, modifiers } => {
                self.key(DispatchKeyEventType::KeyDown, key, *modifiers)
                    .await
            }
            Op::KeyUp { key, modifiers } => {
                // The released modifier is no longer held for its own keyup.
                let m = *modifiers & !modifier_bit(key);
                self.key(DispatchKeyEventType::KeyUp, key, m).await
            }
            Op::Text { text } => {
                self.page
                    .execute(InsertTextParams::new(text.clone()))
                    .await
                    .map_err(cdp)?;
                Ok(())
            }
            Op::Navigate { url } => {
                // chromiumoxide holds `Page.navigate` until the load completes, which never
                // happens for a download and takes a request timeout for some failures.
                // Run it aside and return once the navigation is under way; `settle` then
                // waits for the load like for any other action. A failed navigation shows
                // Chromium's error page, which the model sees; it is not a session fault.
                let page = self.page.clone();
                let shared = Arc::clone(&self.browser.shared);
                let id = self.id;
                locked(&shared.navigating).insert(id);
                let mut nav = tokio::spawn({
                    let url = url.clone();
                    async move {
                        let done = page.execute(NavigateParams::new(url)).await.map(|_| ());
                        locked(&shared.navigating).remove(&id);
                        done
                    }
                });
                let deadline = tokio::time::Instant::now() + self.settle_cap;
                loop {
                    tokio::select! {
                        _ = &mut nav => break,
                        ev = self.net.events.next() => match ev {
                            Some(ev) => {
                                let started = matches!(&ev, NetEvent::FrameStart(f) if *f == self.net.main_frame);
                                self.net.apply(ev);
                                if started {
                                    break;
                                }
                            }
                            None => return Err(Error::SessionClosed("page event stream ended".into())),
                        },
                        () = tokio::time::sleep_until(deadline) => break,
                    }
                }
                Ok(())
            }
            Op::History { delta } => {
                let h = self
                    .page
                    .execute(GetNavigationHistoryParams::default())
                    .await
                    .map_err(cdp)?;
                let idx = h.result.current_index + i64::from(*delta);
                if let Some(entry) = usize::try_from(idx)
                    .ok()
                    .and_then(|i| h.result.entries.get(i))
                {
                    self.page
                        .execute(NavigateToHistoryEntryParams::new(entry.id))
                        .await
                        .map_err(cdp)?;
                }
                Ok(())
            }
            Op::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(())
            }
        }
    }
}
