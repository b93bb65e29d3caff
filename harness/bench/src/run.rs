//! A benchmark run: every (task, seed) of a suite is an episode; episodes run in parallel
//! (at most `jobs` at once), each on its own isolated session; each finished episode is
//! written to `RUN_DIR/episodes/<id>/` at once, so a run that stops can be resumed and only
//! the episodes without a record run again. At the end `results.json` and `report.html`
//! are written.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cordon_computer::browser::Browser;
use cordon_computer::image::EncodedImage;
use cordon_sandbox::Sandbox;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::code::{CodeEnv, CodeTransition};
use crate::env::{EnvAction, SUCCESS, StepInfo, Trace, WebEnv};
use crate::error::{BenchError, Result};
use crate::pages::{PageRoot, PageServer};
use crate::task::{Suite, SuiteSource, Task, TaskKind};

/// Who decides the actions of web episodes (code episodes are scripted or upstream too).
#[derive(Clone)]
pub enum Policy {
    /// Each task's `script.jsonl` (web) or `solution.py`/`solution.js` (code).
    Script,
    /// Something else drives the episode's environment (an agent over HTTP, a model);
    /// the run scores what it left.
    Driver(Arc<dyn Driver>),
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Policy::Script => f.write_str("Script"),
            Policy::Driver(d) => write!(f, "Driver({})", d.name()),
        }
    }
}

/// A policy that drives a web episode itself: it gets the environment right after reset
/// and returns when it is done (or the episode hit its caps).
pub trait Driver: Send + Sync {
    /// `external`, `upstream`.
    fn name(&self) -> &'static str;
    /// Drives one episode. `Err` ends it with that error; the reward is read afterwards.
    fn drive(
        &self,
        episode: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, Result<()>>;
    /// Writes the code of a code episode (none: code tasks are skipped with a note).
    fn write_code(&self, task: Arc<Task>) -> Option<BoxFuture<'static, Result<String>>> {
        let _ = task;
        None
    }
}

/// One episode of a run, as a driver sees it.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    pub id: String,
    pub task: Arc<Task>,
    pub seed: u64,
}

/// How to run a suite.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunOptions {
    pub out: PathBuf,
    pub jobs: usize,
    pub policy: Policy,
    /// Runs every web task at this DPR.
    pub dpr: Option<f64>,
    /// Draw a progress bar (a terminal); otherwise one plain line per episode.
    pub progress_bar: bool,
    /// Skip episodes that already have a record in `out`.
    pub resume: bool,
}

impl RunOptions {
    pub fn new(out: PathBuf, policy: Policy) -> RunOptions {
        RunOptions {
            out,
            jobs: 1,
            policy,
            dpr: None,
            progress_bar: std::io::stderr().is_terminal(),
            resume: false,
        }
    }

    /// At most this many episodes at once (at least 1).
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    pub fn dpr(mut self, dpr: Option<f64>) -> Self {
        self.dpr = dpr;
        self
    }

    pub fn resume(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    pub fn progress_bar(mut self, on: bool) -> Self {
        self.progress_bar = on;
        self
    }
}

/// One step of an episode as recorded in `episode.json` and `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    #[serde(flatten)]
    pub info: StepInfo,
    pub reward: f64,
    /// The screenshot this step's action was taken on (file in the episode's directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The screenshot after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// An episode's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeResult {
    /// `<task>-s<seed>`.
    pub id: String,
    pub task: String,
    pub seed: u64,
    /// `web`, `code`, `desktop`.
    pub kind: String,
    pub prompt: String,
    pub reward: f64,
    pub success: bool,
    pub steps: u32,
    /// Why the episode could not run to its end (a malformed task, a missing script, a
    /// crashed browser). The reward is 0 then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error was the harness's (a browser crash), not the task's: `--resume` runs
    /// the episode again.
    #[serde(default)]
    pub fatal: bool,
    /// The episode hit `max_steps` or `max_seconds`.
    #[serde(default)]
    pub truncated: bool,
    pub duration_ms: f64,
    /// Milliseconds to reset (a fresh session on the start page, the reset hook, the
    /// first screenshot).
    pub reset_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_url: Option<String>,
    /// `{viewport, display, dpr}` of a web episode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<Value>,
    /// The reset's screenshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<StepRecord>,
    /// Code episodes: each run of the policy's code and the checker's verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code: Vec<CodeTransition>,
}

/// The summary of a run (also the top of `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub episodes: usize,
    pub succeeded: usize,
    pub errors: usize,
    pub success_rate: f64,
    pub mean_reward: f64,
    pub mean_steps: f64,
    /// Wall time of one `step` (engine, approvals, reward read), milliseconds.
    pub step_ms: Percentiles,
    /// The reward read alone, milliseconds.
    pub reward_ms: Percentiles,
    pub episode_ms: Percentiles,
    /// Wall time of this run (not counting resumed episodes' earlier time).
    pub run_seconds: f64,
    /// Episodes this run ran; a resume keeps the others, run in earlier runs' time.
    #[serde(default)]
    pub episodes_run: usize,
    /// `episodes_run` over `run_seconds`, so a resume does not count kept episodes in
    /// this run's time; `None` (null) when this run ran none.
    pub episodes_per_minute: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(mut values: Vec<f64>) -> Percentiles {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let i = ((values.len() as f64 - 1.0) * q).round() as usize;
            round2(values[i.min(values.len() - 1)])
        };
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: round2(values[values.len() - 1]),
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    pub suite: String,
    pub policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpr: Option<f64>,
    pub jobs: usize,
    pub summary: Summary,
    pub episodes: Vec<EpisodeResult>,
}

/// The episode ids of a suite, in order: `<task>-s<seed>`.
pub fn episode_ids(suite: &Suite) -> Vec<(String, usize, u64)> {
    let mut out = Vec::new();
    for (index, entry) in suite.entries.iter().enumerate() {
        match &entry.task {
            Ok(task) => {
                for seed in &task.seeds {
                    out.push((format!("{}-s{seed}", task.id), index, *seed));
                }
            }
            Err(_) => out.push((format!("{}-s0", entry.id), index, 0)),
        }
    }
    out
}

/// The engines a run needs, started on demand.
struct Engines {
    browser: tokio::sync::OnceCell<std::result::Result<Browser, String>>,
    browser_options: cordon_computer::browser::BrowserOptions,
    sandbox: tokio::sync::OnceCell<std::result::Result<Sandbox, String>>,
    pages: Arc<PageServer>,
}

impl Engines {
    async fn browser(&self) -> Result<Browser> {
        self.browser
            .get_or_init(|| async {
                Browser::launch(self.browser_options.clone())
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .clone()
            .map_err(|e| BenchError::Policy(format!("Chromium did not start: {e}")))
    }

    async fn sandbox(&self) -> Result<Sandbox> {
        self.sandbox
            .get_or_init(|| async {
                Sandbox::new(cordon_sandbox::SandboxConfig::default())
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .clone()
            .map_err(BenchError::Sandbox)
    }
}

/// Progress on stderr: a bar with ETA on a terminal, one line per episode otherwise.
struct Progress {
    total: usize,
    done: usize,
    ok: usize,
    started: Instant,
    bar: bool,
}

impl Progress {
    /// An empty bar, so a terminal shows the run has started before the first episode ends.
    fn start(&self) {
        if self.bar && self.total > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K[{}] 0/{} · starting",
                "-".repeat(30),
                self.total
            );
        }
    }

    fn finished(&mut self, result: &EpisodeResult) {
        self.done += 1;
        if result.success {
            self.ok += 1;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = if self.done == 0 {
            0.0
        } else {
            elapsed / self.done as f64 * (self.total - self.done) as f64
        };
        let mut err = std::io::stderr().lock();
        if self.bar {
            let width = 30;
            let filled = width * self.done / self.total.max(1);
            let _ = write!(
                err,
                "\r\x1b[2K[{}{}] {}/{} ok {} · {:.0}s · ETA {:.0}s · {}",
                "#".repeat(filled),
                "-".repeat(width - filled),
                self.done,
                self.total,
                self.ok,
                elapsed,
                eta,
                result.id
            );
            if self.done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let verdict = match (&result.error, result.success) {
                (Some(e), _) => format!("error: {e}"),
                (None, true) => "ok".into(),
                (None, false) => "failed".into(),
            };
            let _ = writeln!(
                err,
                "bench: [{}/{}] {} reward {} in {} steps, {:.0} ms: {verdict} (ETA {:.0}s)",
                self.done,
                self.total,
                result.id,
                result.reward,
                result.steps,
                result.duration_ms,
                eta
            );
        }
    }
}

fn policy_name(policy: &Policy) -> String {
    match policy {
        Policy::Script => "script".into(),
        Policy::Driver(d) => d.name().into(),
    }
}

/// Runs `suite`; returns the results also written to `out/results.json` (and the report).
pub async fn run_suite(
    suite: &Suite,
    browser_options: cordon_computer::browser::BrowserOptions,
    options: RunOptions,
) -> Result<RunResults> {
    let t0 = Instant::now();
    let episodes_dir = options.out.join("episodes");
    std::fs::create_dir_all(&episodes_dir)
        .map_err(|e| BenchError::io(format!("creating {}", episodes_dir.display()), e))?;
    let run_meta = serde_json::json!({
        "suite": suite.name, "policy": policy_name(&options.policy), "dpr": options.dpr,
    });
    write_json(&options.out.join("run.json"), &run_meta)?;
    let root = match &suite.source {
        SuiteSource::Builtin => PageRoot::Builtin,
        SuiteSource::Dir(dir) => PageRoot::Dir(dir.clone()),
    };
    let engines = Arc::new(Engines {
        browser: tokio::sync::OnceCell::new(),
        browser_options,
        sandbox: tokio::sync::OnceCell::new(),
        pages: Arc::new(PageServer::start(root).await?),
    });
    let all = episode_ids(suite);
    let mut kept = Vec::new();
    let mut todo = Vec::new();
    for (id, index, seed) in all {
        let earlier = options
            .resume
            .then(|| read_episode(&episodes_dir.join(&id)))
            .flatten()
            .filter(|r| !r.fatal);
        match earlier {
            Some(result) => kept.push(result),
            None => todo.push((id, index, seed)),
        }
    }
    if options.resume && !kept.is_empty() {
        eprintln!(
            "bench: resuming {}: {} episodes already done, {} to run",
            options.out.display(),
            kept.len(),
            todo.len()
        );
    }
    let progress = Arc::new(Mutex::new(Progress {
        total: todo.len(),
        done: 0,
        ok: 0,
        started: Instant::now(),
        bar: options.progress_bar,
    }));
    if let Ok(p) = progress.lock() {
        p.start();
    }
    let limit = Arc::new(tokio::sync::Semaphore::new(options.jobs.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (id, index, seed) in todo {
        let entry = suite.entries[index].clone();
        let engines = engines.clone();
        let limit = limit.clone();
        let policy = options.policy.clone();
        let dir = episodes_dir.join(&id);
        let dpr = options.dpr;
        let progress = progress.clone();
        set.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let result = match entry.task {
                Err(reason) => failed(&id, &entry.id, seed, reason, false),
                Ok(task) => {
                    let task = Arc::new(task);
                    run_episode(&engines, &policy, &id, task, seed, dpr, &dir).await
                }
            };
            if let Err(e) = write_episode(&dir, &result) {
                eprintln!("bench: {id}: could not record the episode: {e}");
            }
            if let Ok(mut p) = progress.lock() {
                p.finished(&result);
            }
            result
        });
    }
    let mut results = kept;
    let mut ran = 0;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(result) => {
                ran += 1;
                results.push(result);
            }
            Err(e) => eprintln!("bench: an episode task failed: {e}"),
        }
    }
    if let Ok(browser) = engines.browser.get().cloned().unwrap_or(Err(String::new())) {
        let _closed = browser.close().await;
    }
    let order: Vec<String> = episode_ids(suite).into_iter().map(|(id, ..)| id).collect();
    results.sort_by_key(|r| {
        order
            .iter()
            .position(|id| *id == r.id)
            .unwrap_or(usize::MAX)
    });
    let summary = summarize(&results, ran, t0.elapsed().as_secs_f64());
    let run = RunResults {
        suite: suite.name.clone(),
        policy: policy_name(&options.policy),
        dpr: options.dpr,
        jobs: options.jobs,
        summary,
        episodes: results,
    };
    write_json(&options.out.join("results.json"), &run)?;
    let html = crate::report::render(&run, &options.out);
    std::fs::write(options.out.join("report.html"), html)
        .map_err(|e| BenchError::io("writing report.html", e))?;
    Ok(run)
}

/// The summary over a run's episodes, `ran` of which this run ran in `run_seconds` (a
/// resume keeps the rest).
pub fn summarize(results: &[EpisodeResult], ran: usize, run_seconds: f64) -> Summary {
    let n = results.len();
    let succeeded = results.iter().filter(|r| r.success).count();
    let steps: Vec<f64> = results
        .iter()
        .flat_map(|r| r.trace.iter().map(|s| s.info.wall_ms))
        .collect();
    let reward_ms: Vec<f64> = results
        .iter()
        .flat_map(|r| r.trace.iter().map(|s| s.info.reward_ms))
        .collect();
    let mean = |f: &dyn Fn(&EpisodeResult) -> f64| {
        if n == 0 {
            0.0
        } else {
            round2(results.iter().map(f).sum::<f64>() / n as f64)
        }
    };
    Summary {
        episodes: n,
        succeeded,
        errors: results.iter().filter(|r| r.error.is_some()).count(),
        success_rate: if n == 0 {
            0.0
        } else {
            round2(succeeded as f64 / n as f64)
        },
        mean_reward: mean(&|r| r.reward),
        mean_steps: mean(&|r| f64::from(r.steps)),
        step_ms: Percentiles::of(steps),
        reward_ms: Percentiles::of(reward_ms),
        episode_ms: Percentiles::of(results.iter().map(|r| r.duration_ms).collect()),
        run_seconds: round2(run_seconds),
        episodes_run: ran.min(n),
        episodes_per_minute: (ran > 0 && run_seconds > 0.0)
            .then(|| round2(ran.min(n) as f64 * 60.0 / run_seconds)),
    }
}

fn failed(id: &str, task: &str, seed: u64, reason: String, fatal: bool) -> EpisodeResult {
    EpisodeResult {
        id: id.to_owned(),
        task: task.to_owned(),
        seed,
        kind: String::new(),
        prompt: String::new(),
        reward: 0.0,
        success: false,
        steps: 0,
        error: Some(reason),
        fatal,
        truncated: false,
        duration_ms: 0.0,
        reset_ms: 0.0,
        start_url: None,
        screen: None,
        first: None,
        trace: Vec::new(),
        code: Vec::new(),
    }
}

fn kind_name(task: &Task) -> &'static str {
    match task.kind {
        TaskKind::Web(_) => "web",
        TaskKind::Code(_) => "code",
        TaskKind::Desktop(_) => "desktop",
    }
}

async fn run_episode(
    engines: &Engines,
    policy: &Policy,
    id: &str,
    task: Arc<Task>,
    seed: u64,
    dpr: Option<f64>,
    dir: &Path,
) -> EpisodeResult {
    let t0 = Instant::now();
    let mut result = failed(id, &task.id, seed, String::new(), false);
    result.error = None;
    result.kind = kind_name(&task).into();
    result.prompt = task.prompt.clone();
    let outcome = match &task.kind {
        TaskKind::Web(_) => {
            web_episode(
                engines,
                policy,
                id,
                task.clone(),
                seed,
                dpr,
                dir,
                &mut result,
            )
            .await
        }
        TaskKind::Code(_) => code_episode(engines, policy, task.clone(), seed, &mut result).await,
        TaskKind::Desktop(_) => desktop_episode(policy, task.clone(), seed, dir, &mut result).await,
    };
    if let Err(error) = outcome {
        result.fatal = matches!(error, BenchError::Browser(_) | BenchError::Sandbox(_));
        result.error = Some(error.to_string());
        result.success = false;
    }
    result.duration_ms = round2(t0.elapsed().as_secs_f64() * 1000.0);
    result
}

/// The actions of a task's script: one call per line (blank lines and `#` lines skipped).
pub fn read_script(task: &Task) -> Result<Vec<EnvAction>> {
    let bytes = task
        .file("script.jsonl")
        .ok_or_else(|| BenchError::task(&task.id, "the scripted policy needs its script.jsonl"))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            BenchError::task(
                &task.id,
                format!("script.jsonl line {}: not JSON: {e}", n + 1),
            )
        })?;
        out.push(EnvAction::from_value(value).map_err(|e| {
            BenchError::task(&task.id, format!("script.jsonl line {}: {e}", n + 1))
        })?);
    }
    Ok(out)
}

#[allow(
    clippy::too_many_arguments,
    reason = "one internal call site, all plain inputs"
)]
async fn web_episode(
    engines: &Engines,
    policy: &Policy,
    id: &str,
    task: Arc<Task>,
    seed: u64,
    dpr: Option<f64>,
    dir: &Path,
    result: &mut EpisodeResult,
) -> Result<()> {
    let script = match policy {
        Policy::Script => Some(read_script(&task)?),
        Policy::Driver(_) => None,
    };
    let browser = engines.browser().await?;
    let env = WebEnv::new(browser, Some(engines.pages.clone())).with_dpr(dpr);
    let env = Arc::new(tokio::sync::Mutex::new(env));
    let tr = Instant::now();
    env.lock().await.reset(task.clone(), seed).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    let driven = match (policy, script) {
        (Policy::Script, Some(script)) => {
            let mut env = env.lock().await;
            let mut outcome = Ok(());
            for action in script {
                match env.step(action).await {
                    Ok(t) if t.done => break,
                    Ok(_) => {}
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            outcome
        }
        (Policy::Driver(driver), _) => {
            let spec = EpisodeSpec {
                id: id.to_owned(),
                task: task.clone(),
                seed,
            };
            driver.drive(spec, env.clone()).await
        }
        (Policy::Script, None) => Ok(()),
    };
    let mut env = env.lock().await;
    // The final word is the page's, whatever the policy said.
    let reward = match &driven {
        Ok(()) => env.evaluate().await,
        Err(_) => Ok(0.0),
    };
    if let Some(trace) = env.trace() {
        record_trace(&trace, dir, result)?;
    }
    env.close().await;
    driven?;
    result.reward = reward?;
    result.success = result.reward >= SUCCESS;
    Ok(())
}

#[cfg(feature = "desktop")]
async fn desktop_episode(
    policy: &Policy,
    task: Arc<Task>,
    seed: u64,
    dir: &Path,
    result: &mut EpisodeResult,
) -> Result<()> {
    let Policy::Script = policy else {
        return Err(BenchError::task(
            &task.id,
            "desktop tasks run with the scripted policy only",
        ));
    };
    let script = read_script(&task)?;
    let tr = Instant::now();
    let trace = crate::desktop::run(task, seed, script).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    record_trace(&trace, dir, result)?;
    result.start_url = None;
    result.reward = trace.reward;
    result.success = trace.reward >= SUCCESS;
    Ok(())
}

#[cfg(not(feature = "desktop"))]
async fn desktop_episode(
    _policy: &Policy,
    task: Arc<Task>,
    _seed: u64,
    _dir: &Path,
    _result: &mut EpisodeResult,
) -> Result<()> {
    Err(BenchError::task(
        &task.id,
        "this build has no desktop backend (the `desktop` feature)",
    ))
}

fn save_image(dir: &Path, name: &str, image: &EncodedImage) -> Result<String> {
    let file = format!("{name}.{}", image.format.extension());
    std::fs::write(dir.join(&file), &image.data)
        .map_err(|e| BenchError::io(format!("writing {}", dir.join(&file).display()), e))?;
    Ok(file)
}

fn record_trace(trace: &Trace, dir: &Path, result: &mut EpisodeResult) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    result.start_url = Some(trace.start_url.clone());
    result.screen = Some(serde_json::json!({
        "viewport": trace.screen.viewport, "display": trace.screen.display, "dpr": trace.screen.dpr,
    }));
    let mut shown = match &trace.first {
        Some(image) => Some(save_image(dir, "step-0000", image)?),
        None => None,
    };
    result.first.clone_from(&shown);
    for step in &trace.steps {
        let after = match &step.screenshot {
            Some(image) => Some(save_image(
                dir,
                &format!("step-{:04}", step.info.step),
                image,
            )?),
            None => shown.clone(),
        };
        result.trace.push(StepRecord {
            info: step.info.clone(),
            reward: step.reward,
            before: shown.clone(),
            after: after.clone(),
        });
        shown = after;
    }
    result.steps = u32::try_from(trace.steps.len()).unwrap_or(u32::MAX);
    result.truncated = trace.steps.last().is_some_and(|s| s.info.truncated);
    Ok(())
}

async fn code_episode(
    engines: &Engines,
    policy: &Policy,
    task: Arc<Task>,
    seed: u64,
    result: &mut EpisodeResult,
) -> Result<()> {
    let TaskKind::Code(code_task) = &task.kind else {
        return Ok(());
    };
    let code = match policy {
        Policy::Script => {
            let ext = if code_task.language.starts_with("j") {
                "js"
            } else {
                "py"
            };
            let name = format!("solution.{ext}");
            let bytes = task.file(&name).ok_or_else(|| {
                BenchError::task(&task.id, format!("the scripted policy needs its {name}"))
            })?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Policy::Driver(driver) => match driver.write_code(task.clone()) {
            Some(future) => future.await?,
            None => {
                return Err(BenchError::task(
                    &task.id,
                    format!("the {} policy does not run code tasks", driver.name()),
                ));
            }
        },
    };
    let mut env = CodeEnv::new(engines.sandbox().await?);
    let tr = Instant::now();
    env.reset(task.clone(), seed).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    let transition = env.step(&code).await?;
    result.reward = transition.reward;
    result.success = transition.reward >= SUCCESS;
    result.steps = 1;
    result.code.push(transition);
    Ok(())
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| BenchError::io(path.display().to_string(), std::io::Error::other(e)))?;
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("writing {}", path.display()), e))
}

fn write_episode(dir: &Path, result: &EpisodeResult) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    write_json(&dir.join("episode.json"), result)
}

fn read_episode(dir: &Path) -> Option<EpisodeResult> {
    let text = std::fs::read_to_string(dir.join("episode.json")).ok()?;
    serde_json::from_str(&text).ok()
}
