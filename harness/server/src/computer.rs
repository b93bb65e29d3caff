//! Computer-use sessions for both servers: one Chromium per server, started on first use
//! and shared by every session (each gets its own BrowserContext), sessions set up from a
//! [`CreateComputer`] body, and model calls decoded from any vendor's shape.
//!
//! Every job on a session (open, step, decide, close) is a task of its own on the server's
//! multi-threaded runtime, so sessions step on every core; a session's own jobs are
//! serialized by its lock. A job runs to its end even if its caller stops waiting (an
//! HTTP client that hangs up mid-step): a step is never cut in half.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine as _;
use cordon_computer::browser::{Browser, BrowserOptions, BrowserSession, SessionOptions};
use cordon_computer::display::{DisplaySpec, Preset, Size};
use cordon_computer::gate::Rules;
use cordon_computer::image::ImageFormat;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_computer::trajectory::{self, TrajectoryWriter};
use cordon_computer::{
    ActionError, Backend as _, Computer, EngineOptions, Error, Status, StepReport,
};
use cordon_protocol::computer::{Action, ComputerCall, Vendor, decode};
use serde_json::{Value, json};

use crate::api::{
    ComputerApproval, ComputerStep, CreateComputer, ScreenshotBody, ScreenshotRef, SizeBody,
    StepStatus, TrajectoryStep,
};
use cordon_core::clock::now_ms;
use cordon_core::ids::fresh_id;

/// Idle time after which a computer session is closed, unless its creator says otherwise.
pub const DEFAULT_COMPUTER_TTL: Duration = Duration::from_secs(900);
/// Longest idle time a computer session may ask for.
pub const MAX_COMPUTER_TTL: Duration = Duration::from_secs(24 * 3600);

/// Why a computer request could not be served. Model-visible problems with an action are
/// not errors: they are steps with status `error` or `denied`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ComputerError {
    /// The request describes a session that cannot be set up.
    #[error("{0}")]
    Invalid(String),
    /// The start URL is refused by the session's own origin policy.
    #[error("{0}")]
    Blocked(String),
    /// Chromium is missing or would not start.
    #[error("{0}")]
    Unavailable(String),
    /// The session's browser went away; the session is over.
    #[error("{0}")]
    Lost(String),
    /// A browser command failed; the session may still work.
    #[error("{0}")]
    Browser(String),
    /// Recording the trajectory failed.
    #[error("{0}")]
    Trajectory(String),
    /// A step waits for a decision on this approval first.
    #[error(
        "step waits for approval {0}: decide it first (POST /v1/approvals/{0}), then send more actions"
    )]
    Pending(String),
    /// No such approval is pending on this session (decided a moment ago, or never).
    #[error("approval {0} is not pending on this computer")]
    NoSuchApproval(String),
    /// The session was closed.
    #[error("{0}")]
    Closed(String),
}

impl ComputerError {
    fn from_step(error: Error) -> ComputerError {
        match error {
            Error::BrowserLost { .. } | Error::SessionClosed(_) => {
                ComputerError::Lost(error.to_string())
            }
            Error::Trajectory { .. } => ComputerError::Trajectory(error.to_string()),
            Error::Action(ActionError::NoSuchApproval(id)) => ComputerError::NoSuchApproval(id),
            Error::Action(ActionError::Blocked { .. }) => ComputerError::Blocked(error.to_string()),
            Error::Action(action) => ComputerError::Invalid(action.to_string()),
            other => ComputerError::Browser(other.to_string()),
        }
    }

    fn from_launch(error: Error) -> ComputerError {
        match error {
            Error::BrowserMissing { .. } => ComputerError::Unavailable(format!(
                "computer use needs Chromium, and it is not installed: {error} (the server \
                 takes --chromium PATH or CORDON_CHROMIUM; sandboxes work without it)"
            )),
            other => ComputerError::Unavailable(format!("Chromium did not start: {other}")),
        }
    }
}

/// A session's set-up, checked: what [`CreateComputer`] asks for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Setup {
    /// Start page.
    pub url: String,
    /// CSS pixels.
    pub viewport: Size,
    /// Device pixel ratio (1 or 2).
    pub dpr: f64,
    /// How the model display is chosen.
    pub display: DisplaySpec,
    /// What the session may reach.
    pub policy: OriginPolicy,
    /// Approval rules.
    pub rules: Rules,
    /// Screenshot encoding.
    pub image_format: ImageFormat,
    /// Idle time before the session is closed.
    pub ttl: Duration,
    /// The longest a step waits for the page to settle.
    pub settle_timeout: Duration,
}

fn size_arg(value: &Value, field: &str) -> Result<Size, String> {
    let size = match value {
        Value::String(text) => Size::parse(text),
        Value::Object(_) => serde_json::from_value::<SizeBody>(value.clone())
            .ok()
            .filter(|s| s.width > 0 && s.height > 0)
            .map(|s| Size::new(s.width, s.height)),
        _ => None,
    };
    size.ok_or_else(|| {
        format!("`{field}` must be \"WxH\" or {{\"width\", \"height\"}} (positive), not {value}")
    })
}

fn patterns(list: &[String], field: &str) -> Result<Vec<OriginPattern>, String> {
    list.iter()
        .map(|raw| OriginPattern::parse(raw).map_err(|error| format!("`{field}`: {error}")))
        .collect()
}

impl Setup {
    /// Checks a [`CreateComputer`] body. `Err` says what is wrong with it.
    pub fn parse(body: &CreateComputer) -> Result<Setup, ComputerError> {
        let invalid = ComputerError::Invalid;
        let viewport = match &body.viewport {
            None | Some(Value::Null) => Size::new(1280, 800),
            Some(value) => size_arg(value, "viewport").map_err(invalid)?,
        };
        if viewport.width > 3840 || viewport.height > 2160 {
            return Err(invalid(format!(
                "`viewport` {viewport} is larger than 3840x2160"
            )));
        }
        let dpr = body.dpr.unwrap_or(1.0);
        if dpr != 1.0 && dpr != 2.0 {
            return Err(invalid(format!("`dpr` must be 1 or 2, not {dpr}")));
        }
        let display = match &body.display {
            None | Some(Value::Null) => DisplaySpec::DEFAULT_BUDGET,
            Some(Value::String(name)) if name.eq_ignore_ascii_case("budget") => {
                DisplaySpec::DEFAULT_BUDGET
            }
            Some(Value::String(name)) if Preset::parse(name).is_some() => DisplaySpec::Preset {
                preset: Preset::parse(name).unwrap_or(Preset::Xga),
            },
            Some(value) => DisplaySpec::Fixed {
                size: size_arg(value, "display").map_err(|_| {
                    invalid(format!(
                        "`display` must be \"WxH\", {{\"width\", \"height\"}}, xga, wxga, fwxga \
                         or budget, not {value}"
                    ))
                })?,
            },
        };
        let shown = display.resolve(viewport);
        if shown.width > 4096 || shown.height > 4096 {
            return Err(invalid(format!(
                "`display` {shown} is larger than 4096x4096"
            )));
        }
        let policy = OriginPolicy::new(
            patterns(&body.allow_origins, "allow_origins").map_err(invalid)?,
            patterns(&body.block_origins, "block_origins").map_err(invalid)?,
        );
        // Schemes and the lists are checked here; the private-network rule, which the
        // operator may widen (`--allow-origin`, `--allow-private-network`), when the
        // session opens, on the addresses the name resolves to.
        let lists = policy.clone().with_operator(&[], true);
        if let Err(refusal) = lists.check(&body.url) {
            return Err(ComputerError::Blocked(format!(
                "the start url {:?} is refused: {}",
                body.url, refusal.0
            )));
        }
        let rules = match &body.rules {
            None | Some(Value::Null) => Rules::default(),
            Some(list @ Value::Array(_)) => serde_json::from_value(json!({ "rules": list }))
                .map_err(|error| invalid(format!("`rules`: {error}")))?,
            Some(object) => serde_json::from_value(object.clone())
                .map_err(|error| invalid(format!("`rules`: {error}")))?,
        };
        let image_format = match &body.image_format {
            None => ImageFormat::Png,
            Some(name) => ImageFormat::parse(name).ok_or_else(|| {
                invalid(format!(
                    "`image_format` must be png, jpeg or jpeg:QUALITY (1-100), not {name:?}"
                ))
            })?,
        };
        let ttl = match body.ttl_seconds {
            None => DEFAULT_COMPUTER_TTL,
            Some(0) => return Err(invalid("`ttl_seconds` must be at least 1".to_owned())),
            Some(seconds) if Duration::from_secs(seconds) > MAX_COMPUTER_TTL => {
                return Err(invalid(format!(
                    "`ttl_seconds` must be at most {}",
                    MAX_COMPUTER_TTL.as_secs()
                )));
            }
            Some(seconds) => Duration::from_secs(seconds),
        };
        let settle_timeout = match body.settle_timeout_ms {
            None => cordon_computer::browser::DEFAULT_SETTLE_TIMEOUT,
            Some(ms @ 1..=30_000) => Duration::from_millis(ms),
            Some(ms) => {
                return Err(invalid(format!(
                    "`settle_timeout_ms` must be in 1..=30000, not {ms}"
                )));
            }
        };
        Ok(Setup {
            url: body.url.clone(),
            viewport,
            dpr,
            display,
            policy,
            rules,
            image_format,
            ttl,
            settle_timeout,
        })
    }

    /// The model display this set-up gives.
    pub fn display_size(&self) -> Size {
        self.display.resolve(self.viewport)
    }

    /// `session.json` of the trajectory, in the shape `cordon replay DIR` reads.
    pub fn session_json(&self) -> Value {
        json!({
            "url": self.url,
            "viewport": self.viewport,
            "dpr": self.dpr,
            "display": self.display,
            "policy": self.policy,
            "image_format": self.image_format,
            "rules": self.rules,
            "vendor": Vendor::Native,
        })
    }

    fn session_options(&self) -> SessionOptions {
        let mut options = SessionOptions::default();
        options.viewport = self.viewport;
        options.dpr = self.dpr;
        options.display = self.display;
        options.policy = self.policy.clone();
        options.start_url = Some(self.url.clone());
        options.settle_cap = self.settle_timeout;
        options
    }
}

/// `quiet`, `stable`, `timeout` or `moving`.
fn settle_name(end: cordon_computer::SettleEnd) -> String {
    serde_json::to_value(end)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "quiet".to_owned())
}

/// Parses `anthropic | openai | gemini | native` (default `anthropic`).
pub fn parse_format(format: Option<&str>) -> Result<Vendor, String> {
    match format {
        None => Ok(Vendor::Anthropic),
        Some(name) => Vendor::parse(name).ok_or_else(|| {
            format!("unknown format {name:?}; use anthropic, openai, gemini or native")
        }),
    }
}

/// Decodes a model call given as a list of vendor-shaped actions into one call: run in
/// order, then one screenshot. `Err` is model-visible (the model wrote an action that does
/// not decode).
pub fn decode_actions(
    vendor: Vendor,
    actions: &[Value],
    call_id: Option<String>,
) -> Result<ComputerCall, String> {
    let mut merged: Option<ComputerCall> = None;
    for (index, value) in actions.iter().enumerate() {
        let call = decode(vendor, value).map_err(|error| {
            if actions.len() > 1 {
                format!("actions[{index}]: {error}")
            } else {
                error.to_string()
            }
        })?;
        match &mut merged {
            None => merged = Some(call),
            Some(into) => {
                if into.coords != call.coords {
                    return Err(format!(
                        "actions[{index}] uses another coordinate space than actions[0]; send \
                         them as separate calls"
                    ));
                }
                into.actions.extend(call.actions);
                into.safety_checks.extend(call.safety_checks);
                if into.call_id.is_none() {
                    into.call_id = call.call_id;
                }
            }
        }
    }
    let mut call = merged.ok_or_else(|| "`actions` is empty".to_owned())?;
    if vendor == Vendor::OpenAi && call.actions.len() > 1 {
        call.batched = true;
    }
    if call_id.is_some() {
        call.call_id = call_id;
    }
    Ok(call)
}

/// A step waiting for a human.
#[derive(Debug, Clone)]
struct PendingStep {
    approval: ComputerApproval,
    /// The engine's own id for it.
    engine_id: String,
    /// The call it belongs to.
    call: ComputerCall,
}

/// What one step produced: the API's answer, and the trajectory entry when recorded.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Stepped {
    /// The step result.
    pub step: ComputerStep,
    /// The trajectory entry (`None` when the session does not record, or nothing ran).
    pub record: Option<TrajectoryStep>,
    /// The screenshot's file name in the trajectory directory.
    pub screenshot_file: Option<String>,
}

/// An open computer session. Only the worker thread touches it (see the module docs).
pub struct LiveComputer {
    id: String,
    computer: Computer<BrowserSession>,
    pending: Option<PendingStep>,
    recording: bool,
    closed: Option<String>,
    /// The model display.
    pub display: Size,
    /// The viewport in CSS pixels.
    pub viewport: Size,
}

impl std::fmt::Debug for LiveComputer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveComputer")
            .field("id", &self.id)
            .field("display", &self.display)
            .finish_non_exhaustive()
    }
}

/// A computer session shared between requests; steps on it run one at a time.
pub type SharedComputer = Arc<tokio::sync::Mutex<LiveComputer>>;

fn status(status: Status) -> StepStatus {
    match status {
        Status::Ok => StepStatus::Ok,
        Status::ApprovalRequired => StepStatus::ApprovalRequired,
        Status::Denied => StepStatus::Denied,
        _ => StepStatus::Error,
    }
}

impl LiveComputer {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The approval a step waits for.
    pub fn pending(&self) -> Option<&ComputerApproval> {
        self.pending.as_ref().map(|p| &p.approval)
    }

    /// Runs one call.
    async fn step(&mut self, call: ComputerCall, raw: &Value) -> Result<Stepped, ComputerError> {
        self.usable()?;
        if let Some(pending) = &self.pending {
            return Err(ComputerError::Pending(pending.approval.approval_id.clone()));
        }
        let report = match self.computer.step(call.clone(), Some(raw)).await {
            Ok(report) => report,
            Err(error) => return Err(self.failed(error)),
        };
        Ok(self.stepped(report, call, None))
    }

    /// Approves or denies the pending step.
    async fn decide(&mut self, approval_id: &str, approve: bool) -> Result<Stepped, ComputerError> {
        self.usable()?;
        let pending = match self.pending.take() {
            Some(pending) if pending.approval.approval_id == approval_id => pending,
            other => {
                self.pending = other;
                return Err(ComputerError::NoSuchApproval(approval_id.to_owned()));
            }
        };
        let outcome = if approve {
            self.computer.approve(&pending.engine_id).await
        } else {
            self.computer.deny(&pending.engine_id).await
        };
        match outcome {
            Ok(mut report) => {
                if report.current_url.is_none() {
                    // A denied step ran nothing, but the model still learns where it is.
                    report.current_url = self.computer.backend_mut().current_url().await.ok();
                }
                Ok(self.stepped(report, pending.call, Some(approval_id.to_owned())))
            }
            Err(error) => Err(self.failed(error)),
        }
    }

    async fn close(&mut self, why: &str) {
        if self.closed.is_none() {
            self.closed = Some(why.to_owned());
            let _closed = self.computer.backend_mut().close().await;
        }
    }

    fn usable(&self) -> Result<(), ComputerError> {
        match &self.closed {
            Some(why) => Err(ComputerError::Closed(why.clone())),
            None => Ok(()),
        }
    }

    fn failed(&mut self, error: Error) -> ComputerError {
        let error = ComputerError::from_step(error);
        if let ComputerError::Lost(why) = &error {
            // The browser context died with its process: the session cannot go on.
            self.closed = Some(why.clone());
            self.pending = None;
        }
        error
    }

    fn stepped(
        &mut self,
        report: StepReport,
        call: ComputerCall,
        resolves: Option<String>,
    ) -> Stepped {
        let pending_approval = report.pending.as_ref().map(|engine| {
            let approval = ComputerApproval {
                approval_id: fresh_id("appr"),
                rule: engine.rule.clone(),
                reason: engine.reason.clone(),
                element: engine.element.clone(),
                action_index: engine.action_index,
                action: engine.action.clone(),
            };
            self.pending = Some(PendingStep {
                approval: approval.clone(),
                engine_id: engine.id.clone(),
                call: call.clone(),
            });
            approval
        });
        let screenshot = report.screenshot.as_ref().map(|image| ScreenshotBody {
            media_type: image.format.media_type().to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(&image.data),
            width: image.size.width,
            height: image.size.height,
        });
        let gates: Vec<Value> = report
            .gates
            .iter()
            .filter_map(|gate| serde_json::to_value(gate).ok())
            .collect();
        let timings = serde_json::to_value(report.timings_ms).unwrap_or(Value::Null);
        let step = ComputerStep {
            step: Some(report.step),
            status: status(report.status),
            call_id: report.call_id.clone(),
            error: report.error.clone(),
            current_url: report.current_url.clone(),
            screenshot,
            text: report.text.clone(),
            pending_approval: pending_approval.clone(),
            resolves: resolves.clone(),
            gates: gates.clone(),
            settled: report.settled,
            settle: settle_name(report.settle),
            timings_ms: timings.clone(),
        };
        let screenshot_file = report
            .screenshot
            .as_ref()
            .filter(|_| self.recording)
            .map(|image| format!("step-{:04}.{}", report.step, image.format.extension()));
        let record = self.recording.then(|| TrajectoryStep {
            step: report.step,
            at: cordon_protocol::time::rfc3339(now_ms()),
            status: step.status,
            call_id: report.call_id.clone(),
            error: report.error.clone(),
            current_url: report.current_url.clone(),
            // Text typed into password fields never reaches the store (or the API).
            call: serde_json::to_value(trajectory::redact_call(&call, &report.redacted_actions))
                .unwrap_or(Value::Null),
            redacted_actions: report.redacted_actions.clone(),
            screen_ops: report
                .screen_ops
                .iter()
                .filter_map(|op| serde_json::to_value(op).ok())
                .collect(),
            gates,
            pending_approval,
            resolves,
            text: report.text.clone(),
            screenshot: report.screenshot.as_ref().map(|image| ScreenshotRef {
                media_type: image.format.media_type().to_owned(),
                width: image.size.width,
                height: image.size.height,
                url: format!(
                    "/v1/computers/{}/trajectory/{}/screenshot",
                    self.id, report.step
                ),
            }),
            settled: report.settled,
            settle: settle_name(report.settle),
            timings_ms: timings,
        });
        Stepped {
            step,
            record,
            screenshot_file,
        }
    }
}

/// Where computer jobs run: each job is a task of its own on the server's runtime, so
/// sessions step on every worker thread at once, and a job runs to its end even if its
/// caller stops waiting (an HTTP client that hangs up mid-step).
#[derive(Default)]
struct Worker {
    started: std::sync::atomic::AtomicBool,
}

impl Worker {
    /// Runs `job` as a task of its own and waits for its output.
    async fn run<T, F, Fut>(&self, job: F) -> Result<T, ComputerError>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        self.started.store(true, Ordering::SeqCst);
        tokio::spawn(job()).await.map_err(|error| {
            ComputerError::Browser(format!("the computer-use task failed: {error}"))
        })
    }
}

/// Computer sessions of one server and the one Chromium (started on the first session,
/// restarted by the browser backend if it crashes).
pub struct ComputerPool {
    options: BrowserOptions,
    worker: Worker,
    browser: Arc<tokio::sync::Mutex<Option<Browser>>>,
    pid: Arc<AtomicU32>,
}

impl std::fmt::Debug for ComputerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputerPool")
            .field("chromium", &self.options.executable)
            .field("pid", &self.chromium_pid())
            .finish_non_exhaustive()
    }
}

impl ComputerPool {
    /// A pool that starts Chromium as `options` say, when the first session opens.
    pub fn new(options: BrowserOptions) -> ComputerPool {
        ComputerPool {
            options,
            worker: Worker::default(),
            browser: Arc::default(),
            pid: Arc::default(),
        }
    }

    /// Why `policy`, widened by what the operator allows, refuses `url` (literal
    /// private-network addresses included), if it does; names that resolve to one are
    /// refused when the session connects.
    pub fn refusal(&self, policy: &OriginPolicy, url: &str) -> Option<String> {
        let policy = policy.clone().with_operator(
            &self.options.allow_origins,
            self.options.allow_private_network,
        );
        policy.check(url).err().map(|refusal| refusal.0)
    }

    /// Whether the operator named `url`'s origin (`--allow-origin`): such a start page
    /// needs no approval when a model opens it.
    pub fn operator_allows(&self, url: &str) -> bool {
        let named = OriginPolicy::new(self.options.allow_origins.clone(), Vec::new())
            .with_operator(&[], true);
        !self.options.allow_origins.is_empty() && named.check(url).is_ok()
    }

    /// The process id of the running Chromium, if one runs.
    pub fn chromium_pid(&self) -> Option<u32> {
        match self.pid.load(Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Opens a session and takes its first screenshot (step 1). With `record`, the
    /// trajectory is written to that directory.
    pub async fn open(
        &self,
        id: String,
        setup: &Setup,
        record: Option<PathBuf>,
    ) -> Result<(SharedComputer, Stepped), ComputerError> {
        let slot = self.browser.clone();
        let pid = self.pid.clone();
        let options = self.options.clone();
        let setup = setup.clone();
        self.worker
            .run(move || async move {
                let browser = {
                    let mut slot = slot.lock().await;
                    match &*slot {
                        Some(browser) => browser.clone(),
                        None => {
                            let browser = Browser::launch(options)
                                .await
                                .map_err(ComputerError::from_launch)?;
                            *slot = Some(browser.clone());
                            browser
                        }
                    }
                };
                let session = browser.new_session(setup.session_options()).await.map_err(
                    |error| match error {
                        Error::Action(ActionError::Blocked { .. }) => {
                            ComputerError::Blocked(error.to_string())
                        }
                        Error::BrowserMissing { .. } => ComputerError::from_launch(error),
                        other => ComputerError::Browser(format!(
                            "the browser session did not open: {other}"
                        )),
                    },
                )?;
                // A lost browser is restarted by `new_session`: the pid may be new.
                pid.store(browser.pid().unwrap_or(0), Ordering::SeqCst);
                let mut engine = EngineOptions::default();
                engine.rules = setup.rules.clone();
                engine.format = setup.image_format;
                let mut computer = Computer::new(session, engine);
                let recording = record.is_some();
                if let Some(dir) = record {
                    match TrajectoryWriter::create(&dir, &setup.session_json()) {
                        Ok(writer) => computer.record(writer),
                        Err(error) => {
                            let _closed = computer.backend_mut().close().await;
                            return Err(ComputerError::Trajectory(error.to_string()));
                        }
                    }
                }
                let display = computer.scaler().display;
                let mut live = LiveComputer {
                    id,
                    computer,
                    pending: None,
                    recording,
                    closed: None,
                    display,
                    viewport: setup.viewport,
                };
                let first = ComputerCall::native(Action::Screenshot);
                let raw = json!({"format": "native", "actions": [{"kind": "screenshot"}]});
                match live.step(first, &raw).await {
                    Ok(stepped) => Ok((Arc::new(tokio::sync::Mutex::new(live)), stepped)),
                    Err(error) => {
                        live.close("it failed to start").await;
                        Err(error)
                    }
                }
            })
            .await?
    }

    /// Starts the pool's Chromium if none runs, and returns it: benchmark environments
    /// (`/v1/envs`) run in the same browser as the sessions, each in its own context.
    pub fn launcher(
        &self,
    ) -> Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<Browser, String>> + Send + Sync>
    {
        // Shutting down then stops a browser only environments used.
        self.worker.started.store(true, Ordering::SeqCst);
        let (slot, options, pid) = (self.browser.clone(), self.options.clone(), self.pid.clone());
        Arc::new(move || {
            let (slot, options, pid) = (slot.clone(), options.clone(), pid.clone());
            Box::pin(async move {
                let mut slot = slot.lock().await;
                if let Some(browser) = &*slot {
                    return Ok(browser.clone());
                }
                let browser = Browser::launch(options)
                    .await
                    .map_err(|error| ComputerError::from_launch(error).to_string())?;
                pid.store(browser.pid().unwrap_or(0), Ordering::SeqCst);
                *slot = Some(browser.clone());
                Ok(browser)
            })
        })
    }

    /// Runs one call on `computer`.
    pub async fn step(
        &self,
        computer: &SharedComputer,
        call: ComputerCall,
        raw: Value,
    ) -> Result<Stepped, ComputerError> {
        let computer = computer.clone();
        self.worker
            .run(move || async move { computer.lock().await.step(call, &raw).await })
            .await?
    }

    /// Approves or denies the step waiting on `approval_id`.
    pub async fn decide(
        &self,
        computer: &SharedComputer,
        approval_id: String,
        approve: bool,
    ) -> Result<Stepped, ComputerError> {
        let computer = computer.clone();
        self.worker
            .run(move || async move { computer.lock().await.decide(&approval_id, approve).await })
            .await?
    }

    /// Closes a session (its BrowserContext, with cookies and storage, is disposed of).
    pub async fn close(&self, computer: &SharedComputer, why: &str) {
        let computer = computer.clone();
        let why = why.to_owned();
        let _done = self
            .worker
            .run(move || async move { computer.lock().await.close(&why).await })
            .await;
    }

    /// Stops Chromium (every session ends with it). The next `open` starts a new one.
    pub async fn shutdown(&self) {
        if self.jobs_started() {
            let slot = self.browser.clone();
            let pid = self.pid.clone();
            let _done = self
                .worker
                .run(move || async move {
                    let browser = slot.lock().await.take();
                    if let Some(browser) = browser {
                        let _closed = browser.close().await;
                    }
                    pid.store(0, Ordering::SeqCst);
                })
                .await;
        }
    }

    fn jobs_started(&self) -> bool {
        self.worker.started.load(Ordering::SeqCst)
    }
}

/// Kills the Chromium a killed server left behind (`pid`, recorded while it ran), if that
/// process still runs and is one of ours; removes its profile directory. Returns whether
/// it found one.
pub fn reap_orphaned_chromium(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|byte| *byte == 0)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let profile = args.iter().find_map(|arg| {
        arg.strip_prefix("--user-data-dir=")
            .filter(|dir| dir.contains("cordon-chromium-"))
            .map(PathBuf::from)
    });
    let Some(profile) = profile else {
        return false;
    };
    // The profile is named after the process that started this Chromium
    // (`cordon-chromium-<pid>-<n>`). If that process still runs, the browser is not an
    // orphan: another server sharing the database, or a reused pid.
    if let Some(owner) = profile_owner(&profile)
        && running(owner)
    {
        return false;
    }
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let killed = kill(pid);
    if killed {
        // Its helper processes exit when the browser process does; give it a moment.
        for _ in 0..50 {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    remove_profile(&profile, killed);
    killed
}

/// Removes a reaped Chromium's profile directory, but only when its kill succeeded and the
/// directory is one Cordon made: directly in the temp directory, named
/// `cordon-chromium-…`, a real directory (not a symlink) owned by this user. The path
/// comes from a process's command line, which anyone could have written.
fn remove_profile(profile: &std::path::Path, killed: bool) -> bool {
    if !killed || !own_profile_dir(profile) {
        return false;
    }
    std::fs::remove_dir_all(profile).is_ok()
}

fn own_profile_dir(profile: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let named = profile
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("cordon-chromium-"));
    let temp = std::env::temp_dir().canonicalize().ok();
    let parent = profile.parent().and_then(|p| p.canonicalize().ok());
    let in_temp = temp.is_some() && parent == temp;
    // /proc/self belongs to this process's effective user.
    let me = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    let ours = std::fs::symlink_metadata(profile)
        .is_ok_and(|m| m.file_type().is_dir() && Some(m.uid()) == me);
    named && in_temp && ours
}

/// Whether a process exists and has not exited (a zombie has: its parent has just not
/// collected it yet).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`: comm may hold spaces and parentheses, so split at the last `)`.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X'))
}

/// The pid in a `cordon-chromium-<pid>-<n>` profile directory name.
fn profile_owner(profile: &std::path::Path) -> Option<u32> {
    let name = profile.file_name()?.to_str()?;
    let rest = name.strip_prefix("cordon-chromium-")?;
    rest.split('-').next()?.parse().ok()
}

#[allow(
    unsafe_code,
    reason = "kill(2) on a pid we checked is our Chromium; no memory is involved"
)]
fn kill(pid: i32) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn a_chromium_whose_server_still_runs_is_not_reaped() {
        assert_eq!(
            profile_owner(std::path::Path::new("/tmp/cordon-chromium-4242-7")),
            Some(4242)
        );
        assert_eq!(
            profile_owner(std::path::Path::new("/tmp/other-4242-7")),
            None
        );
        // A process whose profile names a live owner (this test process) is left alone; a
        // shell carrying the flag stands in for the browser.
        let profile = format!(
            "--user-data-dir=/tmp/cordon-chromium-{}-0",
            std::process::id()
        );
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :", &profile])
            .spawn()
            .unwrap();
        // Until the shell has replaced the forked test process, its command line is empty.
        let cmdline = format!("/proc/{}/cmdline", child.id());
        for _ in 0..200 {
            if std::fs::read(&cmdline).is_ok_and(|c| !c.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!reap_orphaned_chromium(child.id()));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the process was killed"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn only_our_own_profile_directories_in_temp_are_removed() {
        use std::os::unix::fs::PermissionsExt as _;
        let temp = std::env::temp_dir();
        let make = |name: &str| {
            let dir = temp.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            dir
        };
        let id = std::process::id();
        // Ours, and the kill succeeded: removed.
        let ours = make(&format!("cordon-chromium-{id}-reap-1"));
        assert!(remove_profile(&ours, true));
        assert!(!ours.exists());
        // The kill failed: kept.
        let kept = make(&format!("cordon-chromium-{id}-reap-2"));
        assert!(!remove_profile(&kept, false));
        assert!(kept.exists());
        // Not directly in the temp directory (a command line can name any path).
        let outside = tempfile::tempdir_in(".").unwrap();
        let elsewhere = outside.path().join(format!("cordon-chromium-{id}-reap-3"));
        std::fs::create_dir(&elsewhere).unwrap();
        assert!(!remove_profile(&elsewhere, true));
        assert!(elsewhere.exists());
        let sneaky = temp.join(format!(
            "cordon-chromium-{id}-reap-2/../cordon-chromium-x/.."
        ));
        assert!(!remove_profile(&sneaky, true));
        assert!(kept.exists());
        // A symlink in the temp directory to a directory elsewhere.
        let link = temp.join(format!("cordon-chromium-{id}-reap-4"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(!remove_profile(&link, true));
        assert!(elsewhere.exists());
        std::fs::remove_file(&link).unwrap();
        // Another user's directory (only root can make one to test with).
        if std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .ok()
            == Some(0)
        {
            let theirs = make(&format!("cordon-chromium-{id}-reap-5"));
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(!remove_profile(&theirs, true));
            assert!(theirs.exists());
            std::fs::remove_dir_all(&theirs).unwrap();
        }
        std::fs::remove_dir_all(&kept).unwrap();
    }

    fn body(extra: Value) -> CreateComputer {
        let mut value = json!({"url": "http://127.0.0.1:9/"});
        if let (Value::Object(into), Value::Object(from)) = (&mut value, extra) {
            into.extend(from);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn setup_takes_sizes_presets_and_rules() {
        let setup = Setup::parse(&body(json!({
            "viewport": {"width": 1280, "height": 800}, "display": "1024x640",
            "rules": [], "image_format": "jpeg:70", "allow_origins": ["http://127.0.0.1:9"],
        })))
        .unwrap();
        assert_eq!(setup.display_size(), Size::new(1024, 640));
        assert_eq!(setup.rules, Rules::allow_all());
        assert_eq!(setup.image_format, ImageFormat::Jpeg { quality: 70 });
        let setup = Setup::parse(&body(json!({"display": "xga"}))).unwrap();
        assert_eq!(setup.display_size(), Size::new(1024, 768));
        let setup = Setup::parse(&body(json!({}))).unwrap();
        assert_eq!(setup.display_size(), Size::new(1280, 800));
        assert_eq!(setup.rules, Rules::default());
        assert_eq!(
            setup.session_options().settle_cap,
            cordon_computer::browser::DEFAULT_SETTLE_TIMEOUT
        );
        let setup = Setup::parse(&body(json!({"settle_timeout_ms": 500}))).unwrap();
        assert_eq!(
            setup.session_options().settle_cap,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn setup_says_what_is_wrong() {
        for (extra, needle) in [
            (json!({"dpr": 3}), "dpr"),
            (json!({"viewport": "big"}), "viewport"),
            (json!({"display": 7}), "display"),
            (json!({"rules": [{"decision": "maybe"}]}), "rules"),
            (json!({"image_format": "gif"}), "image_format"),
            (json!({"ttl_seconds": 0}), "ttl_seconds"),
            (json!({"settle_timeout_ms": 0}), "settle_timeout_ms"),
            (json!({"settle_timeout_ms": 30_001}), "settle_timeout_ms"),
            (
                json!({"allow_origins": ["ftp://files.example"]}),
                "allow_origins",
            ),
        ] {
            let error = Setup::parse(&body(extra.clone())).unwrap_err();
            assert!(
                matches!(&error, ComputerError::Invalid(m) if m.contains(needle)),
                "{extra}: {error}"
            );
        }
        let error =
            Setup::parse(&body(json!({"allow_origins": ["http://example.com"]}))).unwrap_err();
        assert!(matches!(error, ComputerError::Blocked(_)), "{error}");
    }

    #[test]
    fn a_list_of_actions_is_one_call() {
        let call = decode_actions(
            Vendor::OpenAi,
            &[
                json!({"type": "click", "x": 10, "y": 20, "button": "left"}),
                json!({"type": "type", "text": "hi"}),
            ],
            Some("call_1".into()),
        )
        .unwrap();
        assert_eq!(call.actions.len(), 2);
        assert!(call.batched);
        assert_eq!(call.call_id.as_deref(), Some("call_1"));
        let call = decode_actions(
            Vendor::Anthropic,
            &[
                json!({"type": "tool_use", "id": "toolu_1", "name": "computer",
                     "input": {"action": "left_click", "coordinate": [1, 2]}}),
            ],
            None,
        )
        .unwrap();
        assert_eq!(call.call_id.as_deref(), Some("toolu_1"));
        let error = decode_actions(
            Vendor::Anthropic,
            &[json!({"action": "screenshot"}), json!({"action": "fly"})],
            None,
        )
        .unwrap_err();
        assert!(
            error.starts_with("actions[1]: unknown action `fly`"),
            "{error}"
        );
    }
}
