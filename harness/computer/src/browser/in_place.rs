//! Readying a session for a new episode on the page it already shows, for pages that start
//! their next episode themselves (MiniWoB++'s `core.startEpisodeReal`): nothing is loaded
//! and no storage is cleared; a mouse button the last episode left held is released, and
//! the session's per-step state starts fresh, as after a restart.

use super::session::BrowserSession;
use super::state::locked;
use crate::display::CssPoint;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::step::SettleEnd;
use cordon_protocol::computer::Button;

/// The buttons of the CDP `buttons` bitmask, by bit.
const BUTTONS: [(Button, i64); 5] = [
    (Button::Left, 1),
    (Button::Right, 2),
    (Button::Middle, 4),
    (Button::Back, 8),
    (Button::Forward, 16),
];

impl BrowserSession {
    /// Readies the session for a new episode on its current page, whose own script then
    /// starts the episode: every mouse button still held is released (just outside the
    /// page's top-left corner, on the old episode's document before the page rebuilds it,
    /// so its `mouseup` handlers run there), and the per-step state (buttons, settle
    /// state, notes, refused navigations) starts fresh. The document, its storage,
    /// scroll, focus and selection are the page's to reset. The pointer is not moved: a
    /// move on a page that draws on demand costs about three frames (≈ 45 ms measured),
    /// most of a reset; its last position carries over, as across
    /// [`restart_at`](Self::restart_at). Fails when the session is not
    /// [`restartable`](Self::restartable).
    pub async fn start_over_in_place(&mut self) -> Result<()> {
        if !self.restartable() {
            return Err(Error::Browser(
                "this session cannot start over (closed, lost, or it has popups)".into(),
            ));
        }
        let outside = CssPoint { x: -1.0, y: -1.0 };
        for (button, bit) in BUTTONS {
            if self.buttons & bit != 0 {
                self.run_inner(&Op::Up {
                    at: outside,
                    button,
                    count: 1,
                    modifiers: 0,
                })
                .await?;
            }
        }
        self.forget_step_state();
        Ok(())
    }

    /// Starts the session's per-step state fresh (buttons held, settle state, notes,
    /// refused navigations, network events read so far), as for a session just opened.
    pub(super) fn forget_step_state(&mut self) {
        locked(&self.browser.shared.refused).remove(&self.id);
        self.notes.clear();
        self.buttons = 0;
        self.needs_frame = false;
        self.scroll_hint = None;
        self.deferred_turn = false;
        self.ambient = false;
        self.settle_deadline = None;
        self.settle_end = SettleEnd::Quiet;
        self.drawn_activity = u64::MAX;
        self.net.drain();
    }
}
