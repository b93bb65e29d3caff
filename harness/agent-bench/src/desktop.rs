//! Desktop episodes: the task's program on an isolated X display (Xvfb, `cordon-computer`'s
//! desktop backend), played by the scripted policy or a driver (a model through an upstream
//! API) over [`DesktopEnv`], then the task's checker — a command run on the host with the
//! display's `DISPLAY`/`XAUTHORITY`, in the home directory the program saw — whose exit
//! status is the reward (0: 1, anything else: 0).
//!
//! The display's session is driven on a thread of its own with its own runtime, so its
//! futures need not be `Send`.

use std::sync::Arc;
use std::time::Duration;

use cordon_computer::desktop::{DesktopOptions, DesktopSession, default_rules};
use cordon_computer::{Computer, EngineOptions};

use crate::desktop_env::DesktopEnv;
use crate::env::{EnvAction, Trace};
use crate::error::{BenchError, Result};
use crate::options::{Driver, EpisodeSpec};
use crate::task::{Task, TaskKind};

/// Who plays a desktop episode.
pub(crate) enum DesktopPolicy {
    /// The task's `script.jsonl`.
    Script(Vec<EnvAction>),
    /// A driver, on the display's thread.
    Driver(Arc<dyn Driver>, EpisodeSpec),
}

/// Runs a desktop episode under `policy`; returns its trace (reward included).
pub(crate) async fn run(task: Arc<Task>, seed: u64, policy: DesktopPolicy) -> Result<Trace> {
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("a runtime for the desktop episode", e))?;
        runtime.block_on(episode(task, seed, policy))
    })
    .await
    .map_err(|e| BenchError::Policy(format!("the desktop episode's thread failed: {e}")))?
}

async fn episode(task: Arc<Task>, seed: u64, policy: DesktopPolicy) -> Result<Trace> {
    let TaskKind::Desktop(desktop) = &task.kind else {
        return Err(BenchError::task(&task.id, "not a desktop task"));
    };
    let mut options = DesktopOptions::default();
    options.launch = vec![desktop.launch.clone()];
    options.env = vec![("CORDON_SEED".into(), seed.to_string())];
    let session = DesktopSession::start(options).await?;
    let mut engine = EngineOptions::default();
    engine.rules = default_rules();
    let mut env = DesktopEnv::new(task.clone(), Computer::new(session, engine));
    let played = match env.open().await {
        Ok(()) => play(&task, &mut env, policy).await,
        Err(error) => Err(error),
    };
    let outcome = match played {
        Ok(()) => {
            let left = Duration::from_secs_f64(env.seconds_left().max(5.0));
            check(&task, env.session(), &desktop.checker, left)
                .await
                .map(|reward| env.trace(seed, reward))
        }
        Err(error) => Err(error),
    };
    env.close().await;
    outcome
}

async fn play(task: &Task, env: &mut DesktopEnv, policy: DesktopPolicy) -> Result<()> {
    match policy {
        DesktopPolicy::Script(script) => {
            for action in script {
                if env.is_done() {
                    break;
                }
                env.step(action).await?;
            }
            Ok(())
        }
        DesktopPolicy::Driver(driver, spec) => match driver.drive_desktop(spec, env) {
            Some(driven) => driven.await,
            None => Err(BenchError::task(
                &task.id,
                format!("the {} policy does not drive desktop tasks", driver.name()),
            )),
        },
    }
}

/// Runs the checker (`sh -c CHECKER`) with the display's environment; exit 0 is 1.
async fn check(
    task: &Task,
    session: &DesktopSession,
    checker: &str,
    limit: Duration,
) -> Result<f64> {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(checker)
        .current_dir(session.home())
        .env("HOME", session.home())
        .envs(session.x_env())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let status = tokio::time::timeout(limit, command.status())
        .await
        .map_err(|_| BenchError::task(&task.id, "its checker did not finish in time"))?
        .map_err(|e| BenchError::task(&task.id, format!("its checker did not run: {e}")))?;
    Ok(if status.success() { 1.0 } else { 0.0 })
}
