//! What one [`Browser`](super::Browser) shares with its sessions and background tasks:
//! the current Chromium process and its generations, the sessions' policies and contexts,
//! and the navigations the request guard refused.

use super::options::BrowserOptions;
use super::screens::Screens;
use crate::origin::OriginPolicy;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::RwLock;
use tokio::task::JoinHandle;

pub(super) struct Shared {
    /// The current Chromium process (replaced when it is lost).
    pub(super) browser: RwLock<chromiumoxide::Browser>,
    pub(super) life: Mutex<Life>,
    /// The number of the newest generation that was lost (0: none yet). Sessions wait on
    /// it next to every command, so a crash fails them at once instead of at a timeout.
    pub(super) lost_tx: tokio::sync::watch::Sender<u64>,
    /// Serializes restarts.
    pub(super) restart: tokio::sync::Mutex<()>,
    /// Block-lists of live sessions; the browser-wide Fetch refuses what any of them blocks.
    pub(super) policies: Mutex<HashMap<u64, OriginPolicy>>,
    /// BrowserContext id → session id of live sessions, so the request guard knows whose
    /// page a navigation comes from.
    pub(super) contexts: Mutex<HashMap<String, u64>>,
    /// Navigations of a session's pages the request guard refused, not reported yet.
    pub(super) refused: Mutex<HashMap<u64, Vec<RefusedNavigation>>>,
    /// Sessions with a `Page.navigate` of their own in flight. chromiumoxide holds every
    /// later `Page.navigate` of the page until that one loads, which a cancelled
    /// navigation never does: a refusal during it is failed instead (an error page loads)
    /// and the session goes back in its history (see `leave_error_page`).
    pub(super) navigating: Mutex<HashSet<u64>>,
    /// With frames on demand: held while one page draws a frame. The headless shell hangs
    /// (and its renderers crash) when frames of two pages are drawn at once (measured
    /// with two to eight pages; see `frames`), so frames are drawn one at a time.
    pub(super) frame_turn: Arc<tokio::sync::Mutex<()>>,
    /// With frames on demand: the screens added for sessions drawn at their display's
    /// scale (see `screens`).
    pub(super) screens: tokio::sync::Mutex<Screens>,
    pub(super) opts: BrowserOptions,
}

/// Which Chromium process is current, and what became of the earlier ones.
pub(super) struct Life {
    pub(super) generation: u64,
    pub(super) pid: Option<u32>,
    pub(super) user_data_dir: PathBuf,
    /// Why the current process is unusable (`None` while it is fine).
    pub(super) lost: Option<String>,
    /// Why each earlier generation was lost (for the sessions that ran on it).
    pub(super) history: HashMap<u64, String>,
    /// Handler pump, watchdog and fetch guard of the current process.
    pub(super) tasks: Vec<JoinHandle<()>>,
}

/// A navigation of a session's page that the request guard refused before it left.
#[derive(Debug, Clone)]
pub(super) struct RefusedNavigation {
    pub(super) url: String,
    pub(super) reason: String,
    /// A popup whose first document this was: the guard closed it, so the session stays
    /// on its opener instead of following a blank window.
    pub(super) closed_popup: Option<String>,
    /// Failed rather than cancelled (the session's own `Page.navigate` was in flight):
    /// an error page loads, and the session goes back from it.
    pub(super) error_page: bool,
}

pub(super) fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    pub(super) fn life(&self) -> std::sync::MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks generation `generation` as unusable; sessions on it fail with
    /// [`Error::BrowserLost`](crate::Error::BrowserLost) and the next new session restarts Chromium.
    pub(super) fn mark_lost(&self, generation: u64, why: String) {
        let mut life = self.life();
        if life.generation == generation && life.lost.is_none() {
            life.lost = Some(why);
            drop(life);
            self.lost_tx.send_if_modified(|g| {
                let newer = *g < generation;
                *g = (*g).max(generation);
                newer
            });
        }
    }

    /// Why `generation` is unusable, if it is.
    pub(super) fn lost_reason(&self, generation: u64) -> Option<String> {
        let life = self.life();
        if life.generation == generation {
            life.lost.clone()
        } else {
            Some(
                life.history
                    .get(&generation)
                    .cloned()
                    .unwrap_or_else(|| "Chromium was restarted".into()),
            )
        }
    }
}
