//! [`BrowserSession`]: one isolated session (its own BrowserContext, proxy, viewport and
//! policy); opening it from a [`Browser`], its public handles, and closing it.

use super::cdp::{SyncStream, cdp, eval_on};
use super::chromium::NEXT_ID;
use super::frames::FrameDriver;
use super::lifecycle::Browser;
use super::net_watch::NetWatch;
use super::options::SessionOptions;
use super::page_setup::prepare_page;
use super::page_warden::PageWarden;
use super::screens::{ScreenPlace, draws_at_display_scale, move_window, screen_for};
use super::state::locked;
use crate::display::{Scaler, Size};
use crate::error::{ActionError, Error, Result};
use crate::op::Op;
use crate::origin::OriginPolicy;
use crate::socks::SessionProxy;
use crate::step::SettleEnd;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::browser::{
    SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, TargetId,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One isolated session: a BrowserContext with one page.
pub struct BrowserSession {
    pub(super) browser: Browser,
    pub(super) id: u64,
    pub(super) context: chromiumoxide::cdp::browser_protocol::browser::BrowserContextId,
    pub(super) page: Page,
    /// Pages this session left behind when it followed a popup (closed with the session).
    pub(super) earlier_pages: Vec<Page>,
    /// New pages in this session's context (popups, `target=_blank`).
    pub(super) popups: SyncStream<TargetId>,
    pub(super) net: NetWatch,
    pub(super) scaler: Scaler,
    pub(super) policy: OriginPolicy,
    pub(super) viewport: Size,
    pub(super) dpr: f64,
    pub(super) settle_cap: Duration,
    /// See [`SessionOptions::screencast`].
    pub(super) screencast: bool,
    /// The session's pages draw only when asked (begin-frame control, see `frames`); its
    /// popups inherit that from their opener.
    pub(super) on_demand: bool,
    /// With `on_demand`: the size of a drawn frame (the viewport, or the display where the
    /// session has a screen at its scale); a capture of the whole viewport at this size is
    /// one drawn frame.
    pub(super) frame_size: Size,
    /// The screen the session's windows are on when its pages draw at the display's scale
    /// (see `screens`); `None`: the default screen, at `dpr`.
    pub(super) screen: Option<ScreenPlace>,
    /// With `on_demand`: the page's network activity count when a frame was last drawn.
    /// Chromium drops input to a document that has drawn no frame yet, so input first
    /// draws one when the page has loaded or fetched since (see `run_inner`).
    pub(super) drawn_activity: u64,
    /// When the current step's settling must end (set when it starts).
    pub(super) settle_deadline: Option<tokio::time::Instant>,
    /// How the current step's settling ended so far.
    pub(super) settle_end: SettleEnd,
    /// The previous step ended while script motion still ran (see
    /// [`AMBIENT_WAIT`](super::settle::AMBIENT_WAIT)).
    pub(super) ambient: bool,
    /// Mouse buttons held (CDP `buttons` bitmask).
    pub(super) buttons: i64,
    /// The last action scrolled or moved the pointer: settle waits for a frame.
    pub(super) needs_frame: bool,
    /// The scroll offset read while settling, when nothing can have moved it since.
    pub(super) scroll_hint: Option<(f64, f64)>,
    /// Settling skipped the page's timer turn: the capture runs it alongside and captures
    /// again if the page started work in it (see `settle_inner`).
    pub(super) deferred_turn: bool,
    /// A popup seen during a capture, for the next settle to follow.
    pub(super) pending_popup: Option<TargetId>,
    /// The session's SOCKS proxy (every connection goes through it); stops with it.
    pub(super) proxy: SessionProxy,
    /// Counts the session's pages and closes those over [`MAX_OPEN_PAGES`](super::MAX_OPEN_PAGES).
    pub(super) warden: PageWarden,
    /// What file choosers are answered with (see [`SessionOptions::uploads`]).
    pub(super) uploads: Vec<PathBuf>,
    /// Notes for the model about this step (see
    /// [`Backend::take_notes`](crate::Backend::take_notes)).
    pub(super) notes: Vec<String>,
    /// The Chromium process this session lives in.
    pub(super) generation: u64,
    /// Tells when a generation is lost (the newest lost one).
    pub(super) lost_rx: tokio::sync::watch::Receiver<u64>,
    /// Set once this session's browser is lost: every later call fails with it.
    pub(super) lost: Option<String>,
    pub(super) closed: bool,
}

impl std::fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSession")
            .field("id", &self.id)
            .field("scaler", &self.scaler)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Opens an isolated session (own BrowserContext, viewport, DPR, policy).
    ///
    /// The session's policy is widened by what the operator allows
    /// ([`BrowserOptions::allow_origins`], [`BrowserOptions::allow_private_network`]).
    ///
    /// [`BrowserOptions::allow_origins`]: super::BrowserOptions::allow_origins
    /// [`BrowserOptions::allow_private_network`]: super::BrowserOptions::allow_private_network
    pub async fn new_session(&self, mut opts: SessionOptions) -> Result<BrowserSession> {
        opts.policy = opts.policy.with_operator(
            &self.shared.opts.allow_origins,
            self.shared.opts.allow_private_network,
        );
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.shared
            .policies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, opts.policy.clone());
        let opened = match self.ensure_running().await {
            Ok(generation) => self.open(id, &opts, generation).await,
            Err(e) => Err(e),
        };
        match opened {
            Ok(s) => Ok(s),
            Err(e) => {
                self.forget(id);
                Err(e)
            }
        }
    }

    pub(super) fn forget(&self, id: u64) {
        locked(&self.shared.policies).remove(&id);
        locked(&self.shared.contexts).retain(|_, s| *s != id);
        locked(&self.shared.refused).remove(&id);
        locked(&self.shared.navigating).remove(&id);
    }

    async fn open(
        &self,
        id: u64,
        opts: &SessionOptions,
        generation: u64,
    ) -> Result<BrowserSession> {
        // Every connection of the session goes through its proxy, which resolves names
        // itself and connects only to addresses it checked (see `socks`). `<-loopback>`
        // stops Chromium from sending loopback addresses direct, as it does by default.
        let proxy = SessionProxy::start(opts.policy.clone())
            .await
            .map_err(|e| Error::Config(format!("session proxy: {e}")))?;
        let browser = self.shared.browser.read().await;
        let context = browser
            .create_browser_context(CreateBrowserContextParams {
                dispose_on_detach: Some(true),
                proxy_server: Some(proxy.proxy_server()),
                proxy_bypass_list: Some("<-loopback>".to_owned()),
                origins_with_universal_network_access: None,
            })
            .await
            .map_err(cdp)?;
        locked(&self.shared.contexts).insert(context.inner().clone(), id);
        let (behavior, path) = match &opts.downloads {
            Some(dir) => (
                SetDownloadBehaviorBehavior::AllowAndName,
                Some(dir.display().to_string()),
            ),
            None => (SetDownloadBehaviorBehavior::Deny, None),
        };
        browser
            .execute(SetDownloadBehaviorParams {
                behavior,
                browser_context_id: Some(context.clone()),
                download_path: path,
                events_enabled: None,
            })
            .await
            .map_err(cdp)?;
        let (popups, warden) = PageWarden::start(&browser, &self.shared, context.clone()).await?;
        let popups = SyncStream::new(popups);
        let on_demand = self.shared.opts.draws_on_demand();
        let mut target = CreateTargetParams::new("about:blank");
        target.browser_context_id = Some(context.clone());
        target.enable_begin_frame_control = on_demand.then_some(true);
        let page = browser.new_page(target).await.map_err(cdp)?;
        let display = opts.display.resolve(opts.viewport);
        let at_display_scale = draws_at_display_scale(
            on_demand,
            opts.render_at_display_scale,
            opts.dpr,
            opts.viewport,
            display,
        );
        let screen = match at_display_scale {
            true => Some(
                screen_for(
                    &self.shared.screens,
                    generation,
                    &page,
                    opts.viewport,
                    display,
                )
                .await?,
            ),
            false => None,
        };
        drop(browser);
        ready_page(self, &page, opts.viewport, opts.dpr, screen).await?;
        let net = NetWatch::new(&page).await?;
        let mut session = BrowserSession {
            browser: self.clone(),
            id,
            context,
            page,
            earlier_pages: Vec::new(),
            popups,
            net,
            scaler: Scaler::new(display, opts.viewport, opts.dpr),
            policy: opts.policy.clone(),
            viewport: opts.viewport,
            dpr: opts.dpr,
            settle_cap: opts.settle_cap,
            settle_deadline: None,
            settle_end: SettleEnd::Quiet,
            ambient: false,
            screencast: opts.screencast,
            on_demand,
            drawn_activity: u64::MAX,
            frame_size: if screen.is_some() {
                display
            } else {
                opts.viewport
            },
            screen,
            buttons: 0,
            needs_frame: false,
            scroll_hint: None,
            deferred_turn: false,
            pending_popup: None,
            proxy,
            warden,
            uploads: opts.uploads.clone(),
            notes: Vec::new(),
            closed: false,
            generation,
            lost_rx: self.shared.lost_tx.subscribe(),
            lost: None,
        };
        if let Some(url) = &opts.start_url {
            if let Err(refusal) = opts.policy.check(url) {
                let _ = session.close().await;
                return Err(ActionError::Blocked {
                    url: url.clone(),
                    reason: refusal.0,
                }
                .into());
            }
            session
                .run_inner(&Op::Navigate { url: url.clone() })
                .await?;
            session.settle_inner(false).await?;
        }
        Ok(session)
    }
}

/// Sets a session's page up (its own or a popup it follows): its window onto the session's
/// screen where it has one, then its viewport, DPR and scripts (`prepare_page`). On a
/// screen the page is not given a DPR: it draws at the screen's (an emulated one would be
/// composed with the screen's and read back rounded).
async fn ready_page(
    browser: &Browser,
    page: &Page,
    viewport: Size,
    dpr: f64,
    screen: Option<ScreenPlace>,
) -> Result<()> {
    if let Some(place) = screen {
        let chromium = browser.shared.browser.read().await;
        move_window(&chromium, page, place).await?;
    }
    // `Emulation.setDeviceMetricsOverride` takes 0 as "no override".
    let emulated = if screen.is_some() { 0.0 } else { dpr };
    prepare_page(page, viewport, emulated).await
}

impl BrowserSession {
    pub fn page(&self) -> &Page {
        &self.page
    }

    /// Sets up a page the session takes over (a popup or tab): onto the session's screen,
    /// with its viewport and DPR (see `ready_page`).
    pub(super) async fn ready_page(&self, page: &Page) -> Result<()> {
        ready_page(&self.browser, page, self.viewport, self.dpr, self.screen).await
    }

    /// Moves the window of the session's page to `place`.
    pub(super) async fn move_window_to(&self, place: ScreenPlace) -> Result<()> {
        let chromium = self.browser.shared.browser.read().await;
        move_window(&chromium, &self.page, place).await
    }

    /// The page to draw frames on while waiting, where the session's pages draw only when
    /// asked (see `frames::pumped`).
    pub(super) fn frame_driver(&self) -> Option<FrameDriver> {
        self.on_demand.then(|| {
            FrameDriver::new(
                self.page.clone(),
                Arc::clone(&self.browser.shared.frame_turn),
                self.screen.is_some(),
            )
        })
    }

    /// How many pages (its own, tabs, popups) the session has open now; never more than
    /// [`MAX_OPEN_PAGES`](super::MAX_OPEN_PAGES).
    pub fn open_pages(&self) -> usize {
        self.warden.open.load(Ordering::Relaxed)
    }

    /// Evaluates JavaScript in the page and returns its JSON value.
    pub async fn eval(&self, expression: impl Into<String>) -> Result<serde_json::Value> {
        eval_on(self.page.clone(), expression.into()).await
    }

    /// Closes the page and disposes of the context (cookies, storage, cache go with it).
    pub async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.browser.forget(self.id);
        if self.guard().is_err() {
            // Its process is gone (and its context with it).
            return Ok(());
        }
        let _closed = self.page.clone().close().await;
        for p in self.earlier_pages.drain(..) {
            let _closed = p.close().await;
        }
        let browser = self.browser.shared.browser.read().await;
        browser
            .dispose_browser_context(self.context.clone())
            .await
            .map_err(cdp)?;
        Ok(())
    }
}
