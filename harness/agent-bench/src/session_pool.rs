//! Idle browser sessions kept between episodes: an episode that ends hands its session
//! back, and the next episode with the same screen and origin policy starts it over on its
//! own page ([`BrowserSession::restart_at`]: document, cookies, storage and history
//! cleared) instead of opening a new BrowserContext, proxy and page.

use std::sync::Mutex;

use cordon_computer::browser::{Browser, BrowserSession, SessionOptions};
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

/// The idle sessions of a run (at most one per episode that ran at once).
#[derive(Debug, Default)]
pub struct SessionPool {
    idle: Mutex<Vec<(SessionKey, BrowserSession)>>,
}

impl SessionPool {
    pub fn new() -> SessionPool {
        SessionPool::default()
    }

    /// An idle session opened with `key`, if there is one.
    pub fn take(&self, key: &SessionKey) -> Option<BrowserSession> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let at = idle.iter().position(|(k, _)| k == key)?;
        Some(idle.swap_remove(at).1)
    }

    /// Keeps `session` for a later episode with the same `key`.
    pub fn put(&self, key: SessionKey, session: BrowserSession) {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key, session));
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
        for (_, mut session) in idle {
            let _closed = session.close().await;
        }
    }
}

/// A path the page server has no file at: its error page is a document of the server's
/// origin without script, where a reused session's storage is cleared.
const BLANK_PATH: &str = ".cordon/blank";

/// A session on `url` for an episode: an idle one of `pool` with the same options, started
/// over (its pages are served from `origin`, whose storage is cleared), or
/// else a new one. Returns the key to hand the session back with (`None` without a pool)
/// and whether the session was reused.
pub(crate) async fn open_session(
    browser: &Browser,
    pool: Option<(&SessionPool, String)>,
    url: String,
    mut options: SessionOptions,
) -> cordon_computer::Result<(BrowserSession, Option<SessionKey>, bool)> {
    let Some((pool, origin)) = pool else {
        options.start_url = Some(url);
        return Ok((browser.new_session(options).await?, None, false));
    };
    let key = SessionKey {
        viewport: options.viewport,
        display: options.display.resolve(options.viewport),
        dpr: options.dpr,
        policy: options.policy.clone(),
    };
    if let Some(mut session) = pool.take(&key) {
        match session
            .restart_at(&url, &format!("{origin}/{BLANK_PATH}"))
            .await
        {
            Ok(()) => return Ok((session, Some(key), true)),
            Err(e) => {
                if std::env::var_os("CORDON_BENCH_RESET_TRACE").is_some() {
                    eprintln!("reset: the idle session could not start over: {e}");
                }
                let _closed = session.close().await;
            }
        }
    }
    options.start_url = Some(url);
    Ok((browser.new_session(options).await?, Some(key), false))
}
