//! How to run a suite: the [`RunOptions`] and the [`Policy`] that decides an episode's
//! actions (the task's script, or a [`Driver`]).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
#[cfg(feature = "desktop")]
use futures::future::LocalBoxFuture;

use crate::env::WebEnv;
use crate::error::Result;
use crate::remote::{RemoteEnv, RemoteServers};
use crate::task::Task;

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
    /// Drives one web episode running on a Cordon server (`--remote`), stepped over its
    /// `/v1/envs` API. `None`: this policy does not (those episodes end as errors).
    fn drive_remote(
        &self,
        episode: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<RemoteEnv>>,
    ) -> Option<BoxFuture<'static, Result<()>>> {
        let _ = (episode, env);
        None
    }
    /// Writes the code of a code episode (none: code tasks are skipped with a note).
    fn write_code(&self, task: Arc<Task>) -> Option<BoxFuture<'static, Result<String>>> {
        let _ = task;
        None
    }
    /// Drives one desktop episode, on the display's own thread (so the future need not be
    /// `Send`); the checker scores it afterwards. `None`: this policy does not drive
    /// desktop tasks (they end as errors).
    #[cfg(feature = "desktop")]
    fn drive_desktop<'a>(
        &'a self,
        episode: EpisodeSpec,
        env: &'a mut crate::desktop_env::DesktopEnv,
    ) -> Option<LocalBoxFuture<'a, Result<()>>> {
        let _ = (episode, env);
        None
    }
}

/// One episode of a run, as a driver sees it.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    pub id: String,
    pub task: Arc<Task>,
    pub seed: u64,
    /// What the policy is asked to do: the task's `prompt`, or the instruction its page
    /// worded for this seed.
    pub instruction: String,
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
    /// Run the episodes on these Cordon servers (`/v1/envs`) instead of a local browser.
    pub remote: Option<Arc<RemoteServers>>,
    /// The caller's own settings, recorded in `run.json` as `settings` (a command line
    /// reads them back to resume the run as it was started).
    pub settings: serde_json::Value,
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
            remote: None,
            settings: serde_json::Value::Null,
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

    /// Spreads the episodes over these servers (see [`RemoteServers`]).
    pub fn remote(mut self, servers: Option<Arc<RemoteServers>>) -> Self {
        self.remote = servers;
        self
    }

    /// Recorded in `run.json` as `settings`.
    pub fn settings(mut self, settings: serde_json::Value) -> Self {
        self.settings = settings;
        self
    }

    pub fn progress_bar(mut self, on: bool) -> Self {
        self.progress_bar = on;
        self
    }
}

pub(crate) fn policy_name(policy: &Policy) -> String {
    match policy {
        Policy::Script => "script".into(),
        Policy::Driver(d) => d.name().into(),
    }
}
