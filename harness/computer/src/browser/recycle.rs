//! Starting a session over on another page without a new BrowserContext: the page leaves
//! for a blank document of its origin, that origin's storage and the context's cookies are
//! cleared, its history is dropped, and the session's per-step state starts fresh. Cheaper
//! than a new session (no context, proxy or renderer to start), for runners that open
//! many short episodes with the same options.

use super::cdp::cdp;
use super::session::BrowserSession;
use crate::error::{ActionError, Error, Result};
use crate::op::Op;
use chromiumoxide::cdp::browser_protocol::page::{
    GetNavigationHistoryParams, ResetNavigationHistoryParams,
};
use chromiumoxide::cdp::browser_protocol::storage::{ClearCookiesParams, ClearDataForOriginParams};

/// What `Storage.clearDataForOrigin` clears. Not `all`: that also drops the browser-wide
/// shader cache, after which the next page's frames stalled for seconds.
const ORIGIN_STORAGE: &str =
    "local_storage,indexeddb,cache_storage,service_workers,file_systems,websql,storage_buckets";

impl BrowserSession {
    /// Whether [`restart_at`](Self::restart_at) can reuse this session: it is open, its
    /// browser is not lost, and it holds its one page (no popup or tab was opened or
    /// followed, whose pages and session storage a restart would not reach).
    pub fn restartable(&mut self) -> bool {
        !self.closed
            && self.guard().is_ok()
            && self.earlier_pages.is_empty()
            && self.pending_popup.is_none()
            && self.open_pages() <= 1
    }

    /// Starts the session over on `url`, as a fresh session opened with that start URL
    /// would be, keeping its context, proxy, policy and page. `blank` is a URL of the one
    /// origin the session's pages came from that serves a document without script (an
    /// error page will do); a session whose tab has visited another origin is refused,
    /// since its session storage there could not be reached.
    ///
    /// The page goes to `blank` (the old document's unload handlers run before anything
    /// is cleared); there, that origin's session storage, local storage and `window.name`
    /// are cleared, then with `Storage.clearDataForOrigin` its IndexedDB, Cache Storage,
    /// service workers, file systems and storage buckets, and every cookie of the context; the tab's history is
    /// dropped and the session's per-step state starts fresh. The HTTP cache is kept.
    /// Fails when the session is not [`restartable`](Self::restartable) (close it and
    /// open a new one).
    pub async fn restart_at(&mut self, url: &str, blank: &str) -> Result<()> {
        if !self.restartable() {
            return Err(Error::Browser(
                "this session cannot be restarted (closed, lost, or it has popups)".into(),
            ));
        }
        for target in [url, blank] {
            if let Err(refusal) = self.policy.check(target) {
                return Err(ActionError::Blocked {
                    url: target.to_owned(),
                    reason: refusal.0,
                }
                .into());
            }
        }
        let origin = web_origin(blank)
            .ok_or_else(|| Error::Browser(format!("{blank} is not an http(s) URL")))?;
        let history = self
            .page
            .execute(GetNavigationHistoryParams::default())
            .await
            .map_err(cdp)?;
        if let Some(other) = history
            .result
            .entries
            .iter()
            .filter_map(|entry| web_origin(&entry.url))
            .find(|o| *o != origin)
        {
            return Err(Error::Browser(format!(
                "the session visited {other}, not only {origin}: open a new one"
            )));
        }
        self.run_inner(&Op::Navigate {
            url: blank.to_owned(),
        })
        .await?;
        self.settle_inner(false).await?;
        self.eval(
            "try { sessionStorage.clear(); localStorage.clear(); } finally { window.name = ''; }",
        )
        .await?;
        self.page
            .execute(ClearDataForOriginParams::new(origin, ORIGIN_STORAGE))
            .await
            .map_err(cdp)?;
        {
            let browser = self.browser.shared.browser.read().await;
            browser
                .execute(ClearCookiesParams {
                    browser_context_id: Some(self.context.clone()),
                })
                .await
                .map_err(cdp)?;
        }
        self.page
            .execute(ResetNavigationHistoryParams::default())
            .await
            .map_err(cdp)?;
        self.forget_step_state();
        self.run_inner(&Op::Navigate {
            url: url.to_owned(),
        })
        .await?;
        self.settle_inner(false).await?;
        Ok(())
    }
}

/// `scheme://host[:port]` of an http(s) URL; `None` for `about:`, `data:` and the like,
/// which keep no storage of their own.
fn web_origin(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("http://")
        .map(|r| ("http", r))
        .or_else(|| url.strip_prefix("https://").map(|r| ("https", r)))?;
    let (scheme, rest) = rest;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    use super::web_origin;

    #[test]
    fn origins_of_urls() {
        assert_eq!(
            web_origin("http://127.0.0.1:8080/a/b.html?seed=1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            web_origin("https://u:p@example.com#x").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(web_origin("about:blank"), None);
        assert_eq!(web_origin("data:text/html,x"), None);
    }
}
