//! The browser-wide request guard: `Fetch` interception over every page, popup and
//! context, which refuses what any session's block-list blocks and a session's page
//! navigations its own policy refuses, and records those refusals for the session.

use super::cdp::{cdp, target_events};
use super::lifecycle::Browser;
use super::state::{RefusedNavigation, locked};
use crate::error::Result;
use crate::socks::check_url;
use chromiumoxide::cdp::browser_protocol::fetch::{
    self, ContinueRequestParams, EventRequestPaused, FailRequestParams, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, TargetId};
use futures::StreamExt as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What the request guard knows of a session's page.
struct GuardedPage {
    session: u64,
    /// The first page of the session's context (its own page, never closed here).
    own: bool,
    /// A document of this page was let through.
    loaded: bool,
}

/// Most refused navigations kept per session between two steps.
const MAX_REFUSED: usize = 20;

impl Browser {
    /// Browser-wide request interception: covers every page, popup and context.
    ///
    /// Every request is checked against the block-lists of all sessions. A main-frame
    /// navigation of a session's page is also checked against that session's whole policy
    /// (allow-list, and the private-network rule on the addresses its host resolves to),
    /// and a refused one is cancelled (`Aborted`) rather than failed: Chromium then commits
    /// no error page and the page stays where it was, and the session reports the refusal
    /// in the step ([`Backend::take_refusal`](crate::Backend::take_refusal)).
    pub(super) async fn start_fetch_guard(&self) -> Result<()> {
        let browser = self.shared.browser.read().await;
        let (mut created, mut destroyed) = target_events(&browser).await?;
        let mut paused = browser
            .event_listener::<EventRequestPaused>()
            .await
            .map_err(cdp)?;
        browser
            .execute(fetch::EnableParams {
                patterns: Some(vec![RequestPattern {
                    url_pattern: Some("*".into()),
                    resource_type: None,
                    request_stage: Some(RequestStage::Request),
                }]),
                handle_auth_requests: None,
            })
            .await
            .map_err(cdp)?;
        drop(browser);
        let shared = Arc::downgrade(&self.shared);
        let task = tokio::spawn(async move {
            // Page target id (= its main frame id) → its session.
            let pages: Arc<Mutex<HashMap<String, GuardedPage>>> = Arc::default();
            loop {
                // Target events first: a page's navigation is never seen before the page.
                let ev = tokio::select! {
                    biased;
                    Some(ev) = created.next() => {
                        let info = &ev.target_info;
                        if info.r#type == "page"
                            && let Some(context) = &info.browser_context_id
                            && let Some(shared) = shared.upgrade()
                            && let Some(&session) = locked(&shared.contexts).get(context.inner())
                        {
                            let mut pages = locked(&pages);
                            let own = !pages.values().any(|p| p.session == session);
                            pages.insert(
                                info.target_id.inner().clone(),
                                GuardedPage { session, own, loaded: false },
                            );
                        }
                        continue;
                    }
                    Some(ev) = destroyed.next() => {
                        locked(&pages).remove(ev.target_id.inner());
                        continue;
                    }
                    Some(ev) = paused.next() => ev,
                    else => break,
                };
                let Some(shared) = shared.upgrade() else {
                    break;
                };
                let frame = ev.frame_id.inner().clone();
                let session = (ev.resource_type == ResourceType::Document)
                    .then(|| locked(&pages).get(&frame).map(|p| p.session))
                    .flatten();
                let pages = Arc::clone(&pages);
                let (blocked, policy) = {
                    let policies = locked(&shared.policies);
                    (
                        policies
                            .values()
                            .find_map(|p| p.check_blocklist(&ev.request.url).err()),
                        session.and_then(|s| policies.get(&s).cloned()),
                    )
                };
                let id = ev.request_id.clone();
                let url = ev.request.url.clone();
                // Answer without blocking the loop on the round trip.
                tokio::spawn(async move {
                    let refusal = match (blocked, &policy) {
                        (Some(r), _) => Some(r),
                        (None, Some(policy)) => check_url(policy, &url).await.err(),
                        (None, None) => None,
                    };
                    let mut close = None;
                    let reason = match (refusal, session) {
                        (Some(refusal), Some(session)) => {
                            let blank_popup = locked(&pages)
                                .get(&frame)
                                .is_some_and(|p| !p.own && !p.loaded);
                            if blank_popup {
                                close = Some(frame.clone());
                            }
                            let error_page =
                                !blank_popup && locked(&shared.navigating).contains(&session);
                            let mut refused = locked(&shared.refused);
                            let list = refused.entry(session).or_default();
                            if list.len() < MAX_REFUSED {
                                list.push(RefusedNavigation {
                                    url,
                                    reason: refusal.0,
                                    closed_popup: close.clone(),
                                    error_page,
                                });
                            }
                            Some(if error_page {
                                ErrorReason::BlockedByClient
                            } else {
                                ErrorReason::Aborted
                            })
                        }
                        (Some(_), None) => Some(ErrorReason::BlockedByClient),
                        (None, Some(_)) => {
                            if let Some(page) = locked(&pages).get_mut(&frame) {
                                page.loaded = true;
                            }
                            None
                        }
                        (None, None) => None,
                    };
                    let browser = shared.browser.read().await;
                    if let Some(target) = close {
                        let _closed = browser
                            .execute(CloseTargetParams::new(TargetId::new(target)))
                            .await;
                    }
                    let _answered = match reason {
                        Some(reason) => browser
                            .execute(FailRequestParams::new(id, reason))
                            .await
                            .map(|_| ()),
                        None => browser
                            .execute(ContinueRequestParams::new(id))
                            .await
                            .map(|_| ()),
                    };
                });
            }
        });
        self.shared.life().tasks.push(task);
        Ok(())
    }
}
