//! The Chromium backend (feature `browser`): one browser process, one BrowserContext per
//! session, input through CDP `Input.*`, capture with `Page.captureScreenshot` at the model
//! size (`clip.scale`).
//!
//! Isolation: every session's context is routed through the session's own SOCKS5 proxy
//! (`socks`), which checks the allow- and block-list by name, resolves the name itself,
//! refuses private-network addresses (unless allowed) and block-listed addresses, and
//! connects to the address it checked; this covers pages, popups, iframes, workers and
//! WebSockets. On top of that a browser-wide `Fetch` interception refuses block-listed
//! origins and non-web schemes for every target. WebRTC may not send UDP around the proxy
//! (`--webrtc-ip-handling-policy=disable_non_proxied_udp`). A session keeps at most
//! [`MAX_OPEN_PAGES`] pages open; the page's extra windows are closed as they open.
//! Downloads are denied per context unless allowed.

use crate::display::{CapturePlan, CssPoint, DisplaySpec, Scaler, Size};
use crate::engine::{Backend, SettleEnd};
use crate::error::{ActionError, Error, Result};
use crate::gate::ElementInfo;
use crate::image::{EncodedImage, ImageFormat, fit};
use crate::ops::{Op, modifier_bit};
use crate::origin::{OriginPattern, OriginPolicy};
use crate::socks::{SessionProxy, check_url};
use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::browser::{
    SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, SetFileInputFilesParams};
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::fetch::{
    self, ContinueRequestParams, EventRequestPaused, FailRequestParams, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::network::{
    ErrorReason, EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    AddScriptToEvaluateOnNewDocumentParams, CaptureScreenshotFormat, CaptureScreenshotParams,
    EventFileChooserOpened, EventFrameNavigated, EventFrameStartedLoading,
    EventFrameStoppedLoading, EventNavigatedWithinDocument, EventScreencastFrame,
    FileChooserOpenedMode, GetLayoutMetricsParams, GetNavigationHistoryParams, NavigateParams,
    NavigateToHistoryEntryParams, ScreencastFrameAckParams, SetInterceptFileChooserDialogParams,
    StartScreencastFormat, StartScreencastParams, StopScreencastParams, Viewport,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CloseTargetParams, CreateBrowserContextParams, CreateTargetParams, EventTargetCreated,
    EventTargetDestroyed, TargetId,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::{BrowserConfig, Page};
use cordon_protocol::computer::{Button, Key};
use futures::{FutureExt as _, StreamExt as _};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::RwLock;
use tokio::task::JoinHandle;

/// Debian's real binary (`/usr/bin/chromium` is a wrapper that adds flags).
pub const DEFAULT_CHROMIUM: &str = "/usr/lib/chromium/chromium";

/// Most pages (the session's own, tabs, popups) one session may have open at once. A page
/// that opens windows in a loop gets its extra windows closed as they open, so it cannot
/// take the shared Chromium down; the model is told in the step's text.
pub const MAX_OPEN_PAGES: usize = 20;

/// How long a capture waits for the screencast's first frame before it asks
/// `Page.captureScreenshot` instead.
const SCREENCAST_WAIT: Duration = Duration::from_millis(500);

/// How long a step waits for script motion that was still running when the previous
/// step ended (`settle: timeout` or `moving`): the page's own motion, not the action's.
const AMBIENT_WAIT: Duration = Duration::from_millis(300);

/// How long a step waits at most for the page to settle, by default.
pub const DEFAULT_SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the page's DOM must go unchanged (while no finite animation runs) for a screen
/// that was moving to count as stable: a few frames of a 60 Hz page, longer than the
/// 13 ms tick of jQuery-style animations.
const STABLE_QUIET_MS: f64 = 50.0;

/// Installed in every document of a session's pages before the page's own scripts: counts
/// DOM mutations, and answers `[ms since the last mutation, mutations, ms until the
/// running finite animations and transitions end]`. Endless animations are left out:
/// waiting for them is pointless.
const MOTION_JS: &str = r#"(() => {
  if (Object.getOwnPropertyDescriptor(window, '__cordonMotion')) return;
  let last = performance.now(), n = 0;
  new MutationObserver(() => { last = performance.now(); n++; })
    .observe(document, {attributes: true, childList: true, subtree: true, characterData: true});
  Object.defineProperty(window, '__cordonMotion', { value: () => {
    let wait = 0;
    for (const a of document.getAnimations()) {
      if (a.playState !== 'running' || !a.effect) continue;
      const t = a.effect.getComputedTiming();
      if (!isFinite(t.endTime) || t.localTime == null) continue;
      wait = Math.max(wait, (t.endTime - t.localTime) / Math.abs(a.playbackRate || 1));
    }
    return [performance.now() - last, n, wait];
  }});
})()"#;

/// How to start Chromium.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrowserOptions {
    pub executable: PathBuf,
    /// Upper bound on one CDP command (a hung browser fails the step instead of hanging it).
    pub request_timeout: Duration,
    pub extra_args: Vec<String>,
    /// Draw frames as soon as they are ready instead of at the 60 Hz tick
    /// (`--disable-gpu-vsync --disable-frame-rate-limit`). Measured: a capture takes
    /// ~26 ms instead of ~40 ms, but a page with a running animation then costs about a
    /// whole core instead of ~14 %. Off by default; worth it for one or two busy sessions.
    pub uncapped_frames: bool,
    /// Start Chromium without its own sandbox (`--no-sandbox`). Chromium's sandbox cannot
    /// run as root, and [`Browser::launch`] refuses to start Chromium as root unless this
    /// is set: the choice to drop that layer is the operator's, made explicitly
    /// (`--no-browser-sandbox`).
    pub no_sandbox: bool,
    /// Origins every session may reach at private-network addresses although they are not
    /// on its allow-list (the operator's `--allow-origin`).
    pub allow_origins: Vec<OriginPattern>,
    /// Lifts the private-network rule for every session (`--allow-private-network`).
    pub allow_private_network: bool,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            executable: std::env::var_os("CORDON_CHROMIUM")
                .map_or_else(|| PathBuf::from(DEFAULT_CHROMIUM), PathBuf::from),
            request_timeout: Duration::from_secs(15),
            extra_args: Vec::new(),
            uncapped_frames: false,
            no_sandbox: false,
            allow_origins: Vec::new(),
            allow_private_network: false,
        }
    }
}

impl BrowserOptions {
    pub fn executable(mut self, path: impl Into<PathBuf>) -> Self {
        self.executable = path.into();
        self
    }
}

/// How one session looks and what it may do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionOptions {
    /// CSS pixels.
    pub viewport: Size,
    pub dpr: f64,
    pub display: DisplaySpec,
    pub policy: OriginPolicy,
    /// `Some(dir)`: downloads are allowed and land in `dir`. `None`: refused.
    pub downloads: Option<PathBuf>,
    /// The longest a step waits for the page to settle (`settle_timeout_ms` over HTTP):
    /// for its network to go quiet and then for the screen to stop changing. At the cap
    /// the page is captured as it is and the step says `settle: timeout`. Default
    /// [`DEFAULT_SETTLE_TIMEOUT`].
    pub settle_cap: Duration,
    /// Opened when the session starts.
    pub start_url: Option<String>,
    /// Capture the whole viewport as the first frame of a screencast started for it,
    /// scaled by the compositor (default). `false`: `Page.captureScreenshot` with
    /// `clip.scale`, which re-renders the page at the model's scale and costs about a
    /// frame more (measured in `docs/benchmarks.md`). Zoomed regions always use the latter.
    pub screencast: bool,
    /// Files a file chooser of the page is answered with (one for a single-file input,
    /// all for a multiple one). Empty: every file chooser is refused and nothing is
    /// uploaded. The `file-upload` gate rule still applies to clicks on file inputs.
    pub uploads: Vec<PathBuf>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            viewport: Size::new(1280, 800),
            dpr: 1.0,
            display: DisplaySpec::Fixed {
                size: Size::new(1024, 640),
            },
            policy: OriginPolicy::default(),
            downloads: None,
            settle_cap: DEFAULT_SETTLE_TIMEOUT,
            start_url: None,
            screencast: true,
            uploads: Vec::new(),
        }
    }
}

fn cdp(e: impl std::fmt::Display) -> Error {
    Error::Browser(e.to_string())
}

struct Shared {
    /// The current Chromium process (replaced when it is lost).
    browser: RwLock<chromiumoxide::Browser>,
    life: Mutex<Life>,
    /// The number of the newest generation that was lost (0: none yet). Sessions wait on
    /// it next to every command, so a crash fails them at once instead of at a timeout.
    lost_tx: tokio::sync::watch::Sender<u64>,
    /// Serializes restarts.
    restart: tokio::sync::Mutex<()>,
    /// Block-lists of live sessions; the browser-wide Fetch refuses what any of them blocks.
    policies: Mutex<HashMap<u64, OriginPolicy>>,
    /// BrowserContext id → session id of live sessions, so the request guard knows whose
    /// page a navigation comes from.
    contexts: Mutex<HashMap<String, u64>>,
    /// Navigations of a session's pages the request guard refused, not reported yet.
    refused: Mutex<HashMap<u64, Vec<RefusedNavigation>>>,
    /// Sessions with a `Page.navigate` of their own in flight. chromiumoxide holds every
    /// later `Page.navigate` of the page until that one loads, which a cancelled
    /// navigation never does: a refusal during it is failed instead (an error page loads)
    /// and the session goes back in its history (see `leave_error_page`).
    navigating: Mutex<HashSet<u64>>,
    opts: BrowserOptions,
}

/// Which Chromium process is current, and what became of the earlier ones.
struct Life {
    generation: u64,
    pid: Option<u32>,
    user_data_dir: PathBuf,
    /// Why the current process is unusable (`None` while it is fine).
    lost: Option<String>,
    /// Why each earlier generation was lost (for the sessions that ran on it).
    history: HashMap<u64, String>,
    /// Handler pump, watchdog and fetch guard of the current process.
    tasks: Vec<JoinHandle<()>>,
}

/// A navigation of a session's page that the request guard refused before it left.
#[derive(Debug, Clone)]
struct RefusedNavigation {
    url: String,
    reason: String,
    /// A popup whose first document this was: the guard closed it, so the session stays
    /// on its opener instead of following a blank window.
    closed_popup: Option<String>,
    /// Failed rather than cancelled (the session's own `Page.navigate` was in flight):
    /// an error page loads, and the session goes back from it.
    error_page: bool,
}

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

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn life(&self) -> std::sync::MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks generation `generation` as unusable; sessions on it fail with
    /// [`Error::BrowserLost`] and the next new session restarts Chromium.
    fn mark_lost(&self, generation: u64, why: String) {
        let mut life = self.life();
        if life.generation == generation && life.lost.is_none() {
            life.lost = Some(why);
            drop(life);
            self.lost_tx.send_if_modified(|g| {
                let newer = *g < generation;
                *g = (*g).max(generation);
                newer
            });
        }
    }

    /// Why `generation` is unusable, if it is.
    fn lost_reason(&self, generation: u64) -> Option<String> {
        let life = self.life();
        if life.generation == generation {
            life.lost.clone()
        } else {
            Some(
                life.history
                    .get(&generation)
                    .cloned()
                    .unwrap_or_else(|| "Chromium was restarted".into()),
            )
        }
    }
}

/// One Chromium process serving many sessions, restarted when it crashes or hangs. Cheap
/// to clone.
#[derive(Clone)]
pub struct Browser {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let life = self.shared.life();
        f.debug_struct("Browser")
            .field("generation", &life.generation)
            .field("pid", &life.pid)
            .field("user_data_dir", &life.user_data_dir)
            .finish_non_exhaustive()
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Whether this process runs as root (Chromium's sandbox cannot).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

/// Whether process `pid` still runs (not gone, not a zombie waiting to be reaped).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // `pid (comm) state ...`; comm may contain spaces and parentheses.
        s.rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| !matches!(state, 'Z' | 'X'))
    })
}

/// Starts one Chromium process with a fresh profile directory.
async fn spawn_chromium(
    opts: &BrowserOptions,
) -> Result<(
    chromiumoxide::Browser,
    chromiumoxide::Handler,
    PathBuf,
    Option<u32>,
)> {
    let user_data_dir = std::env::temp_dir().join(format!(
        "cordon-chromium-{}-{}",
        std::process::id(),
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    ));
    let mut builder = BrowserConfig::builder()
        .chrome_executable(&opts.executable)
        .user_data_dir(&user_data_dir)
        .viewport(None)
        .request_timeout(opts.request_timeout)
        .launch_timeout(Duration::from_secs(20))
        // chromiumoxide adds the leading `--` itself.
        .args([
            "disable-gpu",
            "disable-smooth-scrolling",
            "no-default-browser-check",
            "disable-extensions",
            "deny-permission-prompts",
            // WebRTC would otherwise send UDP (STUN, host candidates) around the session's
            // proxy, which carries TCP only.
            // (Debian's Chromium reads this switch; `force-webrtc-…` is not in it.)
            "webrtc-ip-handling-policy=disable_non_proxied_udp",
            // Chromium's own traffic (component updates, QUIC probes, autofill field
            // lookups on form pages) would go through the session's proxy, be refused, and
            // show up in the step's text as refusals the page never asked for.
            // (chromiumoxide already passes disable-background-networking, disable-sync and
            // no-first-run; Chromium keeps the last `disable-features`, so TranslateUI,
            // chromiumoxide's own, is repeated.)
            "disable-component-update",
            "disable-quic",
            "disable-features=TranslateUI,AutofillServerCommunication,OptimizationHints,MediaRouter",
        ])
        .args(opts.extra_args.iter().map(String::as_str));
    if opts.uncapped_frames {
        builder = builder.args(["disable-gpu-vsync", "disable-frame-rate-limit"]);
    }
    if opts.no_sandbox {
        builder = builder.no_sandbox();
    } else if running_as_root() {
        return Err(Error::SandboxAsRoot);
    }
    let config = builder.build().map_err(Error::Config)?;
    let (mut browser, handler) = chromiumoxide::Browser::launch(config).await.map_err(cdp)?;
    let pid = browser.get_mut_child().and_then(|c| c.as_mut_inner().id());
    Ok((browser, handler, user_data_dir, pid))
}

impl Browser {
    /// Starts Chromium with a fresh profile directory.
    pub async fn launch(opts: BrowserOptions) -> Result<Self> {
        if !opts.executable.exists() {
            return Err(Error::BrowserMissing {
                path: opts.executable.display().to_string(),
            });
        }
        let (browser, handler, user_data_dir, pid) = spawn_chromium(&opts).await?;
        let shared = Arc::new(Shared {
            browser: RwLock::new(browser),
            life: Mutex::new(Life {
                generation: 1,
                pid,
                user_data_dir,
                lost: None,
                history: HashMap::new(),
                tasks: Vec::new(),
            }),
            lost_tx: tokio::sync::watch::Sender::new(0),
            restart: tokio::sync::Mutex::new(()),
            policies: Mutex::new(HashMap::new()),
            contexts: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            navigating: Mutex::new(HashSet::new()),
            opts,
        });
        let this = Self { shared };
        this.start(handler, 1, pid).await?;
        Ok(this)
    }

    /// The process id of the current Chromium (for diagnostics and tests).
    pub fn pid(&self) -> Option<u32> {
        self.shared.life().pid
    }

    /// How many Chromium processes this browser has started (1 until a restart).
    pub fn generation(&self) -> u64 {
        self.shared.life().generation
    }

    /// Pumps the CDP connection, watches the process, and guards requests.
    async fn start(
        &self,
        mut handler: chromiumoxide::Handler,
        generation: u64,
        pid: Option<u32>,
    ) -> Result<()> {
        let weak = Arc::downgrade(&self.shared);
        let pump = tokio::spawn(async move {
            // Errors here are per-message (a malformed event); keep pumping.
            while handler.next().await.is_some() {}
            if let Some(shared) = weak.upgrade() {
                shared.mark_lost(generation, "the connection to Chromium closed".into());
            }
        });
        // A dead process leaves the websocket open-but-silent for a while: watch the
        // process itself so its sessions fail at once.
        let weak = Arc::downgrade(&self.shared);
        let watchdog = tokio::spawn(async move {
            let Some(pid) = pid else { return };
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let Some(shared) = weak.upgrade() else { return };
                if !process_alive(pid) {
                    shared.mark_lost(generation, format!("Chromium (pid {pid}) exited"));
                    return;
                }
                if shared.life().generation != generation {
                    return;
                }
            }
        });
        self.shared.life().tasks.extend([pump, watchdog]);
        self.start_fetch_guard().await
    }

    /// Replaces a lost Chromium process with a new one. Sessions of the old one keep
    /// failing with [`Error::BrowserLost`]; nothing else is carried over.
    async fn ensure_running(&self) -> Result<u64> {
        let _one = self.shared.restart.lock().await;
        let (generation, lost, old_tasks, old_dir) = {
            let mut life = self.shared.life();
            match life.lost.clone() {
                None => return Ok(life.generation),
                Some(why) => (
                    life.generation,
                    why,
                    std::mem::take(&mut life.tasks),
                    life.user_data_dir.clone(),
                ),
            }
        };
        for t in old_tasks {
            t.abort();
        }
        let (browser, handler, user_data_dir, pid) = spawn_chromium(&self.shared.opts).await?;
        // Readers still talking to the old process give up within the request timeout.
        let mut old = {
            let mut current = self.shared.browser.write().await;
            std::mem::replace(&mut *current, browser)
        };
        // A hung process is still there: kill (and reap) it.
        let _killed = old.kill().await;
        let _removed = std::fs::remove_dir_all(&old_dir);
        let next = generation + 1;
        {
            let mut life = self.shared.life();
            life.history.insert(generation, lost);
            life.generation = next;
            life.pid = pid;
            life.user_data_dir = user_data_dir;
            life.lost = None;
        }
        self.start(handler, next, pid).await?;
        Ok(next)
    }

    /// After a command timed out: is the browser itself still answering? If not, it is
    /// marked lost (a page stuck in a script loop only hangs its own session).
    async fn probe(&self, generation: u64) -> bool {
        let answer = tokio::time::timeout(Duration::from_secs(3), async {
            self.shared.browser.read().await.version().await
        })
        .await;
        let alive = matches!(answer, Ok(Ok(_)));
        if !alive {
            self.shared
                .mark_lost(generation, "Chromium stopped answering".into());
        }
        alive
    }

    /// Browser-wide request interception: covers every page, popup and context.
    ///
    /// Every request is checked against the block-lists of all sessions. A main-frame
    /// navigation of a session's page is also checked against that session's whole policy
    /// (allow-list, and the private-network rule on the addresses its host resolves to),
    /// and a refused one is cancelled (`Aborted`) rather than failed: Chromium then commits
    /// no error page and the page stays where it was, and the session reports the refusal
    /// in the step ([`Backend::take_refusal`]).
    async fn start_fetch_guard(&self) -> Result<()> {
        let browser = self.shared.browser.read().await;
        let mut created = browser
            .event_listener::<EventTargetCreated>()
            .await
            .map_err(cdp)?;
        let mut destroyed = browser
            .event_listener::<EventTargetDestroyed>()
            .await
            .map_err(cdp)?;
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

    /// Opens an isolated session (own BrowserContext, viewport, DPR, policy).
    ///
    /// The session's policy is widened by what the operator allows
    /// ([`BrowserOptions::allow_origins`], [`BrowserOptions::allow_private_network`]).
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

    fn forget(&self, id: u64) {
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
        let mut target = CreateTargetParams::new("about:blank");
        target.browser_context_id = Some(context.clone());
        let page = browser.new_page(target).await.map_err(cdp)?;
        drop(browser);
        prepare_page(&page, opts.viewport, opts.dpr).await?;
        let net = NetWatch::new(&page).await?;
        let display = opts.display.resolve(opts.viewport);
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

    /// Stops Chromium and removes its profile directory.
    pub async fn close(self) -> Result<()> {
        let _one = self.shared.restart.lock().await;
        let lost = self.shared.life().lost.is_some();
        let mut browser = self.shared.browser.write().await;
        if lost {
            let _killed = browser.kill().await;
        } else {
            let closed = tokio::time::timeout(Duration::from_secs(5), async {
                let _closed = browser.close().await;
                browser.wait().await
            })
            .await;
            if closed.is_err() {
                let _killed = browser.kill().await;
            }
        }
        drop(browser);
        let (tasks, dir) = {
            let mut life = self.shared.life();
            (std::mem::take(&mut life.tasks), life.user_data_dir.clone())
        };
        for t in tasks {
            t.abort();
        }
        let _removed = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}

async fn eval_on(page: Page, expression: String) -> Result<serde_json::Value> {
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

/// The visual viewport's scroll offset as `[x, y]`, read in the page (see `scroll_offset`).
macro_rules! scroll_offset_js {
    () => {
        "(() => { const v = window.visualViewport; \
         return v ? [v.pageLeft, v.pageTop] : [window.scrollX, window.scrollY]; })()"
    };
}

/// One task turn, so work the input queued (timers at 0, promise chains, navigations) has
/// started before we look at the network. No animation-frame wait: `captureScreenshot`
/// produces a fresh frame itself, and waiting for one here as well cost a whole frame
/// (~14 ms in the bench).
///
/// It resolves to the scroll offset as of that turn.
const TASK_TURN_JS: &str = concat!(
    "new Promise(r => setTimeout(() => r(",
    scroll_offset_js!(),
    "), 0))"
);

/// The same reading without waiting for the page's timers: one round trip, which still
/// orders after the input (and after every event the page sent before it).
const PAGE_TURN_JS: &str = scroll_offset_js!();

/// `[x, y]` from the settle turn, if it is a plausible scroll offset (the page could have
/// replaced `visualViewport`; then `getLayoutMetrics` is asked instead).
fn scroll_offset(v: &serde_json::Value) -> Option<(f64, f64)> {
    let a = v.as_array()?;
    let (x, y) = (a.first()?.as_f64()?, a.get(1)?.as_f64()?);
    (a.len() == 2 && x.is_finite() && y.is_finite() && x >= 0.0 && y >= 0.0).then_some((x, y))
}

/// After wheel input the scroll lands on the compositor, not in the page's turn: wait for a
/// drawn frame before capturing (measured: without it the DPR-2 capture showed the old
/// scroll position).
const NEXT_FRAME_JS: &str = "new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))";

/// Fixed viewport and DPR; file choosers intercepted (no dialog; `answer_file_choosers`
/// fills them from the session's upload files or leaves them empty).
async fn prepare_page(page: &Page, viewport: Size, dpr: f64) -> Result<()> {
    page.execute(SetDeviceMetricsOverrideParams::new(
        i64::from(viewport.width),
        i64::from(viewport.height),
        dpr,
        false,
    ))
    .await
    .map_err(cdp)?;
    page.execute(SetInterceptFileChooserDialogParams::new(true))
        .await
        .map_err(cdp)?;
    page.execute(AddScriptToEvaluateOnNewDocumentParams::new(MOTION_JS))
        .await
        .map_err(cdp)?;
    // A popup may have its document already.
    page.execute(EvaluateParams::new(MOTION_JS))
        .await
        .map_err(cdp)?;
    Ok(())
}

/// A stream that is only ever polled through `&mut`, made `Sync` by a mutex that is never
/// contended (`get_mut`), so a session — and every future that borrows it — is `Send`:
/// sessions can run on any worker thread of a multi-threaded runtime.
struct SyncStream<T>(Mutex<futures::stream::BoxStream<'static, T>>);

impl<T> SyncStream<T> {
    fn new(stream: impl futures::Stream<Item = T> + Send + 'static) -> Self {
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

/// Counts requests in flight and whether the main frame is loading, from Network/Page
/// events. Drained synchronously in `settle`, so no event that arrived before a round trip
/// to the page can be missed.
struct NetWatch {
    events: SyncStream<NetEvent>,
    inflight: HashSet<String>,
    loading: bool,
    main_frame: String,
    /// The main frame's URL as of the last drained event (`None` until one arrives), so
    /// reporting `current_url` costs no round trip to the page.
    url: Option<String>,
    /// File choosers opened and not answered yet: (input node, multiple).
    choosers: Vec<(Option<BackendNodeId>, bool)>,
    /// Requests, loads and URL changes seen so far: tells whether the page started work
    /// between two points in time, even work that already finished.
    activity: u64,
    /// The page's screencast frames (only flowing while a capture runs).
    frames: SyncStream<Arc<EventScreencastFrame>>,
}

enum NetEvent {
    Start(String),
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

impl NetWatch {
    async fn new(page: &Page) -> Result<Self> {
        let a = page
            .event_listener::<EventRequestWillBeSent>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::Start(e.request_id.inner().clone()))
            .boxed();
        let b = page
            .event_listener::<EventLoadingFinished>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::End(e.request_id.inner().clone()))
            .boxed();
        let c = page
            .event_listener::<EventLoadingFailed>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::End(e.request_id.inner().clone()))
            .boxed();
        let d = page
            .event_listener::<EventFrameStartedLoading>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::FrameStart(e.frame_id.inner().clone()))
            .boxed();
        let e = page
            .event_listener::<EventFrameStoppedLoading>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::FrameStop(e.frame_id.inner().clone()))
            .boxed();
        let f = page
            .event_listener::<EventFrameNavigated>()
            .await
            .map_err(cdp)?
            .map(|e| {
                let url = format!(
                    "{}{}",
                    e.frame.url,
                    e.frame.url_fragment.as_deref().unwrap_or_default()
                );
                NetEvent::Url(e.frame.id.inner().clone(), url)
            })
            .boxed();
        let g = page
            .event_listener::<EventNavigatedWithinDocument>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::Url(e.frame_id.inner().clone(), e.url.clone()))
            .boxed();
        let h = page
            .event_listener::<EventFileChooserOpened>()
            .await
            .map_err(cdp)?
            .map(|e| NetEvent::FileChooser {
                input: e.backend_node_id,
                multiple: e.mode == FileChooserOpenedMode::SelectMultiple,
            })
            .boxed();
        let frames = page
            .event_listener::<EventScreencastFrame>()
            .await
            .map_err(cdp)?;
        Ok(Self {
            frames: SyncStream::new(frames),
            events: SyncStream::new(futures::stream::select_all([a, b, c, d, e, f, g, h])),
            choosers: Vec::new(),
            inflight: HashSet::new(),
            loading: false,
            main_frame: page.target_id().inner().clone(),
            url: None,
            activity: 0,
        })
    }

    fn apply(&mut self, ev: NetEvent) {
        if matches!(
            ev,
            NetEvent::Start(_)
                | NetEvent::FrameStart(_)
                | NetEvent::Url(..)
                | NetEvent::FileChooser { .. }
        ) {
            self.activity += 1;
        }
        match ev {
            NetEvent::Start(id) => {
                self.inflight.insert(id);
            }
            NetEvent::End(id) => {
                self.inflight.remove(&id);
            }
            NetEvent::FrameStart(f) if f == self.main_frame => {
                self.loading = true;
                // A new document: requests of the old one will never report back.
                self.inflight.clear();
            }
            NetEvent::FrameStop(f) if f == self.main_frame => self.loading = false,
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

    fn drain(&mut self) {
        while let Some(Some(ev)) = self.events.next().now_or_never() {
            self.apply(ev);
        }
    }

    fn quiet(&self) -> bool {
        self.inflight.is_empty() && !self.loading
    }
}

/// Watches the pages of one session's context: forwards new ones (popups, tabs) to the
/// session, and closes those that would exceed [`MAX_OPEN_PAGES`] as soon as they open.
struct PageWarden {
    /// Pages closed for the cap and not reported yet.
    closed: Arc<AtomicUsize>,
    /// Pages of the session open now.
    open: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for PageWarden {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PageWarden {
    async fn start(
        browser: &chromiumoxide::Browser,
        shared: &Arc<Shared>,
        context: chromiumoxide::cdp::browser_protocol::browser::BrowserContextId,
    ) -> Result<(futures::stream::BoxStream<'static, TargetId>, Self)> {
        let mut created = browser
            .event_listener::<EventTargetCreated>()
            .await
            .map_err(cdp)?;
        let mut destroyed = browser
            .event_listener::<EventTargetDestroyed>()
            .await
            .map_err(cdp)?;
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

/// One isolated session: a BrowserContext with one page.
pub struct BrowserSession {
    browser: Browser,
    id: u64,
    context: chromiumoxide::cdp::browser_protocol::browser::BrowserContextId,
    page: Page,
    /// Pages this session left behind when it followed a popup (closed with the session).
    earlier_pages: Vec<Page>,
    /// New pages in this session's context (popups, `target=_blank`).
    popups: SyncStream<TargetId>,
    net: NetWatch,
    scaler: Scaler,
    policy: OriginPolicy,
    viewport: Size,
    dpr: f64,
    settle_cap: Duration,
    /// See [`SessionOptions::screencast`].
    screencast: bool,
    /// When the current step's settling must end (set when it starts).
    settle_deadline: Option<tokio::time::Instant>,
    /// How the current step's settling ended so far.
    settle_end: SettleEnd,
    /// The previous step ended while script motion still ran (see [`AMBIENT_WAIT`]).
    ambient: bool,
    /// Mouse buttons held (CDP `buttons` bitmask).
    buttons: i64,
    /// The last action scrolled or moved the pointer: settle waits for a frame.
    needs_frame: bool,
    /// The scroll offset read while settling, when nothing can have moved it since.
    scroll_hint: Option<(f64, f64)>,
    /// Settling skipped the page's timer turn: the capture runs it alongside and captures
    /// again if the page started work in it (see `settle_inner`).
    deferred_turn: bool,
    /// A popup seen during a capture, for the next settle to follow.
    pending_popup: Option<TargetId>,
    /// The session's SOCKS proxy (every connection goes through it); stops with it.
    proxy: SessionProxy,
    /// Counts the session's pages and closes those over [`MAX_OPEN_PAGES`].
    warden: PageWarden,
    /// What file choosers are answered with (see [`SessionOptions::uploads`]).
    uploads: Vec<PathBuf>,
    /// Notes for the model about this step (see [`Backend::take_notes`]).
    notes: Vec<String>,
    /// The Chromium process this session lives in.
    generation: u64,
    /// Tells when a generation is lost (the newest lost one).
    lost_rx: tokio::sync::watch::Receiver<u64>,
    /// Set once this session's browser is lost: every later call fails with it.
    lost: Option<String>,
    closed: bool,
}

impl std::fmt::Debug for BrowserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrowserSession")
            .field("id", &self.id)
            .field("scaler", &self.scaler)
            .finish_non_exhaustive()
    }
}

fn mouse_button(b: Button) -> (MouseButton, i64) {
    match b {
        Button::Left => (MouseButton::Left, 1),
        Button::Right => (MouseButton::Right, 2),
        Button::Middle => (MouseButton::Middle, 4),
        Button::Back => (MouseButton::Back, 8),
        Button::Forward => (MouseButton::Forward, 16),
        // A button added to the protocol later: the primary button is the safe guess.
        _ => (MouseButton::Left, 1),
    }
}

/// (key, code, windowsVirtualKeyCode, text) for a canonical key.
fn key_def(key: &Key) -> (String, String, i64, Option<String>) {
    let k = key.as_str();
    let named = |code: &str, vk: i64, text: Option<&str>| {
        (k.to_owned(), code.to_owned(), vk, text.map(str::to_owned))
    };
    match k {
        "Enter" => named("Enter", 13, Some("\r")),
        "Tab" => named("Tab", 9, Some("\t")),
        "Escape" => named("Escape", 27, None),
        "Backspace" => named("Backspace", 8, None),
        "Delete" => named("Delete", 46, None),
        "Insert" => named("Insert", 45, None),
        "Home" => named("Home", 36, None),
        "End" => named("End", 35, None),
        "PageUp" => named("PageUp", 33, None),
        "PageDown" => named("PageDown", 34, None),
        "ArrowLeft" => named("ArrowLeft", 37, None),
        "ArrowUp" => named("ArrowUp", 38, None),
        "ArrowRight" => named("ArrowRight", 39, None),
        "ArrowDown" => named("ArrowDown", 40, None),
        "Control" => named("ControlLeft", 17, None),
        "Shift" => named("ShiftLeft", 16, None),
        "Alt" => named("AltLeft", 18, None),
        "Meta" => named("MetaLeft", 91, None),
        "CapsLock" => named("CapsLock", 20, None),
        " " => named("Space", 32, Some(" ")),
        f if f.len() > 1 && f.starts_with('F') && f[1..].parse::<i64>().is_ok() => {
            let n = f[1..].parse::<i64>().unwrap_or(1);
            named(f, 111 + n, None)
        }
        _ => {
            let c = k.chars().next().unwrap_or(' ');
            let (code, vk) = if c.is_ascii_alphabetic() {
                (
                    format!("Key{}", c.to_ascii_uppercase()),
                    i64::from(c.to_ascii_uppercase() as u8),
                )
            } else if c.is_ascii_digit() {
                (format!("Digit{c}"), i64::from(c as u8))
            } else {
                (String::new(), 0)
            };
            (k.to_owned(), code, vk, Some(k.to_owned()))
        }
    }
}

/// Describes the element at (X, Y), descending into same-origin iframes. Never reads the
/// value of a text field (it may be a password).
const DESCRIBE_JS: &str = r#"
(function(el) {
  if (!el) return null;
  const label = el.closest('label');
  if (label && label.control && label.control.type === 'file') el = label.control;
  const t = el.closest('a[href],button,input,select,textarea,[role],[contenteditable=""],[contenteditable="true"]') || el;
  const tag = t.tagName.toLowerCase();
  const type = tag === 'input' ? (t.getAttribute('type') || 'text').toLowerCase() : null;
  const buttonLike = tag === 'input' && ['submit','button','reset','image'].includes(type);
  let text = buttonLike ? (t.value || '') : (t.getAttribute('aria-label') || ((tag === 'input' || tag === 'textarea') ? (t.placeholder || '') : (t.innerText || t.textContent || '')));
  text = text.replace(/\s+/g, ' ').trim().slice(0, 80);
  const link = t.closest('a[href]');
  const editable = t.isContentEditable || tag === 'textarea' || (tag === 'input' && !buttonLike && !['checkbox','radio','file','range','color'].includes(type));
  return { tag, input_type: type, role: t.getAttribute('role'), text,
           name: t.getAttribute('name') || t.id || null, autocomplete: t.getAttribute('autocomplete'),
           href: link ? link.href : null, editable };
})
"#;

impl BrowserSession {
    pub fn page(&self) -> &Page {
        &self.page
    }

    /// How many pages (its own, tabs, popups) the session has open now; never more than
    /// [`MAX_OPEN_PAGES`].
    pub fn open_pages(&self) -> usize {
        self.warden.open.load(Ordering::Relaxed)
    }

    /// Evaluates JavaScript in the page and returns its JSON value.
    pub async fn eval(&self, expression: impl Into<String>) -> Result<serde_json::Value> {
        eval_on(self.page.clone(), expression.into()).await
    }

    async fn describe(&self, finder: &str) -> Result<Option<ElementInfo>> {
        let v = self.eval(format!("({DESCRIBE_JS})({finder})")).await?;
        if v.is_null() {
            return Ok(None);
        }
        serde_json::from_value(v)
            .map(Some)
            .map_err(|e| Error::Browser(format!("element description: {e}")))
    }

    async fn mouse(
        &self,
        kind: DispatchMouseEventType,
        at: CssPoint,
        button: Option<MouseButton>,
        count: Option<i64>,
        modifiers: u8,
    ) -> Result<()> {
        let mut p = DispatchMouseEventParams::new(kind, at.x, at.y);
        p.button = button;
        p.buttons = Some(self.buttons);
        p.click_count = count;
        p.modifiers = Some(i64::from(modifiers));
        self.page.execute(p).await.map_err(cdp)?;
        Ok(())
    }

    async fn key(&self, kind: DispatchKeyEventType, key: &Key, modifiers: u8) -> Result<()> {
        let (name, code, vk, text) = key_def(key);
        // Text only when no command modifier is held, so Ctrl+A selects instead of typing.
        let text = text.filter(|_| modifiers & !crate::ops::modifier::SHIFT == 0);
        let kind = match (kind, &text) {
            (DispatchKeyEventType::KeyDown, None) => DispatchKeyEventType::RawKeyDown,
            (k, _) => k,
        };
        let mut p = DispatchKeyEventParams::new(kind.clone());
        p.key = Some(name);
        if !code.is_empty() {
            p.code = Some(code);
        }
        p.windows_virtual_key_code = Some(vk);
        p.native_virtual_key_code = Some(vk);
        p.modifiers = Some(i64::from(modifiers));
        if kind != DispatchKeyEventType::KeyUp {
            p.unmodified_text.clone_from(&text);
            p.text = text;
        }
        self.page.execute(p).await.map_err(cdp)?;
        Ok(())
    }

    /// Makes the newest popup the session's page, as a person would see the new tab. The
    /// opener is hidden from then on (Chromium stops drawing it), so staying on it would
    /// leave the model with a stale or missing screenshot.
    async fn follow(&mut self, target: TargetId, deadline: tokio::time::Instant) -> Result<()> {
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
            prepare_page(&page, self.viewport, self.dpr).await?;
            NetWatch::new(&page).await
        };
        self.net = match ready.await {
            Ok(net) => net,
            // Closed under us: its first document was refused.
            Err(_) if self.popup_refused(&target) => return Ok(()),
            Err(e) => return Err(e),
        };
        // The popup may already be loading; treat it as such until it reports stopping.
        self.net.loading = true;
        let old = std::mem::replace(&mut self.page, page);
        self.earlier_pages.push(old);
        Ok(())
    }

    /// Goes back to the opener when the page followed is a popup the request guard closed
    /// (its first document was refused). Returns whether it did.
    async fn leave_refused_popup(&mut self) -> Result<bool> {
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

impl BrowserSession {
    async fn element_at_inner(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.describe(&format!(
            "(() => {{ let x = {}, y = {}, el = document.elementFromPoint(x, y);
               while (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {{
                 let d = null; try {{ d = el.contentDocument; }} catch (e) {{}}
                 if (!d) break;
                 const r = el.getBoundingClientRect();
                 x -= r.left + el.clientLeft; y -= r.top + el.clientTop;
                 const n = d.elementFromPoint(x, y); if (!n) break; el = n;
               }}
               return el; }})()",
            at.x, at.y
        ))
        .await
    }

    async fn focused_element_inner(&mut self) -> Result<Option<ElementInfo>> {
        self.describe(
            "(() => { let el = document.activeElement;
               while (el && (el.tagName === 'IFRAME' || el.tagName === 'FRAME')) {
                 let d = null; try { d = el.contentDocument; } catch (e) {}
                 if (!d || !d.activeElement) break; el = d.activeElement;
               }
               return el === document.body ? null : el; })()",
        )
        .await
    }

    async fn current_url_inner(&mut self) -> Result<String> {
        // Tracked from `Page.frameNavigated` / `navigatedWithinDocument`: every event sent
        // before the reply to our last command is in the stream already, so this is as
        // fresh as asking the page, without the round trip.
        self.net.drain();
        if let Some(url) = &self.net.url {
            return Ok(url.clone());
        }
        let url = match self.eval("location.href").await {
            Ok(serde_json::Value::String(s)) => s,
            _ => self.page.url().await.map_err(cdp)?.unwrap_or_default(),
        };
        self.net.url = Some(url.clone());
        Ok(url)
    }

    async fn run_inner(&mut self, op: &Op) -> Result<()> {
        self.needs_frame |= matches!(op, Op::Wheel { .. } | Op::Move { .. } | Op::History { .. });
        match op {
            Op::Move { to, pressed } => {
                let b = pressed.map(|b| mouse_button(b).0);
                self.mouse(DispatchMouseEventType::MouseMoved, *to, b, None, 0)
                    .await
            }
            Op::Down {
                at,
                button,
                count,
                modifiers,
            } => {
                let (b, bit) = mouse_button(*button);
                self.buttons |= bit;
                self.mouse(
                    DispatchMouseEventType::MousePressed,
                    *at,
                    Some(b),
                    Some(i64::from(*count)),
                    *modifiers,
                )
                .await
            }
            Op::Up {
                at,
                button,
                count,
                modifiers,
            } => {
                let (b, bit) = mouse_button(*button);
                self.buttons &= !bit;
                self.mouse(
                    DispatchMouseEventType::MouseReleased,
                    *at,
                    Some(b),
                    Some(i64::from(*count)),
                    *modifiers,
                )
                .await
            }
            Op::Wheel {
                at,
                dx,
                dy,
                modifiers,
            } => {
                let mut p =
                    DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, at.x, at.y);
                p.delta_x = Some(*dx);
                p.delta_y = Some(*dy);
                p.modifiers = Some(i64::from(*modifiers));
                self.page.execute(p).await.map_err(cdp)?;
                Ok(())
            }
            Op::KeyDown { key, modifiers } => {
                self.key(DispatchKeyEventType::KeyDown, key, *modifiers)
                    .await
            }
            Op::KeyUp { key, modifiers } => {
                // The released modifier is no longer held for its own keyup.
                let m = *modifiers & !modifier_bit(key);
                self.key(DispatchKeyEventType::KeyUp, key, m).await
            }
            Op::Text { text } => {
                self.page
                    .execute(InsertTextParams::new(text.clone()))
                    .await
                    .map_err(cdp)?;
                Ok(())
            }
            Op::Navigate { url } => {
                // chromiumoxide holds `Page.navigate` until the load completes, which never
                // happens for a download and takes a request timeout for some failures.
                // Run it aside and return once the navigation is under way; `settle` then
                // waits for the load like for any other action. A failed navigation shows
                // Chromium's error page, which the model sees; it is not a session fault.
                let page = self.page.clone();
                let shared = Arc::clone(&self.browser.shared);
                let id = self.id;
                locked(&shared.navigating).insert(id);
                let mut nav = tokio::spawn({
                    let url = url.clone();
                    async move {
                        let done = page.execute(NavigateParams::new(url)).await.map(|_| ());
                        locked(&shared.navigating).remove(&id);
                        done
                    }
                });
                let deadline = tokio::time::Instant::now() + self.settle_cap;
                loop {
                    tokio::select! {
                        _ = &mut nav => break,
                        ev = self.net.events.next() => match ev {
                            Some(ev) => {
                                let started = matches!(&ev, NetEvent::FrameStart(f) if *f == self.net.main_frame);
                                self.net.apply(ev);
                                if started {
                                    break;
                                }
                            }
                            None => return Err(Error::SessionClosed("page event stream ended".into())),
                        },
                        () = tokio::time::sleep_until(deadline) => break,
                    }
                }
                Ok(())
            }
            Op::History { delta } => {
                let h = self
                    .page
                    .execute(GetNavigationHistoryParams::default())
                    .await
                    .map_err(cdp)?;
                let idx = h.result.current_index + i64::from(*delta);
                if let Some(entry) = usize::try_from(idx)
                    .ok()
                    .and_then(|i| h.result.entries.get(i))
                {
                    self.page
                        .execute(NavigateToHistoryEntryParams::new(entry.id))
                        .await
                        .map_err(cdp)?;
                }
                Ok(())
            }
            Op::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                Ok(())
            }
        }
    }

    /// Waits until the page has reacted to the input and its network is quiet.
    ///
    /// With `defer_timers`, the page's timer turn (work queued at 0 ms, a navigation started
    /// from a timer) is not awaited here but run alongside the capture, which then captures
    /// again if the page started work in it: awaiting it first aligned the capture with the
    /// frame after next and cost a whole frame (~15 ms in the bench), while such work nearly
    /// always lands before the frame the capture waits for anyway.
    async fn settle_inner(&mut self, defer_timers: bool) -> Result<bool> {
        self.settle_deadline = Some(tokio::time::Instant::now() + self.settle_cap);
        let settled = self.settle_once(defer_timers).await?;
        self.settle_end = if settled {
            SettleEnd::Quiet
        } else {
            SettleEnd::Timeout
        };
        if self.leave_error_page().await? {
            return self.settle_once(false).await;
        }
        Ok(settled)
    }

    /// After the guard refused a redirect of the session's own navigation, the page shows
    /// Chromium's error page: go back to the entry before it. Returns whether it did.
    async fn leave_error_page(&mut self) -> Result<bool> {
        let error_page = locked(&self.browser.shared.refused)
            .get_mut(&self.id)
            .and_then(|l| l.iter_mut().find(|r| r.error_page))
            .map(|r| r.error_page = false)
            .is_some();
        if !error_page {
            return Ok(false);
        }
        let h = self
            .page
            .execute(GetNavigationHistoryParams::default())
            .await
            .map_err(cdp)?;
        let Some(entry) = usize::try_from(h.result.current_index - 1)
            .ok()
            .and_then(|i| h.result.entries.get(i))
        else {
            return Ok(false);
        };
        self.page
            .execute(NavigateToHistoryEntryParams::new(entry.id))
            .await
            .map_err(cdp)?;
        self.needs_frame = true;
        Ok(true)
    }

    async fn settle_once(&mut self, defer_timers: bool) -> Result<bool> {
        let deadline = self
            .settle_deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + self.settle_cap);
        self.scroll_hint = None;
        self.deferred_turn = false;
        let mut scroll = None;
        // 1. Let the page react to the input: one animation frame plus a task turn. Errors
        //    mean the document is being replaced, which the network wait below covers.
        //    A popup hides this page (no more frames), so watch for one meanwhile.
        let mut popup = self.pending_popup.take();
        while let Some(Some(t)) = self.popups.next().now_or_never() {
            popup = Some(t);
        }
        if popup.is_none() {
            let framed = std::mem::take(&mut self.needs_frame);
            self.deferred_turn = defer_timers && !framed;
            let js = if framed {
                NEXT_FRAME_JS
            } else if self.deferred_turn {
                PAGE_TURN_JS
            } else {
                TASK_TURN_JS
            };
            let turn = eval_on(self.page.clone(), js.into());
            tokio::select! {
                r = tokio::time::timeout_at(deadline, turn) => {
                    // The scroll offset read in the same turn saves `getLayoutMetrics` at
                    // capture, unless the compositor may still move it (wheel, history).
                    if !framed && let Ok(Ok(v)) = r {
                        scroll = scroll_offset(&v);
                    }
                }
                Some(t) = self.popups.next() => popup = Some(t),
            }
            while let Some(Some(t)) = self.popups.next().now_or_never() {
                popup = Some(t);
            }
        }
        if let Some(target) = popup {
            scroll = None;
            self.deferred_turn = false;
            self.follow(target, deadline).await?;
            let turn = eval_on(self.page.clone(), TASK_TURN_JS.into());
            let _turn = tokio::time::timeout_at(deadline, turn).await;
        }
        // 2. Wait for the network to go quiet and the main frame to finish loading.
        self.net.drain();
        self.answer_file_choosers().await?;
        if self.net.quiet() {
            // Nothing happened after the page's turn: its scroll offset is still current.
            self.scroll_hint = scroll;
        }
        let waited = !self.net.quiet();
        while !self.net.quiet() {
            // Wakes now and then to notice a popup the request guard closed.
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(50));
            match tokio::time::timeout_at(wake, self.net.events.next()).await {
                Ok(Some(ev)) => {
                    self.net.apply(ev);
                    self.net.drain();
                }
                Ok(None) if self.leave_refused_popup().await? => {}
                Ok(None) => return Err(Error::SessionClosed("page event stream ended".into())),
                Err(_) if self.leave_refused_popup().await? => {}
                Err(_) if tokio::time::Instant::now() < deadline => {}
                Err(_) => {
                    // Cap reached (long poll, streaming, endless loading): capture anyway.
                    self.net.inflight.clear();
                    self.net.loading = false;
                    self.deferred_turn = false;
                    return Ok(false);
                }
            }
        }
        if waited {
            // What the page does with a response (a promise chain that paints it) runs
            // after the response has arrived: give it a turn and a drawn frame, bounded (a
            // hidden page draws none).
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(100));
            let turn = eval_on(self.page.clone(), NEXT_FRAME_JS.into());
            let _turn = tokio::time::timeout_at(wake, turn).await;
            self.net.drain();
        }
        Ok(true)
    }

    /// Captures once the screen is stable: after the capture, asks the page whether its
    /// DOM changed since the capture was requested or a finite animation still runs; if
    /// so, waits until nothing has changed for [`STABLE_QUIET_MS`] and no finite
    /// animation runs (up to the settle deadline) and captures again.
    async fn capture_inner(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<EncodedImage> {
        let deadline = self
            .settle_deadline
            .take()
            .unwrap_or_else(|| tokio::time::Instant::now() + self.settle_cap);
        // Script motion that outlasted the previous step is the page's own (a ticker, a
        // clock): waited for briefly, not up to the timeout on every step.
        let script_deadline = if self.ambient {
            deadline.min(tokio::time::Instant::now() + AMBIENT_WAIT)
        } else {
            deadline
        };
        self.ambient = false;
        let mut requested = tokio::time::Instant::now();
        let mut image = self.capture_after_settle(plan, format).await?;
        loop {
            let Some((since, _, wait)) = self.motion().await else {
                return Ok(image);
            };
            // A change within the capture's own time may postdate its frame.
            let elapsed = requested.elapsed().as_secs_f64() * 1000.0;
            if since + 2.0 >= elapsed && wait <= 0.0 {
                return Ok(image);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline || (now >= script_deadline && wait <= 0.0) {
                self.settle_end = if now >= deadline {
                    SettleEnd::Timeout
                } else {
                    SettleEnd::Moving
                };
                self.ambient = true;
                return Ok(image);
            }
            let (mut since, mut wait) = (since, wait);
            while since < STABLE_QUIET_MS || wait > 0.0 {
                let until_ = if wait > 0.0 {
                    deadline
                } else {
                    script_deadline
                };
                // An animation's last frame is drawn after its end time: one frame more.
                let pause = (wait + 17.0)
                    .max(STABLE_QUIET_MS - since)
                    .clamp(5.0, 1000.0);
                let until = tokio::time::Instant::now() + Duration::from_secs_f64(pause / 1000.0);
                tokio::time::sleep_until(until.min(until_)).await;
                if tokio::time::Instant::now() >= until_ {
                    break;
                }
                match self.motion().await {
                    Some((s, _, w)) => (since, wait) = (s, w),
                    None => break,
                }
            }
            let now = tokio::time::Instant::now();
            self.settle_end = if now >= deadline {
                SettleEnd::Timeout
            } else if now >= script_deadline && since < STABLE_QUIET_MS {
                SettleEnd::Moving
            } else {
                SettleEnd::Stable
            };
            requested = tokio::time::Instant::now();
            image = self.capture_once(plan, format).await?.0;
            if matches!(self.settle_end, SettleEnd::Timeout | SettleEnd::Moving) {
                self.ambient = true;
                return Ok(image);
            }
        }
    }

    /// The page's motion reading (see [`MOTION_JS`]); `None` where there is none (no
    /// document of ours, an error page, a script that broke it).
    async fn motion(&mut self) -> Option<(f64, f64, f64)> {
        let v = eval_on(
            self.page.clone(),
            "window.__cordonMotion ? window.__cordonMotion() : null".into(),
        )
        .await
        .ok()?;
        let a = v.as_array()?;
        let (since, n, wait) = (
            a.first()?.as_f64()?,
            a.get(1)?.as_f64()?,
            a.get(2)?.as_f64()?,
        );
        (since.is_finite() && wait.is_finite()).then_some((since, n, wait))
    }

    async fn capture_after_settle(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<EncodedImage> {
        if self.leave_refused_popup().await? {
            self.deferred_turn = false;
            self.scroll_hint = None;
        }
        if !std::mem::take(&mut self.deferred_turn) {
            return Ok(self.capture_once(plan, format).await?.0);
        }
        // The timer turn settling deferred, alongside the capture (see `settle_inner`).
        let deadline = tokio::time::Instant::now() + self.settle_cap;
        let before = self.net.activity;
        let turn =
            tokio::time::timeout_at(deadline, eval_on(self.page.clone(), TASK_TURN_JS.into()));
        let (shot, turn) = tokio::join!(self.capture_once(plan, format), turn);
        self.net.drain();
        if let Some(Some(t)) = self.popups.next().now_or_never() {
            self.pending_popup = Some(t);
        }
        if let Ok((image, clipped_at)) = shot
            && self.net.activity == before
            && self.pending_popup.is_none()
            && let Ok(Ok(offset)) = &turn
            && scroll_offset(offset) == Some(clipped_at)
        {
            return Ok(image);
        }
        // The page started loading or fetching, opened a popup or scrolled after the input:
        // the shot may predate the result. Settle fully and capture what the page became.
        self.settle_inner(false).await?;
        Ok(self.capture_once(plan, format).await?.0)
    }

    /// Answers the file choosers the page opened: with the session's upload files, or not
    /// at all (the input stays empty). Either way the model is told in the step's text.
    async fn answer_file_choosers(&mut self) -> Result<()> {
        for (input, multiple) in std::mem::take(&mut self.net.choosers) {
            let Some(input) = input.filter(|_| !self.uploads.is_empty()) else {
                self.notes.push(if self.uploads.is_empty() {
                    "A file chooser opened and was refused: this session allows no uploads."
                        .to_owned()
                } else {
                    "A file chooser opened without a file input to fill; nothing was uploaded."
                        .to_owned()
                });
                continue;
            };
            let count = if multiple { self.uploads.len() } else { 1 };
            let chosen = &self.uploads[..count];
            let mut params = SetFileInputFilesParams::new(
                chosen.iter().map(|p| p.display().to_string()).collect(),
            );
            params.backend_node_id = Some(input);
            self.page.execute(params).await.map_err(cdp)?;
            let names: Vec<String> = chosen
                .iter()
                .map(|p| {
                    p.file_name().map_or_else(
                        || p.display().to_string(),
                        |n| n.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            self.notes.push(format!(
                "A file chooser opened and was given: {}.",
                names.join(", ")
            ));
        }
        Ok(())
    }

    /// One capture; also returns the scroll offset the clip was placed at.
    async fn capture_once(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<(EncodedImage, (f64, f64))> {
        // Chromium renders the clip at the planned scale, so the model's size arrives
        // without a resize here. That costs about a frame (~15 ms): Chromium re-renders the
        // page at the new scale. Capturing at scale 1 and resizing here (decode + SIMD
        // resize + encode) was measured too, and was slower on 2 loaded cores.
        //
        if self.screencast_fits(plan)
            && let Some((data, at)) = self.screencast_frame(plan, format).await?
        {
            self.scroll_hint = None;
            return Ok((fit(data, format, plan.out, format)?, at));
        }
        // The clip is in document coordinates, so add the scroll offset, read now because
        // wheel scrolling lands on the compositor after the page's own turn (measured: an
        // offset read while settling was stale at DPR 2).
        let (page_x, page_y) = match self.scroll_hint.take() {
            Some(offset) => offset,
            None => {
                let m = self
                    .page
                    .execute(GetLayoutMetricsParams::default())
                    .await
                    .map_err(cdp)?;
                (
                    m.result.css_visual_viewport.page_x,
                    m.result.css_visual_viewport.page_y,
                )
            }
        };
        let clip = Viewport {
            x: plan.clip.x + page_x,
            y: plan.clip.y + page_y,
            width: plan.clip.width,
            height: plan.clip.height,
            scale: plan.scale,
        };
        let data = self.screenshot(format, clip).await?;
        Ok((fit(data, format, plan.out, format)?, (page_x, page_y)))
    }

    /// Whether `plan` is the whole viewport shown at the model's size, which the
    /// screencast delivers directly.
    fn screencast_fits(&self, plan: &CapturePlan) -> bool {
        self.screencast
            && plan.clip.x == 0.0
            && plan.clip.y == 0.0
            && plan.clip.width == f64::from(self.viewport.width)
            && plan.clip.height == f64::from(self.viewport.height)
            && plan.out.width <= self.viewport.width
            && plan.out.height <= self.viewport.height
    }

    /// The whole viewport at the model's size from a screencast started now and stopped
    /// after its first frame: the compositor scales the frame (`maxWidth`/`maxHeight`)
    /// and draws it for the screencast, so no re-render at another scale is needed (that
    /// costs `clip.scale` a frame). The first frame is drawn after the start, so after
    /// the input (checked: 0 stale frames in 300 steps at DPR 1 and 2). Also returns the
    /// scroll offset the frame was drawn at. `None`: no frame came in time (the caller
    /// falls back to `Page.captureScreenshot`).
    async fn screencast_frame(
        &mut self,
        plan: &CapturePlan,
        format: ImageFormat,
    ) -> Result<Option<(Vec<u8>, (f64, f64))>> {
        // Frames of an earlier capture that came after its stop.
        while let Some(Some(_)) = self.net.frames.next().now_or_never() {}
        let (cast_format, quality) = match format {
            ImageFormat::Png => (StartScreencastFormat::Png, None),
            ImageFormat::Jpeg { quality } => {
                (StartScreencastFormat::Jpeg, Some(i64::from(quality)))
            }
        };
        self.page
            .execute(StartScreencastParams {
                format: Some(cast_format),
                quality,
                max_width: Some(i64::from(plan.out.width)),
                max_height: Some(i64::from(plan.out.height)),
                every_nth_frame: Some(1),
            })
            .await
            .map_err(cdp)?;
        let frame = tokio::time::timeout(SCREENCAST_WAIT, self.net.frames.next()).await;
        let Ok(Some(frame)) = frame else {
            self.page
                .execute(StopScreencastParams::default())
                .await
                .map_err(cdp)?;
            return Ok(None);
        };
        // The stop and the frame's acknowledgement travel together: one round trip to the
        // browser instead of two, on every step. The stop must reach the browser first (an
        // ack before it could let another frame be drawn for this screencast): `join` polls
        // its first future first, and a command is queued on its first poll.
        let (stopped, _acked) = futures::future::join(
            self.page.execute(StopScreencastParams::default()),
            self.page
                .execute(ScreencastFrameAckParams::new(frame.session_id)),
        )
        .await;
        stopped.map_err(cdp)?;
        let b64: &str = frame.data.as_ref();
        let data = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Error::Browser(format!("screencast frame: {e}")))?;
        let m = &frame.metadata;
        Ok(Some((data, (m.scroll_offset_x, m.scroll_offset_y))))
    }

    /// `Page.captureScreenshot` of `clip`, decoded from base64.
    async fn screenshot(&mut self, format: ImageFormat, clip: Viewport) -> Result<Vec<u8>> {
        let (cdp_format, quality) = match format {
            ImageFormat::Png => (CaptureScreenshotFormat::Png, None),
            ImageFormat::Jpeg { quality } => {
                (CaptureScreenshotFormat::Jpeg, Some(i64::from(quality)))
            }
        };
        let params = CaptureScreenshotParams {
            format: Some(cdp_format),
            quality,
            clip: Some(clip),
            from_surface: Some(true),
            capture_beyond_viewport: Some(false),
            optimize_for_speed: Some(true),
        };
        let shot = self.page.execute(params).await.map_err(cdp)?;
        let b64: &str = shot.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| Error::Browser(format!("screenshot data: {e}")))
    }
}

impl Backend for BrowserSession {
    fn name(&self) -> &'static str {
        "browser"
    }

    fn settle_end(&self) -> Option<SettleEnd> {
        Some(self.settle_end)
    }

    fn take_refusal(&mut self) -> Option<ActionError> {
        let refused = locked(&self.browser.shared.refused).remove(&self.id)?;
        let first = refused.into_iter().next()?;
        Some(ActionError::Blocked {
            url: first.url,
            reason: first.reason,
        })
    }

    fn take_notes(&mut self) -> Vec<String> {
        let mut notes = std::mem::take(&mut self.notes);
        notes.extend(self.proxy.take_refusals());
        let closed = self.warden.closed.swap(0, Ordering::Relaxed);
        if closed > 0 {
            notes.push(format!(
                "The page tried to open more windows than a session may have open at once \
                 ({MAX_OPEN_PAGES}); Cordon closed {closed} of them."
            ));
        }
        notes
    }

    fn scaler(&self) -> Scaler {
        self.scaler
    }

    fn policy(&self) -> &OriginPolicy {
        &self.policy
    }

    async fn element_at(&mut self, at: CssPoint) -> Result<Option<ElementInfo>> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.element_at_inner(at)).await;
        self.vet(r).await
    }

    async fn focused_element(&mut self) -> Result<Option<ElementInfo>> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.focused_element_inner()).await;
        self.vet(r).await
    }

    async fn current_url(&mut self) -> Result<String> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.current_url_inner()).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }

    async fn run(&mut self, op: &Op) -> Result<()> {
        self.guard()?;
        let mut lost = self.lost_rx.clone();
        let r = watch_lost(&mut lost, self.generation, self.run_inner(op)).await;
        self.vet(r).await
    }

    async fn settle(&mut self) -> Result<bool> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.settle_inner(true)).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }

    async fn capture(&mut self, plan: &CapturePlan, format: ImageFormat) -> Result<EncodedImage> {
        self.guard()?;
        let mut swaps = 0;
        loop {
            let mut lost = self.lost_rx.clone();
            let r = watch_lost(&mut lost, self.generation, self.capture_inner(plan, format)).await;
            if !frame_swapping(&r, &mut swaps).await {
                return self.vet(r).await;
            }
        }
    }
}

/// What Chromium answers a command sent to a page while its main frame is being swapped
/// (an error page committing for a refused redirect, then the session going back from it):
/// a moment later the page answers again. Seen under load: a step whose navigation was
/// refused failed with it instead of reporting the refusal.
const FRAME_SWAP_ERROR: &str = "Not attached to an active page";
/// Times an idempotent command (settling, capturing, reading the URL) is sent again after
/// [`FRAME_SWAP_ERROR`], and the pause before each.
const FRAME_SWAP_RETRIES: u32 = 5;
const FRAME_SWAP_PAUSE: Duration = Duration::from_millis(40);

/// Whether `r` failed only because the page's frame was being swapped and the command is
/// worth sending again: then, after a pause, counting the attempt in `swaps`.
async fn frame_swapping<T>(r: &Result<T>, swaps: &mut u32) -> bool {
    let swapping = matches!(r, Err(Error::Browser(message)) if message.contains(FRAME_SWAP_ERROR));
    if !swapping || *swaps >= FRAME_SWAP_RETRIES {
        return false;
    }
    *swaps += 1;
    tokio::time::sleep(FRAME_SWAP_PAUSE).await;
    true
}

/// Runs `op` unless generation `generation` is lost first (then it is dropped: a dead
/// process would otherwise hold it until the request timeout).
async fn watch_lost<T>(
    lost: &mut tokio::sync::watch::Receiver<u64>,
    generation: u64,
    op: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::select! {
        r = op => r,
        _ = lost.wait_for(|g| *g >= generation) => Err(Error::BrowserLost {
            reason: "Chromium went away during the step".into(),
        }),
    }
}

impl BrowserSession {
    /// Fails at once when this session's browser is already known to be lost.
    fn guard(&mut self) -> Result<()> {
        if self.lost.is_none() {
            self.lost = self.browser.shared.lost_reason(self.generation);
        }
        match &self.lost {
            Some(reason) => Err(Error::BrowserLost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Turns a failure caused by a lost browser into [`Error::BrowserLost`]. A timed-out
    /// command asks the browser whether it still answers; if not, it is lost.
    async fn vet<T>(&mut self, r: Result<T>) -> Result<T> {
        let e = match r {
            Ok(v) => return Ok(v),
            Err(e @ Error::Action(_)) => return Err(e),
            Err(e) => e,
        };
        let timed_out = matches!(&e, Error::Browser(m) if m.contains("timed out"));
        if timed_out && self.browser.shared.lost_reason(self.generation).is_none() {
            // Marks the generation lost if the browser itself no longer answers.
            let _alive = self.browser.probe(self.generation).await;
        }
        match self.browser.shared.lost_reason(self.generation) {
            Some(reason) => {
                self.lost = Some(reason.clone());
                Err(Error::BrowserLost { reason })
            }
            None => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_frame_swap_is_retried_and_only_a_few_times() {
        let swapped: Result<()> = Err(Error::Browser(
            "Error -32000: Not attached to an active page".into(),
        ));
        let mut swaps = 0;
        for _ in 0..FRAME_SWAP_RETRIES {
            assert!(frame_swapping(&swapped, &mut swaps).await);
        }
        assert!(
            !frame_swapping(&swapped, &mut swaps).await,
            "retries are bounded"
        );
        let mut swaps = 0;
        let other: Result<()> = Err(Error::Browser("Error -32000: Cannot navigate".into()));
        assert!(!frame_swapping(&other, &mut swaps).await);
        assert!(!frame_swapping(&Ok(()), &mut swaps).await);
        assert_eq!(swaps, 0);
    }
}
