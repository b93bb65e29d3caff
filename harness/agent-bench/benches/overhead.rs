//! What benchmark mode costs on top of the engine, and how fast the built-in suite runs.
//!
//! `cargo bench -p cordon-agent-bench --bench overhead` (env `BENCH_N`, default 100 steps each):
//! 1. the same click step, alternately through `Computer::step` (the raw engine) and
//!    through `WebEnv::step` (decode, engine, gate answers, the reward read from the page,
//!    the trace), on two sessions of one Chromium; prints p50/p90 of both, the difference
//!    of the medians, and the overhead measured inside each env step (its wall time minus
//!    the engine's own total) — the bench overhead per step;
//! 2. the built-in suite with the scripted policy at `--jobs 4`: episodes per minute.
//!
//! Needs Chromium (`/usr/lib/chromium/chromium` or `CORDON_CHROMIUM`). Figures:
//! docs/benchmarks.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark stops on failure"
)]

use std::sync::Arc;
use std::time::Instant;

use cordon_agent_bench::env::{EnvAction, WebEnv};
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::run::{Percentiles, Policy, RunOptions, run_suite};
use cordon_agent_bench::task::Suite;
use cordon_computer::browser::{Browser, BrowserOptions, SessionOptions};
use cordon_computer::display::{DisplaySpec, Size};
use cordon_computer::origin::{OriginPattern, OriginPolicy};
use cordon_computer::{Computer, EngineOptions};
use cordon_protocol::computer::{Vendor, decode};
use serde_json::json;

fn browser_options() -> BrowserOptions {
    let mut options = BrowserOptions::default();
    options.no_sandbox = cordon_computer::browser::running_as_root();
    options
}

async fn raw_step(
    raw: &mut Computer<cordon_computer::browser::BrowserSession>,
    click: &serde_json::Value,
) -> f64 {
    let call = decode(Vendor::Anthropic, click).unwrap();
    let t = Instant::now();
    raw.step(call, None).await.unwrap();
    t.elapsed().as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let browser = Browser::launch(browser_options()).await.unwrap();
    let pages = Arc::new(PageServer::start(PageRoot::Builtin).await.unwrap());
    // A click on the form's empty area: the page does nothing, so both paths do the same work.
    let click = json!({"action": "left_click", "coordinate": [900, 560]});

    let mut options = SessionOptions::default();
    options.viewport = Size::new(1280, 800);
    options.display = DisplaySpec::Fixed {
        size: Size::new(1024, 640),
    };
    options.policy = OriginPolicy::new(
        vec![OriginPattern::parse(&pages.origin()).unwrap()],
        Vec::new(),
    );
    options.start_url = Some(pages.url("form/index.html?seed=0"));
    let session = browser.new_session(options).await.unwrap();
    let mut raw = Computer::new(session, EngineOptions::default());

    let task = Arc::new(
        Suite::builtin()
            .entries
            .into_iter()
            .find(|e| e.id == "form")
            .unwrap()
            .task
            .unwrap(),
    );
    let mut env = WebEnv::new(browser.clone(), Some(pages.clone()));
    env.reset(task.clone(), 0).await.unwrap();

    let (mut raw_ms, mut env_ms, mut reward_ms, mut added_ms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n + 5 {
        // Alternate which path goes first, so neither always meets a browser still busy
        // drawing the other's frame.
        let mut r = 0.0;
        if i % 2 == 0 {
            r = raw_step(&mut raw, &click).await;
        }
        let t = Instant::now();
        let step = env
            .step(EnvAction::from_value(click.clone()).unwrap())
            .await
            .unwrap();
        let e = t.elapsed().as_secs_f64() * 1000.0;
        if i % 2 == 1 {
            r = raw_step(&mut raw, &click).await;
        }
        // What the env adds around the engine's own step, measured inside the same call.
        let engine = step.info.timings_ms["total"].as_f64().unwrap_or(0.0);
        if step.done {
            // The form caps episodes at 10 steps: start another one (not timed).
            env.reset(task.clone(), 0).await.unwrap();
        }
        if i >= 5 {
            raw_ms.push(r);
            env_ms.push(e);
            reward_ms.push(step.info.reward_ms);
            added_ms.push(e - engine);
        }
    }
    let (raw_p, env_p, reward_p, added_p) = (
        Percentiles::of(raw_ms),
        Percentiles::of(env_ms),
        Percentiles::of(reward_ms),
        Percentiles::of(added_ms),
    );
    println!(
        "step, {n} each (ms): raw engine p50 {} p90 {} | bench env p50 {} p90 {} | reward read p50 {} p90 {}",
        raw_p.p50, raw_p.p90, env_p.p50, env_p.p90, reward_p.p50, reward_p.p90
    );
    println!(
        "bench overhead per step (difference of the medians): {:.2} ms",
        env_p.p50 - raw_p.p50
    );
    println!(
        "bench overhead per step (env.step wall - the engine's own total, same call): p50 {} p90 {} max {} ms",
        added_p.p50, added_p.p90, added_p.max
    );
    env.close().await;
    raw.into_backend().close().await.unwrap();
    browser.close().await.unwrap();

    let out = tempfile::tempdir().unwrap();
    let runs = 3;
    let mut rates = Vec::new();
    for _ in 0..runs {
        let options = RunOptions::new(
            out.path().join(format!("run{}", rates.len())),
            Policy::Script,
        )
        .jobs(4)
        .progress_bar(false);
        let results = run_suite(&Suite::builtin(), browser_options(), options)
            .await
            .unwrap();
        assert_eq!(results.summary.succeeded, results.summary.episodes);
        // A fresh run runs every episode, so it has a rate.
        rates.push(results.summary.episodes_per_minute.unwrap());
    }
    println!("built-in suite, --jobs 4, {runs} runs: episodes/minute {rates:?}");
}
