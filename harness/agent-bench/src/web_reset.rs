//! A web episode's start: its session (new, an idle one started over on the start page,
//! or an idle one that last ran the same task started in place), the task's reset hook,
//! and the instruction the page words.
//!
//! In place: when the task has `reset_in_place` (MiniWoB++ starts its next episode itself,
//! as its own Python does) and the pooled session's last episode was of the same task and
//! is still on its start page with no popup, the page is not loaded again and nothing is
//! cleared: held buttons are released, the session's per-step state starts fresh, the
//! page's URL is set to the new start URL (`history.replaceState`, no load) and the hook
//! starts the episode. Otherwise the session is started over on its page
//! ([`BrowserSession::restart_at`]: document, cookies, storage and history cleared).

use cordon_computer::Backend as _;
use cordon_computer::browser::{Browser, BrowserSession, SessionOptions};
use serde_json::Value;

use crate::error::{BenchError, Result};
use crate::session_pool::{SessionKey, SessionPool, SessionStart};
use crate::task::WebTask;

/// A path the page server has no file at: its error page is a document of the server's
/// origin without script, where a reused session's storage is cleared.
const BLANK_PATH: &str = ".cordon/blank";

/// The episode a session is opened for: its task, start page and seed.
pub(crate) struct Opening<'a> {
    pub task: &'a str,
    pub web: &'a WebTask,
    pub url: String,
    pub seed: u64,
}

/// A session on the episode's start page, its reset hook run.
pub(crate) struct Opened {
    pub session: BrowserSession,
    /// The key to hand the session back to the pool with (`None` without a pool).
    pub key: Option<SessionKey>,
    pub start: SessionStart,
    /// What the task's `instruction` expression read.
    pub instruction: Option<String>,
}

/// Opens the episode's session: an idle one of `pool` with the same options (its pages
/// are served from `origin`, whose storage a restart clears), started in place when it
/// last ran the same task and the task allows it, else started over; or else a new one.
pub(crate) async fn open_session(
    browser: &Browser,
    pool: Option<(&SessionPool, String)>,
    opening: Opening<'_>,
    mut options: SessionOptions,
) -> Result<Opened> {
    let Some((pool, origin)) = pool else {
        options.start_url = Some(opening.url.clone());
        let session = browser.new_session(options).await?;
        return reset(session, &opening, None, SessionStart::New).await;
    };
    let key = SessionKey {
        viewport: options.viewport,
        display: options.display.resolve(options.viewport),
        dpr: options.dpr,
        policy: options.policy.clone(),
    };
    if let Some((mut session, last)) = pool.take(&key, opening.task) {
        if let (Some(hook), Some(last)) = (&opening.web.reset_in_place, &last)
            && last.task == opening.task
        {
            match start_in_place(&mut session, &last.url, &opening, hook).await {
                Ok(()) => {
                    let instruction = read_instruction(&mut session, &opening).await?;
                    return Ok(Opened {
                        session,
                        key: Some(key),
                        start: SessionStart::InPlace,
                        instruction,
                    });
                }
                Err(e) => trace(&format!("the session could not start in place: {e}")),
            }
        }
        match session
            .restart_at(&opening.url, &format!("{origin}/{BLANK_PATH}"))
            .await
        {
            Ok(()) => return reset(session, &opening, Some(key), SessionStart::Restarted).await,
            Err(e) => {
                trace(&format!("the idle session could not start over: {e}"));
                let _closed = session.close().await;
            }
        }
    }
    options.start_url = Some(opening.url.clone());
    let session = browser.new_session(options).await?;
    reset(session, &opening, Some(key), SessionStart::New).await
}

/// `CORDON_BENCH_RESET_TRACE=1`: why a reset did not take the quicker way.
fn trace(line: &str) {
    if std::env::var_os("CORDON_BENCH_RESET_TRACE").is_some() {
        eprintln!("reset: {line}");
    }
}

/// `hook` as a function of the seed.
fn seeded(hook: &str, seed: u64) -> String {
    format!("((seed) => {{ {hook}\n}})({seed})")
}

/// Runs the task's `reset` hook on the freshly loaded start page and reads the
/// instruction; a hook that fails closes the session and fails the episode.
async fn reset(
    mut session: BrowserSession,
    opening: &Opening<'_>,
    key: Option<SessionKey>,
    start: SessionStart,
) -> Result<Opened> {
    if let Some(hook) = &opening.web.reset
        && let Err(e) = session.eval(seeded(hook, opening.seed)).await
    {
        let _closed = session.close().await;
        return Err(BenchError::task(
            opening.task,
            format!("its reset hook failed: {e}"),
        ));
    }
    let instruction = read_instruction(&mut session, opening).await?;
    Ok(Opened {
        session,
        key,
        start,
        instruction,
    })
}

/// The text of the task's `instruction` expression (`None` without one); a failed read
/// closes the session and fails the episode.
async fn read_instruction(
    session: &mut BrowserSession,
    opening: &Opening<'_>,
) -> Result<Option<String>> {
    let Some(expression) = &opening.web.instruction else {
        return Ok(None);
    };
    match session.eval(format!("String({expression})")).await {
        Ok(Value::String(text)) => Ok(Some(text)),
        Ok(other) => Ok(Some(other.to_string())),
        Err(e) => {
            let _closed = session.close().await;
            Err(BenchError::task(
                opening.task,
                format!("its `instruction` could not be read: {e}"),
            ))
        }
    }
}

/// The URL without its fragment (a link to `#` does not leave the document).
fn document_url(url: &str) -> &str {
    url.split('#').next().unwrap_or(url)
}

/// Starts the episode on the page the session's last episode of the same task left: only
/// while that page is still the one it started on (same URL, no popup), after releasing
/// what the last episode held; the page's URL then names the new seed
/// (`history.replaceState`, no load), and `hook` starts the episode.
async fn start_in_place(
    session: &mut BrowserSession,
    last_url: &str,
    opening: &Opening<'_>,
    hook: &str,
) -> std::result::Result<(), String> {
    if !session.restartable() {
        return Err("it opened a popup or tab, or was lost".into());
    }
    let now = session.current_url().await.map_err(|e| e.to_string())?;
    if document_url(&now) != document_url(last_url) {
        return Err(format!("its page is {now}, not {last_url}"));
    }
    session
        .start_over_in_place()
        .await
        .map_err(|e| e.to_string())?;
    let url = Value::String(opening.url.clone());
    let script = format!("history.replaceState(history.state, '', {url});\n{hook}");
    session
        .eval(seeded(&script, opening.seed))
        .await
        .map_err(|e| format!("its reset_in_place hook failed: {e}"))?;
    Ok(())
}
