//! `cordon bench`'s command line.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::policies::{ComputerTool, SafetyChecks};

/// Who chooses the actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Each task's own script: `script.jsonl` (web) or `solution.py` (code).
    Script,
    /// Another agent drives each episode over HTTP (`/v1/envs/{id}/step`); bench only
    /// scores. Bench serves the episodes itself on `--addr` and prints each one's URL.
    External,
    /// A model through an upstream API (`--upstream anthropic=URL | openai-responses=URL |
    /// gemini=URL`) drives web and desktop episodes with its vendor's computer tool.
    Upstream,
}

/// Run a task suite (web and code tasks) and write RUN_DIR/results.json and a
/// self-contained RUN_DIR/report.html.
#[derive(Debug, Args)]
#[command(after_long_help = "\
Each (task, seed) is an episode on its own isolated browser session or sandbox. The reward is
read by Cordon from the page (a JavaScript predicate or a DOM query) or from the task's checker
program, never from the policy. Episodes run in parallel (--jobs); each finished one is recorded
at once, so --resume RUN_DIR runs only the rest. Exit status: 0 when every episode succeeded,
1 otherwise, 2 on bad input. The suite format: docs/bench.md.

Examples:
  cordon bench --suite builtin --policy script --out runs/smoke --no-browser-sandbox
  cordon bench --suite ./my-suite --policy script --out runs/a --jobs 4 --dpr 2
  cordon bench --resume runs/a
  cordon bench --list miniwob
  cordon bench --suite miniwob:click-button,enter-text --seeds 0,1,2 --policy script --out runs/mw
  CORDON_UPSTREAM_KEY=... cordon bench --suite builtin --policy upstream \\
      --upstream anthropic=https://api.anthropic.com --out runs/model
  CORDON_UPSTREAM_KEY=... cordon bench --suite builtin --policy upstream --model gpt-5.4 \\
      --upstream openai-responses=https://api.openai.com/v1 --safety-checks approve --out runs/oa
  cordon bench --suite builtin --policy external --out runs/agent   # prints each episode's URL
  cordon bench --suite builtin --policy script --jobs 4 --out runs/spread \\
      --remote http://10.0.0.5:7420 --remote http://10.0.0.6:7420 --token $CORDON_TOKEN")]
pub struct BenchArgs {
    /// `builtin` (web tasks compiled into cordon: forms, dialogs, scrolling, autocomplete,
    /// drag), `miniwob` or `miniwob:TASK,TASK` (MiniWoB++'s published pages, fetched into
    /// the cache on first use), or a suite directory: one sub-directory per task with a
    /// task.json.
    #[arg(long, value_name = "DIR|builtin|miniwob[:TASK,…]")]
    pub(super) suite: Option<String>,
    /// List the tasks of a suite (`builtin`, `miniwob`, a directory) and exit.
    #[arg(long, value_name = "SUITE", conflicts_with_all = ["out", "resume"])]
    pub(super) list: Option<String>,
    /// One episode per seed of this list for every task (`0,1,2`), whatever the tasks say.
    #[arg(long, value_name = "N,N,…", value_delimiter = ',')]
    pub(super) seeds: Vec<u64>,
    /// Who chooses the actions.
    #[arg(long, value_enum)]
    pub(super) policy: Option<PolicyArg>,
    /// The run directory (created): results.json, report.html, episodes/<id>/.
    #[arg(long, value_name = "RUN_DIR")]
    pub(super) out: Option<PathBuf>,
    /// Continue a run: episodes already recorded in RUN_DIR are kept, the others run. What
    /// this command line leaves out is the run's own: suite, policy, DPR, seeds, tasks,
    /// remote servers, upstream, model, computer tool, zoom, safety checks (the token
    /// and the upstream key come from the environment again).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "out")]
    pub(super) resume: Option<PathBuf>,
    /// Episodes at once (each an isolated browser context or sandbox).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(super) jobs: usize,
    /// Run every web task at this device pixel ratio (1 or 2) whatever the task says.
    #[arg(long, value_name = "1|2")]
    pub(super) dpr: Option<f64>,
    /// Only these tasks (by id; repeatable).
    #[arg(long = "task", value_name = "ID")]
    pub(super) tasks: Vec<String>,
    /// The model for `--policy upstream`: `anthropic=URL`, `openai-responses=URL` or
    /// `gemini=URL` (its key in CORDON_UPSTREAM_KEY).
    #[arg(long, value_name = "API=URL")]
    pub(super) upstream: Option<String>,
    /// The model name sent upstream [default: claude-sonnet-4-5].
    #[arg(long, value_name = "NAME")]
    pub(super) model: Option<String>,
    /// Anthropic's computer tool for `--policy upstream` [default: computer_20251124].
    #[arg(long, value_enum, value_name = "TYPE")]
    pub(super) computer_tool: Option<ComputerTool>,
    /// Offer Anthropic's `zoom` action (`enable_zoom`, or `configs.zoom` of the toolset);
    /// `--enable-zoom=false` turns it off for a resumed run that had it.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "true|false")]
    pub(super) enable_zoom: Option<bool>,
    /// How an unattended run answers the model's vendor safety checks (OpenAI
    /// `pending_safety_checks`, Gemini `require_confirmation`): `deny` (the default) ends
    /// the episode.
    #[arg(long, value_enum, value_name = "approve|deny")]
    pub(super) safety_checks: Option<SafetyChecks>,
    /// Run the web episodes on this Cordon server (`cordon serve`) through its `/v1/envs`
    /// API instead of a local browser (repeatable: the episodes are spread over the
    /// servers, each to the one with the fewest of the run's episodes in flight). A server
    /// that cannot be reached is taken out of the run; its episodes are errors.
    #[arg(long = "remote", value_name = "URL")]
    pub(super) remote: Vec<String>,
    /// Run the web episodes on a local browser, even when resuming a run that used
    /// `--remote` servers.
    #[arg(long, conflicts_with = "remote")]
    pub(super) local: bool,
    /// Bearer token for the `--remote` servers (their `cordon serve --token`); unused
    /// without `--remote`.
    #[arg(
        long,
        env = "CORDON_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub(super) token: Option<String>,
    /// Where `--policy external` serves the episodes.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "HOST:PORT")]
    pub(super) addr: String,
    /// Path of the Chromium binary.
    #[arg(long, env = "CORDON_CHROMIUM", value_name = "PATH")]
    pub(super) chromium: Option<PathBuf>,
    /// Start Chromium without its own sandbox (needed when running as root).
    #[arg(long)]
    pub(super) no_browser_sandbox: bool,
    /// Plain progress lines even on a terminal.
    #[arg(long)]
    pub(super) no_progress_bar: bool,
}
