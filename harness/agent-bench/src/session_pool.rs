//! Idle browser sessions kept between episodes: an episode that ends hands its session
//! back with the task it ran, and the next episode with the same screen and origin policy
//! takes one, preferring a session whose last episode was of its own task (which it may
//! start in place: `web_reset`) over one it has to start over.

use std::sync::Mutex;

use cordon_computer::browser::BrowserSession;
use cordon_computer::display::Size;
use cordon_computer::origin::OriginPolicy;

/// What a session was opened with; only a session opened with the same options is reused.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionKey {
    pub viewport: Size,
    pub display: Size,
    pub dpr: f64,
    pub policy: OriginPolicy,
}

/// The episode an idle session last ran: its task and the URL it started at (where an
/// in-place start expects the page still to be).
#[derive(Debug, Clone, PartialEq)]
pub struct LastEpisode {
    pub task: String,
    pub url: String,
}

/// How an episode's session came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStart {
    /// A new session (context, proxy, page) loaded the start page.
    New,
    /// An idle session was started over on the start page (`restart_at`).
    Restarted,
    /// An idle session on the task's page started the episode there (`reset_in_place`).
    InPlace,
}

impl SessionStart {
    /// `new`, `restarted` or `in_place` (as `results.json` records it).
    pub fn name(self) -> &'static str {
        match self {
            SessionStart::New => "new",
            SessionStart::Restarted => "restarted",
            SessionStart::InPlace => "in_place",
        }
    }
}

struct Idle {
    key: SessionKey,
    last: Option<LastEpisode>,
    session: BrowserSession,
}

/// The idle sessions of a run (at most one per episode that ran at once).
#[derive(Default)]
pub struct SessionPool {
    idle: Mutex<Vec<Idle>>,
}

impl std::fmt::Debug for SessionPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionPool")
            .field("idle", &self.len())
            .finish()
    }
}

impl SessionPool {
    pub fn new() -> SessionPool {
        SessionPool::default()
    }

    /// An idle session opened with `key`, if there is one: one whose last episode was of
    /// `task` first, with that episode.
    pub fn take(
        &self,
        key: &SessionKey,
        task: &str,
    ) -> Option<(BrowserSession, Option<LastEpisode>)> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let same_task = |i: &Idle| i.last.as_ref().is_some_and(|l| l.task == task);
        let at = idle
            .iter()
            .position(|i| i.key == *key && same_task(i))
            .or_else(|| idle.iter().position(|i| i.key == *key))?;
        let Idle { last, session, .. } = idle.swap_remove(at);
        Some((session, last))
    }

    /// Keeps `session` for a later episode with the same `key`; `last` is the episode it
    /// ran (`None`: it will only be started over).
    pub fn put(&self, key: SessionKey, session: BrowserSession, last: Option<LastEpisode>) {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Idle { key, last, session });
    }

    /// How many sessions are idle now.
    pub fn len(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes every idle session (their contexts go with them).
    pub async fn close_all(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()));
        for Idle { mut session, .. } in idle {
            let _closed = session.close().await;
        }
    }
}
