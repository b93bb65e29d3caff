//! `cordon bench`: runs a task suite through Cordon's engines and writes `results.json` and
//! `report.html` (docs/bench.md).

mod policies;
mod settings;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use cordon_agent_bench::remote::RemoteServers;
use cordon_agent_bench::run::{Policy, RunOptions, run_suite};
use cordon_agent_bench::task::{Suite, SuiteSource};
use cordon_computer::browser::BrowserOptions;

use policies::{ComputerTool, ExternalPolicy, SafetyChecks, UpstreamPolicy};
use settings::RunSettings;

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
    suite: Option<String>,
    /// List the tasks of a suite (`builtin`, `miniwob`, a directory) and exit.
    #[arg(long, value_name = "SUITE", conflicts_with_all = ["out", "resume"])]
    list: Option<String>,
    /// One episode per seed of this list for every task (`0,1,2`), whatever the tasks say.
    #[arg(long, value_name = "N,N,…", value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Who chooses the actions.
    #[arg(long, value_enum)]
    policy: Option<PolicyArg>,
    /// The run directory (created): results.json, report.html, episodes/<id>/.
    #[arg(long, value_name = "RUN_DIR")]
    out: Option<PathBuf>,
    /// Continue a run: episodes already recorded in RUN_DIR are kept, the others run. What
    /// this command line leaves out is the run's own: suite, policy, DPR, seeds, tasks,
    /// remote servers, upstream, model, computer tool, zoom, safety checks (the token
    /// and the upstream key come from the environment again).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "out")]
    resume: Option<PathBuf>,
    /// Episodes at once (each an isolated browser context or sandbox).
    #[arg(long, default_value_t = 1, value_name = "N")]
    jobs: usize,
    /// Run every web task at this device pixel ratio (1 or 2) whatever the task says.
    #[arg(long, value_name = "1|2")]
    dpr: Option<f64>,
    /// Only these tasks (by id; repeatable).
    #[arg(long = "task", value_name = "ID")]
    tasks: Vec<String>,
    /// The model for `--policy upstream`: `anthropic=URL`, `openai-responses=URL` or
    /// `gemini=URL` (its key in CORDON_UPSTREAM_KEY).
    #[arg(long, value_name = "API=URL")]
    upstream: Option<String>,
    /// The model name sent upstream [default: claude-sonnet-4-5].
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Anthropic's computer tool for `--policy upstream` [default: computer_20251124].
    #[arg(long, value_enum, value_name = "TYPE")]
    computer_tool: Option<ComputerTool>,
    /// Offer Anthropic's `zoom` action (`enable_zoom`, or `configs.zoom` of the toolset).
    #[arg(long)]
    enable_zoom: bool,
    /// How an unattended run answers the model's vendor safety checks (OpenAI
    /// `pending_safety_checks`, Gemini `require_confirmation`): `deny` (the default) ends
    /// the episode.
    #[arg(long, value_enum, value_name = "approve|deny")]
    safety_checks: Option<SafetyChecks>,
    /// Run the web episodes on this Cordon server (`cordon serve`) through its `/v1/envs`
    /// API instead of a local browser (repeatable: the episodes are spread over the
    /// servers, each to the one with the fewest of the run's episodes in flight). A server
    /// that cannot be reached is taken out of the run; its episodes are errors.
    #[arg(long = "remote", value_name = "URL")]
    remote: Vec<String>,
    /// Bearer token for the `--remote` servers (their `cordon serve --token`); unused
    /// without `--remote`.
    #[arg(
        long,
        env = "CORDON_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Where `--policy external` serves the episodes.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "HOST:PORT")]
    addr: String,
    /// Path of the Chromium binary.
    #[arg(long, env = "CORDON_CHROMIUM", value_name = "PATH")]
    chromium: Option<PathBuf>,
    /// Start Chromium without its own sandbox (needed when running as root).
    #[arg(long)]
    no_browser_sandbox: bool,
    /// Plain progress lines even on a terminal.
    #[arg(long)]
    no_progress_bar: bool,
}

/// The suite named on the command line.
async fn load_suite(name: &str) -> anyhow::Result<Suite> {
    use cordon_agent_bench::miniwob;
    if name == "builtin" {
        return Ok(Suite::builtin());
    }
    if name == miniwob::SUITE || name.starts_with("miniwob:") {
        let package = miniwob::ensure_default(&|line: &str| eprintln!("bench: {line}")).await?;
        return Ok(miniwob::suite(&package, name)?);
    }
    Ok(Suite::load(std::path::Path::new(name))?)
}

/// `--list SUITE`: one line per task, `id  seeds  what the scripted policy does`.
fn print_tasks(suite: &Suite) {
    for entry in &suite.entries {
        match &entry.task {
            Ok(task) => {
                let scripted = if cordon_agent_bench::miniwob::is_package_task(task) {
                    if cordon_agent_bench::miniwob::knows(&task.id) {
                        "  (scripted policy: solves it)"
                    } else {
                        ""
                    }
                } else {
                    ""
                };
                println!("{}\tseeds {:?}{scripted}", entry.id, task.seeds);
            }
            Err(reason) => println!("{}\tcannot run: {reason}", entry.id),
        }
    }
}

pub async fn run(mut args: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.list {
        print_tasks(&load_suite(name).await?);
        return Ok(ExitCode::SUCCESS);
    }
    let (out, resume) = match (&args.out, &args.resume) {
        (Some(out), None) => (out.clone(), false),
        (None, Some(dir)) => (dir.clone(), true),
        _ => bail!("give --out RUN_DIR for a new run, or --resume RUN_DIR to continue one"),
    };
    let earlier: serde_json::Value = if resume {
        let text = std::fs::read_to_string(out.join("run.json")).with_context(|| {
            format!(
                "{} is not a bench run directory (no run.json)",
                out.display()
            )
        })?;
        serde_json::from_str(&text).context("run.json")?
    } else {
        serde_json::Value::Null
    };
    RunSettings::recorded(&earlier)?.fill(&mut args)?;
    let suite_name = args
        .suite
        .clone()
        .or_else(|| earlier["suite"].as_str().map(str::to_owned))
        .context("--suite DIR|builtin|miniwob is required")?;
    let policy = match args.policy {
        Some(p) => p,
        None => match earlier["policy"].as_str() {
            Some("script") => PolicyArg::Script,
            Some("external") => PolicyArg::External,
            Some("upstream") => PolicyArg::Upstream,
            _ => bail!("--policy script|external|upstream is required"),
        },
    };
    let dpr = args.dpr.or_else(|| earlier["dpr"].as_f64());
    if let Some(d) = dpr
        && d != 1.0
        && d != 2.0
    {
        bail!("--dpr must be 1 or 2, not {d}");
    }
    let mut suite = load_suite(&suite_name).await?;
    if !args.seeds.is_empty() {
        for entry in &mut suite.entries {
            if let Ok(task) = &mut entry.task {
                task.seeds.clone_from(&args.seeds);
            }
        }
    }
    if !args.tasks.is_empty() {
        let unknown: Vec<&String> = args
            .tasks
            .iter()
            .filter(|t| !suite.entries.iter().any(|e| &e.id == *t))
            .collect();
        if !unknown.is_empty() {
            let known: Vec<&str> = suite.entries.iter().map(|e| e.id.as_str()).collect();
            bail!("no task {unknown:?} in the suite; it has {known:?}");
        }
        suite.entries.retain(|e| args.tasks.contains(&e.id));
    }
    for entry in &suite.entries {
        if let Err(reason) = &entry.task {
            eprintln!("bench: task {} cannot run: {reason}", entry.id);
        }
    }
    if !resume && holds_a_run(&out) {
        bail!(
            "{dir} already holds a bench run; a new run there would overwrite it: continue it \
             with `cordon bench --resume {dir}`, or give --out a new directory",
            dir = out.display()
        );
    }
    let remote = remote_servers(&args, policy, &suite)?;
    let mut browser = BrowserOptions::default();
    if let Some(path) = &args.chromium {
        browser = browser.executable(path);
    }
    browser.no_sandbox = args.no_browser_sandbox;
    let policy = match policy {
        PolicyArg::Script => Policy::Script,
        PolicyArg::Upstream => {
            let spec = args
                .upstream
                .as_deref()
                .context("--policy upstream needs --upstream API=URL")?;
            Policy::Driver(Arc::new(UpstreamPolicy::new(
                spec,
                args.model.as_deref().unwrap_or("claude-sonnet-4-5"),
                args.computer_tool.unwrap_or(ComputerTool::Computer20251124),
                args.enable_zoom,
                args.safety_checks.unwrap_or(SafetyChecks::Deny),
            )?))
        }
        PolicyArg::External => Policy::Driver(Arc::new(ExternalPolicy::start(&args.addr).await?)),
    };
    let options = RunOptions::new(out.clone(), policy)
        .jobs(args.jobs)
        .dpr(dpr)
        .resume(resume)
        .settings(RunSettings::of(&args).to_json())
        .remote(remote)
        .progress_bar(
            !args.no_progress_bar && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        );
    let results = run_suite(&suite, browser, options).await?;
    print_summary(&results);
    eprintln!(
        "bench: wrote {} and {}",
        out.join("results.json").display(),
        out.join("report.html").display()
    );
    Ok(if results.summary.succeeded == results.summary.episodes {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--remote URL …`: the servers the episodes run on, after checking that they can run
/// them (the policy drives them over HTTP, the servers know the suite).
fn remote_servers(
    args: &BenchArgs,
    policy: PolicyArg,
    suite: &Suite,
) -> anyhow::Result<Option<Arc<RemoteServers>>> {
    if args.remote.is_empty() {
        return Ok(None);
    }
    if policy == PolicyArg::External {
        bail!(
            "--policy external serves the episodes itself; an outside agent can use the \
             servers' /v1/envs directly instead of --remote"
        );
    }
    if matches!(suite.source, SuiteSource::Dir(_))
        && !suite
            .entries
            .iter()
            .filter_map(|e| e.task.as_ref().ok())
            .all(cordon_agent_bench::miniwob::is_package_task)
    {
        bail!(
            "the --remote servers know the built-in and miniwob suites only (their tasks are \
             named, not sent); run a suite directory without --remote"
        );
    }
    let servers =
        RemoteServers::new(&args.remote, args.token.clone()).map_err(anyhow::Error::msg)?;
    Ok(Some(Arc::new(servers)))
}

/// Whether `dir` holds (part of) a bench run: its metadata, results or episodes.
fn holds_a_run(dir: &Path) -> bool {
    ["run.json", "results.json", "episodes"]
        .iter()
        .any(|name| dir.join(name).exists())
}

/// The table of episodes and the summary line; the rate is the run's own, over the
/// episodes this invocation ran (a resume keeps the others).
fn print_summary(results: &cordon_agent_bench::run::RunResults) {
    let remote = results.episodes.iter().any(|e| e.server.is_some());
    println!(
        "{:<24} {:>8} {:>7} {:>6} {:>10}  {}note",
        "episode",
        "result",
        "reward",
        "steps",
        "ms",
        if remote { "server  " } else { "" }
    );
    for e in &results.episodes {
        let verdict = if e.success {
            "success"
        } else if e.error.is_some() {
            "error"
        } else {
            "failed"
        };
        let note = e.error.clone().unwrap_or_else(|| {
            if e.truncated {
                "hit its cap".into()
            } else {
                String::new()
            }
        });
        let server = match (&e.server, remote) {
            (Some(server), _) => format!("{server}  "),
            (None, true) => "-  ".to_owned(),
            (None, false) => String::new(),
        };
        println!(
            "{:<24} {:>8} {:>7} {:>6} {:>10.0}  {server}{}",
            e.id, verdict, e.reward, e.steps, e.duration_ms, note
        );
    }
    let s = &results.summary;
    let pace = match s.episodes_per_minute {
        None => "nothing left to run".to_owned(),
        Some(rate) if s.episodes_run == s.episodes => {
            format!("{rate:.1} episodes/min over {} s", s.run_seconds)
        }
        Some(rate) => format!(
            "{} episodes run, {rate:.1}/min over {} s",
            s.episodes_run, s.run_seconds
        ),
    };
    println!(
        "\n{}/{} succeeded ({:.0}%), mean reward {}, mean steps {}; step ms p50 {} p90 {} p99 {}; \
         {pace}",
        s.succeeded,
        s.episodes,
        s.success_rate * 100.0,
        s.mean_reward,
        s.mean_steps,
        s.step_ms.p50,
        s.step_ms.p90,
        s.step_ms.p99,
    );
}
