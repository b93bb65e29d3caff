//! A benchmark run: every (task, seed) of a suite is an episode; episodes run in parallel
//! on `jobs` workers, each taking consecutive episodes (`shares`), each on its own isolated
//! session (a web episode may start over a session an earlier one ended, with its document,
//! cookies and storage cleared, or start in place on the page an earlier episode of the
//! same task left: see `web_reset`); each finished episode is written to
//! `RUN_DIR/episodes/<id>/` at once, so a run that stops can be resumed and only the
//! episodes without a record run again. At the end `results.json` and `report.html` are
//! written.

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
use crate::shares::Shares;
use crate::task::{Suite, SuiteSource, TaskEntry};

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
        "settings": options.settings,
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
    // `jobs` workers, each running its share of consecutive episodes (see `shares`), each
    // episode in a task of its own so that one that panics costs only itself.
    let jobs = options.jobs.max(1);
    let shares = Arc::new(Shares::new(todo, jobs));
    let entries = Arc::new(suite.entries.clone());
    let mut set = tokio::task::JoinSet::new();
    for worker in 0..jobs {
        let shares = shares.clone();
        let entries = entries.clone();
        let engines = engines.clone();
        let policy = options.policy.clone();
        let episodes_dir = episodes_dir.clone();
        let dpr = options.dpr;
        let remote = options.remote.clone();
        let progress = progress.clone();
        set.spawn(async move {
            let mut done = Vec::new();
            while let Some((id, index, seed)) = shares.next(worker) {
                let episode = run_one(EpisodeJob {
                    entry: entries[index].clone(),
                    engines: engines.clone(),
                    policy: policy.clone(),
                    dir: episodes_dir.join(&id),
                    id,
                    seed,
                    dpr,
                    remote: remote.clone(),
                    progress: progress.clone(),
                });
                match tokio::spawn(episode).await {
                    Ok(result) => done.push(result),
                    Err(e) => eprintln!("bench: an episode task failed: {e}"),
                }
            }
            done
        });
    }
    let mut results = kept;
    let mut ran = 0;
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(done) => {
                ran += done.len();
                results.extend(done);
            }
            Err(e) => eprintln!("bench: a worker failed: {e}"),
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

/// One episode of a run, with what it needs from the run.
struct EpisodeJob {
    entry: TaskEntry,
    engines: Arc<Engines>,
    policy: Policy,
    dir: std::path::PathBuf,
    id: String,
    seed: u64,
    dpr: Option<f64>,
    remote: Option<Arc<crate::remote::RemoteServers>>,
    progress: Arc<Mutex<Progress>>,
}

/// Runs one episode (here or on a remote server) and records it.
async fn run_one(job: EpisodeJob) -> EpisodeResult {
    let EpisodeJob {
        entry,
        engines,
        policy,
        dir,
        id,
        seed,
        dpr,
        remote,
        progress,
    } = job;
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
