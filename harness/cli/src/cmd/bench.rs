//! `cordon bench`: runs a task suite through Cordon's engines and writes `results.json` and
//! `report.html` (docs/bench.md).

mod args;
mod policies;
mod settings;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use cordon_agent_bench::remote::RemoteServers;
use cordon_agent_bench::run::{Policy, RunOptions, run_suite};
use cordon_agent_bench::task::{Suite, SuiteSource};
use cordon_computer::browser::BrowserOptions;

pub use args::BenchArgs;
use args::PolicyArg;
use policies::{ComputerTool, ExternalPolicy, SafetyChecks, UpstreamPolicy};
use settings::RunSettings;

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
                args.enable_zoom.unwrap_or(false),
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
