//! A benchmark run: every (task, seed) of a suite is an episode; episodes run in parallel
//! (at most `jobs` at once), each on its own isolated session (a web episode may start over
//! a session an earlier one ended, with its document, cookies and storage cleared: see
//! `session_pool`); each finished episode is written to `RUN_DIR/episodes/<id>/` at once,
//! so a run that stops can be resumed and only the episodes without a record run again. At
//! the end `results.json` and `report.html` are written.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::engines::Engines;
use crate::episode::{EpisodeInputs, run_episode};
use crate::error::{BenchError, Result};
use crate::options::policy_name;
use crate::page_server::{PageRoot, PageServer};
use crate::progress::Progress;
use crate::remote::episode::{RemoteInputs, run_remote_episode};
use crate::results::failed;
use crate::session_pool::SessionPool;
use crate::task::{Suite, SuiteSource};

pub use crate::options::{Driver, EpisodeSpec, Policy, RunOptions};
pub use crate::results::{EpisodeResult, Percentiles, RunResults, StepRecord, Summary, summarize};
pub use crate::script::read_script;

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
        sessions: Arc::new(SessionPool::new()),
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
        let remote = options.remote.clone();
        let progress = progress.clone();
        set.spawn(async move {
            let _permit = limit.acquire_owned().await;
            let result = match (entry.task, &remote) {
                (Err(reason), _) => failed(&id, &entry.id, seed, reason, false),
                (Ok(task), Some(servers)) => {
                    run_remote_episode(RemoteInputs {
                        servers,
                        policy: &policy,
                        id: &id,
                        task: Arc::new(task),
                        seed,
                        dpr,
                        dir: &dir,
                    })
                    .await
                }
                (Ok(task), None) => {
                    let task = Arc::new(task);
                    run_episode(EpisodeInputs {
                        engines: &engines,
                        policy: &policy,
                        id: &id,
                        task,
                        seed,
                        dpr,
                        dir: &dir,
                    })
                    .await
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
    engines.sessions.close_all().await;
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
