//! What a run records: each episode's [`EpisodeResult`] (`episode.json`) and the whole
//! run's [`RunResults`] (`results.json`), with the [`Summary`] over its episodes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::code::CodeTransition;
use crate::env::StepInfo;

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
    /// How a web episode's browser session started: `new`, `restarted` (an idle session
    /// started over on the start page) or `in_place` (an idle session that ran the same
    /// task, on its page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
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
    /// The Cordon server that ran the episode (`--remote`); `None`: this process did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
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

pub(crate) fn round2(v: f64) -> f64 {
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
pub(crate) fn failed(
    id: &str,
    task: &str,
    seed: u64,
    reason: String,
    fatal: bool,
) -> EpisodeResult {
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
        server: None,
        session: None,
    }
}
