//! What a page's network and frames are doing, from its CDP events: requests in flight,
//! whether the main frame loads, its URL, file choosers opened, and screencast frames.

use super::cdp::{SyncStream, cdp};
use super::in_flight::{InFlight, LoadTurns};
use crate::error::Result;
use chromiumoxide::Page;
use chromiumoxide::cdp::IntoEventKind;
use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventFileChooserOpened, EventFrameNavigated, EventFrameStartedLoading,
    EventFrameStoppedLoading, EventNavigatedWithinDocument, EventScreencastFrame,
    FileChooserOpenedMode,
};
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use std::sync::Arc;

/// Counts requests in flight and whether the main frame is loading, from Network/Page
/// events. Drained synchronously in `settle`, so no event that arrived before a round trip
/// to the page can be missed.
pub(super) struct NetWatch {
    pub(super) events: SyncStream<NetEvent>,
    pub(super) inflight: InFlight,
    /// Whether the main frame loads, as of the last [`drain`](Self::drain).
    pub(super) loading: bool,
    /// Its load starts and stops read since (see [`LoadTurns`]).
    turns: LoadTurns,
    /// A load is to come that has not started yet (a popup still on its initial
    /// `about:blank`): not quiet until the main frame starts one, which the turns then
    /// count as any other, in whichever order its start and stop are read.
    pub(super) awaiting_load: bool,
    /// The main frame started a load (a new document, or a same-document one) since
    /// settling last drew the frames a new document needs (see `settle`).
    pub(super) loaded_since_warm: bool,
    pub(super) main_frame: String,
    /// The main frame's URL as of the last drained event (`None` until one arrives), so
    /// reporting `current_url` costs no round trip to the page.
    pub(super) url: Option<String>,
    /// File choosers opened and not answered yet: (input node, multiple).
    pub(super) choosers: Vec<(Option<BackendNodeId>, bool)>,
    /// Requests, loads and URL changes seen so far: tells whether the page started work
    /// between two points in time, even work that already finished.
    pub(super) activity: u64,
    /// The page's screencast frames (only flowing while a capture runs).
    pub(super) frames: SyncStream<Arc<EventScreencastFrame>>,
}

pub(super) enum NetEvent {
    Start(String),
    /// A request that started already was redirected (same request id).
    Redirect,
    End(String),
    FrameStart(String),
    FrameStop(String),
    /// (frame, url): a new document, or a same-document change (fragment, `pushState`).
    Url(String, String),
    /// The page opened a file chooser (intercepted: no dialog shows). The node is the
    /// `<input type=file>` when there is one; `multiple` says how many files it takes.
    FileChooser {
        input: Option<BackendNodeId>,
        multiple: bool,
    },
}

/// The page's events of type `E`, each read as a [`NetEvent`] by `read`.
async fn watch<E>(page: &Page, read: fn(&E) -> NetEvent) -> Result<BoxStream<'static, NetEvent>>
where
    E: IntoEventKind + Unpin + Send + 'static,
{
    Ok(page
        .event_listener::<E>()
        .await
        .map_err(cdp)?
        .map(move |e| read(&e))
        .boxed())
}

impl NetWatch {
    pub(super) async fn new(page: &Page) -> Result<Self> {
        let a = watch(page, |e: &EventRequestWillBeSent| {
            if e.redirect_response.is_some() {
                NetEvent::Redirect
            } else {
                NetEvent::Start(e.request_id.inner().clone())
            }
        })
        .await?;
        let b = watch(page, |e: &EventLoadingFinished| {
            NetEvent::End(e.request_id.inner().clone())
        })
        .await?;
        let c = watch(page, |e: &EventLoadingFailed| {
            NetEvent::End(e.request_id.inner().clone())
        })
        .await?;
        let d = watch(page, |e: &EventFrameStartedLoading| {
            NetEvent::FrameStart(e.frame_id.inner().clone())
        })
        .await?;
        let e = watch(page, |e: &EventFrameStoppedLoading| {
            NetEvent::FrameStop(e.frame_id.inner().clone())
        })
        .await?;
        let f = watch(page, |e: &EventFrameNavigated| {
            let url = format!(
                "{}{}",
                e.frame.url,
                e.frame.url_fragment.as_deref().unwrap_or_default()
            );
            NetEvent::Url(e.frame.id.inner().clone(), url)
        })
        .await?;
        let g = watch(page, |e: &EventNavigatedWithinDocument| {
            NetEvent::Url(e.frame_id.inner().clone(), e.url.clone())
        })
        .await?;
        let h = watch(page, |e: &EventFileChooserOpened| NetEvent::FileChooser {
            input: e.backend_node_id,
            multiple: e.mode == FileChooserOpenedMode::SelectMultiple,
        })
        .await?;
        let frames = page
            .event_listener::<EventScreencastFrame>()
            .await
            .map_err(cdp)?;
        Ok(Self {
            frames: SyncStream::new(frames),
            events: SyncStream::new(futures::stream::select_all([a, b, c, d, e, f, g, h])),
            choosers: Vec::new(),
            inflight: InFlight::default(),
            loading: false,
            turns: LoadTurns::default(),
            awaiting_load: false,
            loaded_since_warm: false,
            main_frame: page.target_id().inner().clone(),
            url: None,
            activity: 0,
        })
    }

    pub(super) fn apply(&mut self, ev: NetEvent) {
        if matches!(
            ev,
            NetEvent::Start(_)
                | NetEvent::Redirect
                | NetEvent::FrameStart(_)
                | NetEvent::Url(..)
                | NetEvent::FileChooser { .. }
        ) {
            self.activity += 1;
        }
        match ev {
            NetEvent::Start(id) => self.inflight.start(id),
            NetEvent::End(id) => self.inflight.end(id),
            NetEvent::FrameStart(f) if f == self.main_frame => {
                self.turns.start();
                self.awaiting_load = false;
                self.loaded_since_warm = true;
                // A new document: requests of the old one will never report back.
                self.inflight.clear();
            }
            NetEvent::FrameStop(f) if f == self.main_frame => self.turns.stop(),
            NetEvent::Url(f, url) if f == self.main_frame => {
                // An error page committed: the request it replaces never reports back.
                if url.starts_with("chrome-error:") {
                    self.inflight.clear();
                }
                self.url = Some(url);
            }
            NetEvent::FileChooser { input, multiple } => self.choosers.push((input, multiple)),
            _ => {}
        }
    }

    /// Applies every event that has arrived; the main frame's loading state is resolved
    /// from all of them together (their order is not known, see `in_flight`).
    pub(super) fn drain(&mut self) {
        while let Some(Some(ev)) = self.events.next().now_or_never() {
            self.apply(ev);
        }
        self.loading = self.turns.resolve(self.loading);
    }

    pub(super) fn quiet(&self) -> bool {
        self.inflight.is_empty() && !self.awaiting_load && !self.turns.loading(self.loading)
    }
}
