//! The gym-style interface over the computer engine: [`WebEnv::reset`] opens a fresh,
//! isolated browser session on a task's start page and returns the first observation;
//! [`WebEnv::step`] runs one model call and returns the observation, the reward, whether
//! the episode is over, and what happened; [`WebEnv::evaluate`] reads the reward.
//!
//! The reward is read by the harness from the page (the task's JavaScript predicate or DOM
//! query), never from the policy. Approval gates still run: a step that asks is answered
//! as the task says (approve by default), and both the question and the answer are kept.

use std::sync::Arc;
use std::time::Instant;

use cordon_computer::browser::{Browser, BrowserSession, SessionOptions};
use cordon_computer::display::{DisplaySpec, Scaler, Size};
use cordon_computer::gate::{Rules, Verdict};
use cordon_computer::image::{EncodedImage, ImageFormat};
use cordon_computer::op::Op;
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_computer::{Computer, EngineOptions, Status, StepReport};
use cordon_protocol::computer::{Action, ComputerCall, Vendor, decode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{BenchError, PolicyError, Result};
use crate::page_server::PageServer;
use crate::reward::read_reward;
use crate::safety::approves;
use crate::session_pool::{LastEpisode, SessionKey, SessionPool, SessionStart};
use crate::task::{Approvals, Task, TaskDir, TaskKind, WebTask};
use crate::web_reset::{Opening, open_session};

/// What the policy sees after a reset or a step.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Observation {
    /// At the model's display size (the last one taken when a step produced none).
    pub screenshot: Option<EncodedImage>,
    pub url: String,
    /// Notes for the model from the step (the cursor position, a file chooser, a refusal).
    pub text: Option<String>,
}

/// One model call, as its vendor wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvAction {
    /// `anthropic` (default), `openai`, `gemini` or `native`.
    #[serde(default = "anthropic")]
    pub format: String,
    /// The actions of the call, each in the vendor's shape; run in order, then one
    /// screenshot is taken.
    pub actions: Vec<Value>,
}

fn anthropic() -> String {
    "anthropic".into()
}

impl EnvAction {
    /// A line of a script: `{"format", "actions"}`, or one Anthropic action by itself.
    pub fn from_value(value: Value) -> std::result::Result<EnvAction, String> {
        if value.get("actions").is_some() {
            serde_json::from_value(value).map_err(|e| e.to_string())
        } else if value.is_object() {
            Ok(EnvAction {
                format: anthropic(),
                actions: vec![value],
            })
        } else {
            Err(format!("an action is a JSON object, not {value}"))
        }
    }

    /// Decodes into one call (model-visible errors name the action).
    pub fn decode(&self) -> std::result::Result<ComputerCall, PolicyError> {
        let vendor = Vendor::parse(&self.format).ok_or_else(|| {
            PolicyError::BadAction(format!(
                "unknown format {:?}; use anthropic, openai, gemini or native",
                self.format
            ))
        })?;
        let mut merged: Option<ComputerCall> = None;
        for (index, value) in self.actions.iter().enumerate() {
            let call = decode(vendor, value)
                .map_err(|e| PolicyError::BadAction(format!("actions[{index}]: {e}")))?;
            match &mut merged {
                None => merged = Some(call),
                Some(into) if into.coords != call.coords => {
                    return Err(PolicyError::BadAction(format!(
                        "actions[{index}] uses another coordinate space than actions[0]"
                    )));
                }
                Some(into) => into.actions.extend(call.actions),
            }
        }
        merged.ok_or_else(|| PolicyError::BadAction("`actions` is empty".into()))
    }
}

/// A point an action pressed or released, in both coordinate spaces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// `click` (a press), `release` (the end of a drag), `scroll`.
    pub kind: MarkKind,
    /// Model display pixels (what the screenshot shows).
    pub model: (i64, i64),
    /// CSS pixels of the page.
    pub screen: (f64, f64),
    /// Device pixels (CSS × DPR).
    pub device: (f64, f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    Click,
    Release,
    Scroll,
}

/// A gate's verdict on one action, with the answer when it asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRecord {
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// `approved` or `denied` when the gate asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// What happened in a step, for the policy and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    /// The episode's step number (1-based; the reset is not a step).
    pub step: u32,
    /// `ok`, `error` (model-visible, see `error`), `denied`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The call as its vendor wrote it.
    pub action: EnvAction,
    pub marks: Vec<Mark>,
    pub gates: Vec<GateRecord>,
    /// Screen operations that ran, in CSS pixels.
    pub screen_ops: Vec<Value>,
    /// The engine's timings of the step (and of the approval's step when it asked).
    pub timings_ms: Value,
    /// Milliseconds of the whole `step` call (engine, approvals and the reward read).
    pub wall_ms: f64,
    /// Milliseconds of the reward read alone.
    pub reward_ms: f64,
    pub settle: String,
    pub url: String,
    /// The episode hit `max_steps` or `max_seconds` (not a success).
    pub truncated: bool,
}

impl StepInfo {
    /// A step about to run `action` on the page at `url`: `ok` until something says
    /// otherwise, nothing measured yet.
    pub(crate) fn new(step: u32, action: EnvAction, url: String) -> StepInfo {
        StepInfo {
            step,
            status: "ok".into(),
            error: None,
            action,
            marks: Vec::new(),
            gates: Vec::new(),
            screen_ops: Vec::new(),
            timings_ms: Value::Null,
            wall_ms: 0.0,
            reward_ms: 0.0,
            settle: String::new(),
            url,
            truncated: false,
        }
    }

    /// The call could not be decoded: an `error` step the policy can read; nothing ran.
    pub(crate) fn undecodable(&mut self, error: &dyn std::fmt::Display) {
        self.status = "error".into();
        self.error = Some(error.to_string());
    }
}

/// What [`WebEnv::step`] returns.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Transition {
    pub observation: Observation,
    pub reward: f64,
    /// The task is solved or the episode hit a cap.
    pub done: bool,
    pub info: StepInfo,
}

/// Reward at or above this is success.
pub const SUCCESS: f64 = 1.0;

/// The episode a `step` call goes on: `Err` before the first reset and once the episode is
/// over (`done`).
pub(crate) fn unfinished_episode<E>(
    episode: Option<&mut E>,
    done: impl FnOnce(&E) -> bool,
) -> Result<&mut E> {
    let episode =
        episode.ok_or_else(|| BenchError::State("step before reset: call reset first".into()))?;
    if done(episode) {
        return Err(BenchError::State(
            "the episode is over: call reset for a new one".into(),
        ));
    }
    Ok(episode)
}

/// Most approval rounds one step may go through (a call of many asking actions).
const MAX_APPROVALS_PER_STEP: usize = 100;

/// The session options of a web task: its viewport, display, DPR and origin policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Screen {
    pub viewport: Size,
    pub display: Size,
    pub dpr: f64,
}

impl Screen {
    /// The task's screen, with the run's DPR when it sets one.
    pub fn of(web: &WebTask, dpr: Option<f64>) -> Screen {
        let parse = |v: &Option<String>, d: Size| v.as_deref().and_then(Size::parse).unwrap_or(d);
        Screen {
            viewport: parse(&web.viewport, Size::new(1280, 800)),
            display: parse(&web.display, Size::new(1024, 640)),
            dpr: dpr.or(web.dpr).unwrap_or(1.0),
        }
    }
}

/// A web episode environment over one Chromium (a fresh BrowserContext per reset).
pub struct WebEnv {
    browser: Browser,
    /// Serves the tasks' `pages` (`None`: tasks must give a `url`).
    pages: Option<Arc<PageServer>>,
    /// The run's DPR, overriding the tasks'.
    dpr: Option<f64>,
    format: ImageFormat,
    /// How vendor safety checks are answered (`None`: as the task's `approvals`).
    safety_checks: Option<Approvals>,
    /// Where sessions are kept between episodes (`None`: a new session per reset).
    pool: Option<Arc<SessionPool>>,
    episode: Option<Episode>,
}

impl std::fmt::Debug for WebEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebEnv")
            .field("task", &self.episode.as_ref().map(|e| &e.task.id))
            .finish_non_exhaustive()
    }
}

struct Episode {
    task: Arc<Task>,
    web: WebTask,
    seed: u64,
    computer: Computer<BrowserSession>,
    /// Set when the session goes back to the pool after the episode.
    reusable: Option<SessionKey>,
    /// How the session came to be (new, started over, or started in place).
    start: SessionStart,
    scaler: Scaler,
    steps: u32,
    started: Instant,
    last: Observation,
    reward: f64,
    done: bool,
    trace: Vec<TraceStep>,
    start_url: String,
    first: Option<EncodedImage>,
    /// What the page worded as the task after reset (the task's `instruction`).
    instruction: Option<String>,
}

/// One step of an episode as the report shows it: what happened, the reward after it,
/// and the screenshot the step produced (the one its action was taken on is the previous
/// step's, or the reset's).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TraceStep {
    pub info: StepInfo,
    pub reward: f64,
    /// `None` when the step produced no new screenshot (an action that did not decode).
    pub screenshot: Option<EncodedImage>,
}

/// An episode's record so far: the reset's screenshot, then every step.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Trace {
    pub task: String,
    pub seed: u64,
    pub screen: Screen,
    pub start_url: String,
    pub first: Option<EncodedImage>,
    /// The instruction the page gave (tasks with `instruction`), else `None`.
    pub instruction: Option<String>,
    pub steps: Vec<TraceStep>,
    pub reward: f64,
    pub done: bool,
}

fn decision_name(v: &Verdict) -> String {
    serde_json::to_value(v.decision)
        .ok()
        .and_then(|d| d.as_str().map(str::to_owned))
        .unwrap_or_else(|| "allow".into())
}

impl WebEnv {
    /// An environment on `browser`; `pages` serves tasks that bring their own pages.
    pub fn new(browser: Browser, pages: Option<Arc<PageServer>>) -> WebEnv {
        WebEnv {
            browser,
            pages,
            dpr: None,
            format: ImageFormat::Png,
            safety_checks: None,
            pool: None,
            episode: None,
        }
    }

    /// Keeps sessions in `pool` between episodes: a task whose pages are served here and
    /// that allows no other origin starts an idle session with the same screen over on its
    /// page (`BrowserSession::restart_at`) instead of opening a new one.
    pub fn with_pool(mut self, pool: Arc<SessionPool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Answers the vendor safety checks of later steps (OpenAI `pending_safety_checks`,
    /// Gemini `require_confirmation`) with `answer`; `None`: as the task's `approvals`.
    pub fn answer_safety_checks(&mut self, answer: Option<Approvals>) {
        self.safety_checks = answer;
    }

    /// Runs every task at this DPR (1 or 2) whatever its `dpr` says.
    pub fn with_dpr(mut self, dpr: Option<f64>) -> Self {
        self.dpr = dpr;
        self
    }

    /// Screenshots in this format (PNG by default).
    pub fn with_format(mut self, format: ImageFormat) -> Self {
        self.format = format;
        self
    }

    /// The task of the current episode.
    pub fn task(&self) -> Option<&Arc<Task>> {
        self.episode.as_ref().map(|e| &e.task)
    }

    /// The model display and the page's size of the current episode.
    pub fn screen(&self) -> Option<Screen> {
        self.episode.as_ref().map(|e| Screen {
            viewport: e.scaler.viewport,
            display: e.scaler.display,
            dpr: e.scaler.dpr,
        })
    }

    /// The start page of a web task.
    pub fn start_url(&self, task: &Task, web: &WebTask, seed: u64) -> Result<String> {
        let base = match (&web.url, &web.pages) {
            (Some(url), _) => url.clone(),
            (None, Some(pages)) => {
                let server = self.pages.as_ref().ok_or_else(|| {
                    BenchError::task(&task.id, "its `pages` are not served here; give `url`")
                })?;
                let dir = match &task.dir {
                    TaskDir::Builtin(prefix) => prefix.clone(),
                    TaskDir::Disk(path) => path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    TaskDir::None => {
                        return Err(BenchError::task(&task.id, "inline tasks need `url`"));
                    }
                };
                let path = web.path.as_deref().unwrap_or("index.html");
                let pages = pages.trim_matches('/');
                let joined = [dir.as_str(), pages, path]
                    .into_iter()
                    .filter(|p| !p.is_empty() && *p != ".")
                    .collect::<Vec<_>>()
                    .join("/");
                server.url(&joined)
            }
            (None, None) => return Err(BenchError::task(&task.id, "no `url` or `pages`")),
        };
        // The seed travels in the URL too, for pages that read it themselves.
        let sep = if base.contains('?') { '&' } else { '?' };
        Ok(format!("{base}{sep}seed={seed}"))
    }

    /// Starts an episode of `task` with `seed` on a fresh session: loads the start page,
    /// runs the reset hook, and returns the first observation.
    pub async fn reset(&mut self, task: Arc<Task>, seed: u64) -> Result<Observation> {
        self.close().await;
        let TaskKind::Web(web) = &task.kind else {
            return Err(BenchError::task(&task.id, "not a web task"));
        };
        let web = web.clone();
        let url = self.start_url(&task, &web, seed)?;
        let screen = Screen::of(&web, self.dpr);
        let mut allow = Vec::new();
        for raw in &web.allow_origins {
            allow.push(
                OriginPattern::parse(raw)
                    .map_err(|e| BenchError::task(&task.id, format!("`allow_origins`: {e}")))?,
            );
        }
        if let Some(server) = &self.pages
            && web.pages.is_some()
        {
            allow.push(
                OriginPattern::parse(&server.origin())
                    .map_err(|e| BenchError::task(&task.id, e))?,
            );
        }
        let rules: Rules = match &web.rules {
            None => Rules::default(),
            Some(list @ Value::Array(_)) => {
                serde_json::from_value(serde_json::json!({ "rules": list }))
                    .map_err(|e| BenchError::task(&task.id, format!("`rules`: {e}")))?
            }
            Some(object) => serde_json::from_value(object.clone())
                .map_err(|e| BenchError::task(&task.id, format!("`rules`: {e}")))?,
        };
        let mut options = SessionOptions::default();
        options.viewport = screen.viewport;
        options.dpr = screen.dpr;
        options.display = DisplaySpec::Fixed {
            size: screen.display,
        };
        options.policy = OriginPolicy::new(allow, Vec::new());
        let url_for_trace = url.clone();
        let t_open = Instant::now();
        let served = self
            .pages
            .as_ref()
            .filter(|_| web.pages.is_some() && web.allow_origins.is_empty());
        let reusable = match (&self.pool, served) {
            (Some(pool), Some(server)) => Some((pool.as_ref(), server.origin())),
            _ => None,
        };
        let opening = Opening {
            task: &task.id,
            web: &web,
            url,
            seed,
        };
        let opened = open_session(&self.browser, reusable, opening, options).await?;
        let (reusable, start, instruction) = (opened.key, opened.start, opened.instruction);
        let open_ms = ms(t_open);
        let mut engine = EngineOptions::default();
        engine.rules = rules;
        engine.format = self.format;
        let mut computer = Computer::new(opened.session, engine);
        let t_first = Instant::now();
        let first = computer
            .step(ComputerCall::native(Action::Screenshot), None)
            .await?;
        if std::env::var_os("CORDON_BENCH_RESET_TRACE").is_some() {
            eprintln!(
                "reset {} s{seed}: session, hook and instruction {open_ms} ms ({start:?}), \
                 first capture {} ms",
                task.id,
                ms(t_first)
            );
        }
        let scaler = computer.scaler();
        let observation = Observation {
            screenshot: first.screenshot,
            url: first.current_url.unwrap_or_default(),
            text: first.text,
        };
        self.episode = Some(Episode {
            task,
            web,
            seed,
            computer,
            reusable,
            start,
            scaler,
            steps: 0,
            started: Instant::now(),
            last: observation.clone(),
            reward: 0.0,
            done: false,
            trace: Vec::new(),
            start_url: url_for_trace,
            first: observation.screenshot.clone(),
            instruction,
        });
        Ok(observation)
    }

    /// The instruction of the current episode: what its page worded (tasks with
    /// `instruction`), else the task's `prompt`.
    pub fn instruction(&self) -> Option<String> {
        self.episode.as_ref().map(|e| {
            e.instruction
                .clone()
                .unwrap_or_else(|| e.task.prompt.clone())
        })
    }

    /// The scaling between the model's display and the page of the current episode (what a
    /// scripted policy uses to turn a place on the page into screenshot coordinates).
    pub fn scaler(&self) -> Option<Scaler> {
        self.episode.as_ref().map(|e| e.scaler)
    }

    /// Evaluates `expression` in the current page and returns its value (JSON). For
    /// scripted policies that read the page as a replay would; the reward is never taken
    /// from here.
    pub async fn inspect(&self, expression: impl Into<String>) -> Result<Value> {
        let episode = self
            .episode
            .as_ref()
            .ok_or_else(|| BenchError::State("inspect before reset: call reset first".into()))?;
        Ok(episode.computer.backend().eval(expression.into()).await?)
    }

    /// Whether the current episode runs on a session an earlier one ended.
    pub fn reused(&self) -> Option<bool> {
        self.episode.as_ref().map(|e| e.start != SessionStart::New)
    }

    /// How the current episode's session came to be.
    pub fn session_start(&self) -> Option<SessionStart> {
        self.episode.as_ref().map(|e| e.start)
    }

    /// The seed of the current episode.
    pub fn seed(&self) -> Option<u64> {
        self.episode.as_ref().map(|e| e.seed)
    }

    /// Runs one call. A call the policy got wrong is a step with `info.status = "error"`
    /// (nothing ran; the observation is the previous one); `Err` means the episode broke.
    pub async fn step(&mut self, action: EnvAction) -> Result<Transition> {
        let t0 = Instant::now();
        let safety_checks = self.safety_checks;
        let episode = unfinished_episode(self.episode.as_mut(), |e| e.done)?;
        episode.steps += 1;
        let mut info = StepInfo::new(episode.steps, action.clone(), episode.last.url.clone());
        let mut fresh = false;
        match action.decode() {
            Err(error) => info.undecodable(&error),
            Ok(call) => {
                let raw = serde_json::to_value(&action).unwrap_or(Value::Null);
                let mut report = episode.computer.step(call, Some(&raw)).await?;
                let mut reports = Vec::new();
                let mut rounds = 0;
                while report.status == Status::ApprovalRequired && rounds < MAX_APPROVALS_PER_STEP {
                    rounds += 1;
                    let Some(pending) = report.pending.clone() else {
                        break;
                    };
                    let approve = approves(&pending, episode.web.approvals, safety_checks);
                    reports.push((report, Some(approve)));
                    report = if approve {
                        episode.computer.approve(&pending.id).await?
                    } else {
                        episode.computer.deny(&pending.id).await?
                    };
                }
                fresh = report.screenshot.is_some();
                reports.push((report, None));
                absorb(&mut info, &mut episode.last, &reports, episode.scaler);
            }
        }
        let tr = Instant::now();
        let (reward, page_done) = read_reward(&episode.computer, &episode.web).await?;
        info.reward_ms = ms(tr);
        episode.reward = reward;
        let truncated = episode.steps >= episode.task.max_steps
            || episode.started.elapsed().as_secs_f64() >= episode.task.max_seconds;
        episode.done = reward >= SUCCESS || page_done || truncated;
        info.truncated = truncated && reward < SUCCESS && !page_done;
        info.wall_ms = ms(t0);
        episode.trace.push(TraceStep {
            info: info.clone(),
            reward,
            screenshot: if fresh {
                episode.last.screenshot.clone()
            } else {
                None
            },
        });
        Ok(Transition {
            observation: episode.last.clone(),
            reward,
            done: episode.done,
            info,
        })
    }

    /// Reads the reward from the page now (0 before any reset).
    pub async fn evaluate(&mut self) -> Result<f64> {
        match &mut self.episode {
            None => Ok(0.0),
            Some(e) => {
                e.reward = read_reward(&e.computer, &e.web).await?.0;
                Ok(e.reward)
            }
        }
    }

    /// The current episode's record (`None` before any reset).
    pub fn trace(&self) -> Option<Trace> {
        self.episode.as_ref().map(|e| Trace {
            task: e.task.id.clone(),
            seed: e.seed,
            screen: Screen {
                viewport: e.scaler.viewport,
                display: e.scaler.display,
                dpr: e.scaler.dpr,
            },
            start_url: e.start_url.clone(),
            first: e.first.clone(),
            instruction: e.instruction.clone(),
            steps: e.trace.clone(),
            reward: e.reward,
            done: e.done,
        })
    }

    /// Marks the episode over (an external policy said it is finished); the reward stays
    /// what the page says.
    pub fn finish(&mut self) {
        if let Some(e) = &mut self.episode {
            e.done = true;
        }
    }

    /// The reward of the current episode as last read (after its last step or evaluate).
    pub fn reward(&self) -> Option<f64> {
        self.episode.as_ref().map(|e| e.reward)
    }

    /// Steps taken in the current episode, and whether it is over.
    pub fn progress(&self) -> Option<(u32, bool)> {
        self.episode.as_ref().map(|e| (e.steps, e.done))
    }

    /// Ends the current episode and closes its session (its context goes with it), or
    /// hands it back to the pool for a later episode when it can start over.
    pub async fn close(&mut self) {
        let Some(episode) = self.episode.take() else {
            return;
        };
        let mut session = episode.computer.into_backend();
        if let (Some(pool), Some(key)) = (&self.pool, episode.reusable)
            && session.restartable()
        {
            let last = LastEpisode {
                task: episode.task.id.clone(),
                url: episode.start_url,
            };
            pool.put(key, session, Some(last));
            return;
        }
        let _closed = session.close().await;
    }
}

fn ms(since: Instant) -> f64 {
    round2(since.elapsed().as_secs_f64() * 1000.0)
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Folds the engine's reports of one step (the asks, the answers, the end) into `info`.
pub(crate) fn absorb(
    info: &mut StepInfo,
    last: &mut Observation,
    reports: &[(StepReport, Option<bool>)],
    scaler: Scaler,
) {
    let mut timings = Vec::new();
    for (report, answer) in reports {
        for (i, verdict) in report.gates.iter().enumerate() {
            // The verdict of a step that asked is the last one; an approved step repeats
            // it as "approved: …", which the answer already says.
            if verdict.reason.starts_with("approved: ") {
                continue;
            }
            let asked = answer.is_some() && i + 1 == report.gates.len();
            info.gates.push(GateRecord {
                decision: decision_name(verdict),
                rule: verdict.rule.clone(),
                reason: verdict.reason.clone(),
                element: verdict.element.clone(),
                answer: asked.then(|| {
                    if answer == &Some(true) {
                        "approved".to_owned()
                    } else {
                        "denied".to_owned()
                    }
                }),
            });
        }
        for op in &report.screen_ops {
            if let Some(mark) = mark_of(op, scaler) {
                // A click's release lands where it pressed: only a drag's is worth a mark.
                let same_spot = info
                    .marks
                    .last()
                    .is_some_and(|prev| prev.kind == MarkKind::Click && prev.model == mark.model);
                if !(mark.kind == MarkKind::Release && same_spot) {
                    info.marks.push(mark);
                }
            }
            info.screen_ops
                .push(serde_json::to_value(op).unwrap_or(Value::Null));
        }
        let t = report.timings_ms;
        timings.push(serde_json::json!({
            "gate": round2(t.gate), "act": round2(t.act), "settle": round2(t.settle),
            "capture": round2(t.capture), "total": round2(t.total),
        }));
    }
    let Some((end, _)) = reports.last() else {
        return;
    };
    info.status = match end.status {
        Status::Ok => "ok",
        Status::Denied => "denied",
        _ => "error",
    }
    .into();
    info.error.clone_from(&end.error);
    info.settle = serde_json::to_value(end.settle)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    info.timings_ms = if timings.len() == 1 {
        timings.remove(0)
    } else {
        Value::Array(timings)
    };
    if let Some(url) = &end.current_url {
        last.url.clone_from(url);
    }
    info.url.clone_from(&last.url);
    if end.screenshot.is_some() {
        last.screenshot.clone_from(&end.screenshot);
    }
    last.text.clone_from(&end.text);
}

fn mark_of(op: &Op, scaler: Scaler) -> Option<Mark> {
    let (kind, at) = match op {
        Op::Down { at, .. } => (MarkKind::Click, *at),
        Op::Up { at, .. } => (MarkKind::Release, *at),
        Op::Wheel { at, .. } => (MarkKind::Scroll, *at),
        _ => return None,
    };
    let model = scaler.to_model(at);
    Some(Mark {
        kind,
        model: (model.x, model.y),
        screen: (at.x, at.y),
        device: (at.x * scaler.dpr, at.y * scaler.dpr),
    })
}
