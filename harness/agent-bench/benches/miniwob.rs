//! MiniWoB++ side by side: the same task types, seeds and scripted policy through Cordon
//! (`run_suite`, every action through the computer engine: screenshot-grounded clicks,
//! settle, capture, the reward read from the page; a worker's next episode of the same
//! task starts in place) and through a plain Playwright loop (`benches/peers/miniwob.mjs`:
//! page.mouse / page.keyboard and a PNG screenshot per action) in two modes: BrowserGym's
//! reset (a fresh context and a load per episode) and MiniWoB++'s own in-page reset (one
//! page per worker, reset in place); episodes per minute at 1 and 4 episodes at once, and
//! the success rate. Cordon runs on `chromium-headless-shell` where it is installed
//! (frames drawn on demand), the peer on `chromium` (`PEER_CHROMIUM` picks another).
//!
//! `cargo bench -p cordon-agent-bench --bench miniwob` (env `BENCH_SEEDS`, default 10 seeds
//! per task type; `BENCH_PEERS=0` skips Playwright, which needs `(cd benches/peers && npm
//! install)`; `BENCH_KEEP=DIR` keeps Cordon's runs there). Each configuration launches its own Chromium, counted in its time. Figures:
//! docs/benchmarks.md, "MiniWoB++".

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark stops on failure"
)]

use std::path::Path;

use cordon_agent_bench::miniwob;
use cordon_agent_bench::run::{Policy, RunOptions, run_suite};
use cordon_agent_bench::task::TaskKind;
use cordon_computer::browser::{BrowserOptions, HEADLESS_SHELL};
use serde_json::{Value, json};

const TASKS: &[&str] = &[
    "click-button",
    "click-link",
    "enter-text",
    "click-checkboxes",
    "focus-text",
    "click-dialog",
];

/// Chromium as `BrowserOptions::default()` starts it, except that the headless shell is
/// preferred where installed (and `CORDON_CHROMIUM` does not choose): MiniWoB++ shows
/// the viewport at its own size, so each frame drawn on demand is the model's image as
/// is (docs/benchmarks.md, "MiniWoB++").
fn browser_options() -> BrowserOptions {
    let mut options = BrowserOptions::default();
    if std::env::var_os("CORDON_CHROMIUM").is_none() && Path::new(HEADLESS_SHELL).exists() {
        options = options.executable(HEADLESS_SHELL);
    }
    options.no_sandbox = cordon_computer::browser::running_as_root();
    options
}

/// What the peer needs to play the same episodes: the pages, each task's start page,
/// viewport and reset hook, the seeds and the planners.
fn peer_config(package: &miniwob::Package, seeds: &[u64]) -> Value {
    let tasks: Vec<Value> = TASKS
        .iter()
        .map(|name| {
            let task = miniwob::task(package, name).unwrap();
            let TaskKind::Web(web) = &task.kind else {
                unreachable!("MiniWoB++ tasks are web tasks")
            };
            let dir = if name.starts_with("flight.") {
                "flight"
            } else {
                "miniwob"
            };
            json!({"id": name, "path": format!("{dir}/{}", web.path.as_deref().unwrap()),
                   "viewport": web.viewport, "reset": web.reset,
                   "reset_in_place": web.reset_in_place, "max_steps": task.max_steps})
        })
        .collect();
    let planners: serde_json::Map<String, Value> = TASKS
        .iter()
        .map(|name| (name.to_string(), json!(miniwob::planner(name).unwrap())))
        .collect();
    json!({"html": package.html(), "tasks": tasks, "seeds": seeds, "planners": planners})
}

/// The Playwright loop in `mode` (`browsergym` or `in-page`).
fn peer(config: &Path, jobs: usize, mode: &str) -> Option<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/peers/miniwob.mjs");
    let out = std::process::Command::new("node")
        .arg(script)
        .arg(config)
        .arg(jobs.to_string())
        .arg(mode)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("peer failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seeds: u64 = std::env::var("BENCH_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let seeds: Vec<u64> = (0..seeds).collect();
    let peers = std::env::var("BENCH_PEERS").map_or(true, |v| v != "0");
    let package = miniwob::ensure_default(&|line: &str| eprintln!("{line}"))
        .await
        .unwrap();
    let spec = format!("miniwob:{}", TASKS.join(","));
    // BENCH_KEEP=DIR keeps the runs (results.json, report.html) there.
    let temp = tempfile::tempdir().unwrap();
    let work = std::env::var_os("BENCH_KEEP").map_or_else(|| temp.path().to_owned(), Into::into);
    let config = work.join("peer.json");
    std::fs::write(&config, peer_config(&package, &seeds).to_string()).unwrap();
    for jobs in [1, 4] {
        let mut suite = miniwob::suite(&package, &spec).unwrap();
        for entry in &mut suite.entries {
            entry.task.as_mut().unwrap().seeds.clone_from(&seeds);
        }
        let out = work.join(format!("cordon-{jobs}"));
        let options = RunOptions::new(out, Policy::Script)
            .jobs(jobs)
            .progress_bar(false);
        let run = run_suite(&suite, browser_options(), options).await.unwrap();
        let s = &run.summary;
        println!(
            "{}",
            json!({"peer": "cordon", "jobs": jobs, "episodes": s.episodes,
                   "succeeded": s.succeeded, "seconds": s.run_seconds,
                   "per_minute": s.episodes_per_minute, "step_ms_p50": s.step_ms.p50,
                   "step_ms_p90": s.step_ms.p90, "episode_ms_p50": s.episode_ms.p50})
        );
        // Where an episode's time goes: its reset (session, page load, MiniWoB++'s start,
        // the first capture) against the rest (the steps and their recording).
        let p50 = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
        };
        let reset = p50(run.episodes.iter().map(|e| e.reset_ms).collect());
        let rest = p50(run
            .episodes
            .iter()
            .map(|e| e.duration_ms - e.reset_ms)
            .collect());
        let steps = run.episodes.iter().map(|e| f64::from(e.steps)).sum::<f64>()
            / run.episodes.len().max(1) as f64;
        let started = |how: &str| {
            run.episodes
                .iter()
                .filter(|e| e.session.as_deref() == Some(how))
                .count()
        };
        println!(
            "{}",
            json!({"peer": "cordon", "jobs": jobs, "reset_ms_p50": reset,
                   "after_reset_ms_p50": rest, "steps_per_episode": steps,
                   "in_place": started("in_place"), "restarted": started("restarted"),
                   "new": started("new")})
        );
        for mode in ["browsergym", "in-page"] {
            if peers && let Some(line) = peer(&config, jobs, mode) {
                println!("{line}");
            }
        }
    }
}
