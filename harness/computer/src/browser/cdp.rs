//! CDP plumbing every part of the backend uses: the error conversion, evaluating a script
//! in a page, the browser's target events, and the `Sync` stream wrapper that keeps
//! sessions `Send`.

use crate::error::{Error, Result};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::{EventTargetCreated, EventTargetDestroyed};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::listeners::EventStream;
use futures::StreamExt as _;
use std::sync::Mutex;

pub(super) fn cdp(e: impl std::fmt::Display) -> Error {
    Error::Browser(e.to_string())
}

pub(super) async fn eval_on(page: Page, expression: String) -> Result<serde_json::Value> {
    let mut p = EvaluateParams::new(expression);
    p.return_by_value = Some(true);
    p.await_promise = Some(true);
    let r = page.execute(p).await.map_err(cdp)?;
    if let Some(ex) = &r.result.exception_details {
        let detail = ex
            .exception
            .as_ref()
            .and_then(|e| e.description.clone())
            .unwrap_or_else(|| ex.text.clone());
        return Err(Error::Browser(format!("script threw: {detail}")));
    }
    Ok(r.result
        .result
        .value
        .clone()
        .unwrap_or(serde_json::Value::Null))
}

/// The browser's target events (pages, popups and tabs of every context): created, and
/// destroyed, subscribed in that order.
pub(super) async fn target_events(
    browser: &chromiumoxide::Browser,
) -> Result<(
    EventStream<EventTargetCreated>,
    EventStream<EventTargetDestroyed>,
)> {
    let created = browser
        .event_listener::<EventTargetCreated>()
        .await
        .map_err(cdp)?;
    let destroyed = browser
        .event_listener::<EventTargetDestroyed>()
        .await
        .map_err(cdp)?;
    Ok((created, destroyed))
}

/// A stream that is only ever polled through `&mut`, made `Sync` by a mutex that is never
/// contended (`get_mut`), so a session — and every future that borrows it — is `Send`:
/// sessions can run on any worker thread of a multi-threaded runtime.
pub(super) struct SyncStream<T>(Mutex<futures::stream::BoxStream<'static, T>>);

impl<T> SyncStream<T> {
    pub(super) fn new(stream: impl futures::Stream<Item = T> + Send + 'static) -> Self {
        Self(Mutex::new(stream.boxed()))
    }
}

impl<T> futures::Stream for SyncStream<T> {
    type Item = T;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        let inner = self
            .get_mut()
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.as_mut().poll_next(cx)
    }
}
