//! The page warden: counts the pages of one session's context, forwards new ones (popups,
//! tabs) to the session, and closes those over [`MAX_OPEN_PAGES`] as they open.

use super::cdp::target_events;
use super::options::MAX_OPEN_PAGES;
use super::state::Shared;
use crate::error::Result;
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, TargetId};
use futures::StreamExt as _;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::task::JoinHandle;

/// Watches the pages of one session's context: forwards new ones (popups, tabs) to the
/// session, and closes those that would exceed [`MAX_OPEN_PAGES`] as soon as they open.
pub(super) struct PageWarden {
    /// Pages closed for the cap and not reported yet.
    pub(super) closed: Arc<AtomicUsize>,
    /// Pages of the session open now.
    pub(super) open: Arc<AtomicUsize>,
    pub(super) task: JoinHandle<()>,
}

impl Drop for PageWarden {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PageWarden {
    pub(super) async fn start(
        browser: &chromiumoxide::Browser,
        shared: &Arc<Shared>,
        context: chromiumoxide::cdp::browser_protocol::browser::BrowserContextId,
    ) -> Result<(futures::stream::BoxStream<'static, TargetId>, Self)> {
        let (mut created, mut destroyed) = target_events(browser).await?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<TargetId>();
        let closed = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&closed);
        let open_now = Arc::new(AtomicUsize::new(0));
        let gauge = Arc::clone(&open_now);
        let weak = Arc::downgrade(shared);
        let task = tokio::spawn(async move {
            let mut open = HashSet::new();
            loop {
                tokio::select! {
                    Some(ev) = created.next() => {
                        let info = &ev.target_info;
                        if info.r#type != "page" || info.browser_context_id.as_ref() != Some(&context) {
                            continue;
                        }
                        if open.len() < MAX_OPEN_PAGES {
                            open.insert(info.target_id.clone());
                            gauge.store(open.len(), Ordering::Relaxed);
                            let _sent = tx.send(info.target_id.clone());
                            continue;
                        }
                        counter.fetch_add(1, Ordering::Relaxed);
                        let Some(shared) = weak.upgrade() else { return };
                        let id = info.target_id.clone();
                        // Closed aside, so a storm of windows is answered as fast as it comes.
                        tokio::spawn(async move {
                            let browser = shared.browser.read().await;
                            let _closed = browser.execute(CloseTargetParams::new(id)).await;
                        });
                    }
                    Some(ev) = destroyed.next() => {
                        open.remove(&ev.target_id);
                        gauge.store(open.len(), Ordering::Relaxed);
                    }
                    else => return,
                }
            }
        });
        let stream =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|t| (t, rx)) })
                .boxed();
        Ok((
            stream,
            Self {
                closed,
                open: open_now,
                task,
            },
        ))
    }
}
