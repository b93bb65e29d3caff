//! Following the popups and tabs a page opens: the newest becomes the session's page, and
//! the session goes back to the opener when the request guard closed the popup.

use super::cdp::{cdp, eval_on};
use super::net_watch::NetWatch;
use super::session::BrowserSession;
use super::state::locked;
use crate::error::Result;
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use std::time::Duration;

impl BrowserSession {
    /// Makes the newest popup the session's page, as a person would see the new tab. The
    /// opener is hidden from then on (Chromium stops drawing it), so staying on it would
    /// leave the model with a stale or missing screenshot.
    pub(super) async fn follow(
        &mut self,
        target: TargetId,
        deadline: tokio::time::Instant,
    ) -> Result<()> {
        if &target == self.page.target_id() || self.popup_refused(&target) {
            return Ok(());
        }
        // chromiumoxide registers the page once it has attached to the new target.
        let page = loop {
            let found = self
                .browser
                .shared
                .browser
                .read()
                .await
                .get_page(target.clone())
                .await;
            match found {
                Ok(p) => break p,
                Err(_) if self.popup_refused(&target) => return Ok(()),
                Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => return Err(cdp(format!("popup never became ready: {e}"))),
            }
        };
        let ready = async {
            self.ready_page(&page).await?;
            NetWatch::new(&page).await
        };
        self.net = match ready.await {
            Ok(net) => net,
            // Closed under us: its first document was refused.
            Err(_) if self.popup_refused(&target) => return Ok(()),
            Err(e) => return Err(e),
        };
        self.watch_popup_load(&page).await;
        let old = std::mem::replace(&mut self.page, page);
        self.earlier_pages.push(old);
        Ok(())
    }

    /// Sets whether popup `page`, whose events are watched from now on, is still loading.
    /// Its load may have started, or even ended, before the watch began (a page from a
    /// local server often has): taken as loading, such a popup held every step that opened
    /// one to the settle cap. So the document is asked: a document of its own that is
    /// complete has loaded, one still parsing will report its stop. An empty `about:blank`
    /// is the window's initial document, with the navigation `window.open(url)` started
    /// (or one the opener starts later) to come: awaited until it starts, then counted as
    /// any load. An `about:blank` the opener wrote into is the popup's page.
    async fn watch_popup_load(&mut self, page: &chromiumoxide::Page) {
        const STATE_JS: &str = "[document.readyState, location.href, \
             !!document.documentElement && document.documentElement.textContent !== '' \
             || !!document.body && document.body.children.length > 0]";
        let Ok(state) = eval_on(page.clone(), STATE_JS.into()).await else {
            // No answer: the document is being replaced, and the load will report its stop.
            self.net.loading = true;
            return;
        };
        let ready = state.get(0).and_then(serde_json::Value::as_str);
        let href = state.get(1).and_then(serde_json::Value::as_str);
        let written = state.get(2).and_then(serde_json::Value::as_bool) == Some(true);
        match href {
            Some("about:blank") if !written => self.net.awaiting_load = true,
            Some(_) if ready != Some("complete") => self.net.loading = true,
            Some(href) => self.net.url = Some(href.to_owned()),
            None => self.net.loading = true,
        }
    }

    /// Goes back to the opener when the page followed is a popup the request guard closed
    /// (its first document was refused). Returns whether it did.
    pub(super) async fn leave_refused_popup(&mut self) -> Result<bool> {
        if !self.popup_refused(self.page.target_id()) {
            return Ok(false);
        }
        let Some(opener) = self.earlier_pages.pop() else {
            return Ok(false);
        };
        self.net = NetWatch::new(&opener).await?;
        self.page = opener;
        Ok(true)
    }

    /// Whether the request guard closed popup `target` because its first document was
    /// refused (the session stays on its opener).
    fn popup_refused(&self, target: &TargetId) -> bool {
        locked(&self.browser.shared.refused)
            .get(&self.id)
            .is_some_and(|l| {
                l.iter()
                    .any(|r| r.closed_popup.as_deref() == Some(target.inner()))
            })
    }
}
