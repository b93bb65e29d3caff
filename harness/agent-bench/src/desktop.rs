//! Desktop episodes: the task's program on an isolated X display (Xvfb, `cordon-computer`'s
//! desktop backend), the scripted policy's actions, then the task's checker — a command
//! run on the host with the display's `DISPLAY`/`XAUTHORITY`, in the home directory the
//! program saw — whose exit status is the reward (0: 1, anything else: 0).
//!
//! The display's session is driven on a thread of its own with its own runtime, so its
//! futures need not be `Send`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_computer::desktop::{DesktopOptions, DesktopSession, default_rules};
use cordon_computer::{Computer, EngineOptions, Status};
use cordon_protocol::computer::{Action, ComputerCall};

use crate::env::{EnvAction, Observation, Screen, StepInfo, Trace, TraceStep, absorb};
use crate::error::{BenchError, Result};
use crate::task::{Task, TaskKind};

/// Runs a desktop episode with `script`; returns its trace (reward included).
pub(crate) async fn run(task: Arc<Task>, seed: u64, script: Vec<EnvAction>) -> Result<Trace> {
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("a runtime for the desktop episode", e))?;
        runtime.block_on(episode(task, seed, script))
    })
    .await
    .map_err(|e| BenchError::Policy(format!("the desktop episode's thread failed: {e}")))?
}

async fn episode(task: Arc<Task>, seed: u64, script: Vec<EnvAction>) -> Result<Trace> {
    let TaskKind::Desktop(desktop) = &task.kind else {
        return Err(BenchError::task(&task.id, "not a desktop task"));
    };
    let mut options = DesktopOptions::default();
    options.launch = vec![desktop.launch.clone()];
    options.env = vec![("CORDON_SEED".into(), seed.to_string())];
    let session = DesktopSession::start(options).await?;
    let mut engine = EngineOptions::default();
    engine.rules = default_rules();
    let mut computer = Computer::new(session, engine);
    let outcome = drive(&task, seed, &mut computer, script, &desktop.checker).await;
    let _closed = computer.into_backend().close().await;
    outcome
}

async fn drive(
    task: &Task,
    seed: u64,
    computer: &mut Computer<DesktopSession>,
    script: Vec<EnvAction>,
    checker: &str,
) -> Result<Trace> {
    let scaler = computer.scaler();
    let first = computer
        .step(ComputerCall::native(Action::Screenshot), None)
        .await?;
    let mut last = Observation {
        screenshot: first.screenshot.clone(),
        url: String::new(),
        text: first.text.clone(),
    };
    let started = Instant::now();
    let mut steps = Vec::new();
    for (index, action) in script.into_iter().enumerate() {
        if index as u32 >= task.max_steps || started.elapsed().as_secs_f64() >= task.max_seconds {
            break;
        }
        let t0 = Instant::now();
        let mut info = StepInfo::new(index as u32 + 1, action.clone(), String::new());
        let mut fresh = false;
        match action.decode() {
            Err(error) => info.undecodable(&error),
            Ok(call) => {
                let mut report = computer.step(call, None).await?;
                let mut reports = Vec::new();
                while report.status == Status::ApprovalRequired {
                    let Some(pending) = report.pending.clone() else {
                        break;
                    };
                    reports.push((report, Some(true)));
                    report = computer.approve(&pending.id).await?;
                }
                fresh = report.screenshot.is_some();
                reports.push((report, None));
                absorb(&mut info, &mut last, &reports, scaler);
            }
        }
        info.wall_ms = (t0.elapsed().as_secs_f64() * 100_000.0).round() / 100.0;
        steps.push(TraceStep {
            info,
            reward: 0.0,
            screenshot: if fresh { last.screenshot.clone() } else { None },
        });
    }
    let left =
        Duration::from_secs_f64((task.max_seconds - started.elapsed().as_secs_f64()).max(5.0));
    let reward = check(task, computer.backend(), checker, left).await?;
    if let Some(step) = steps.last_mut() {
        step.reward = reward;
    }
    Ok(Trace {
        task: task.id.clone(),
        seed,
        screen: Screen {
            viewport: scaler.viewport,
            display: scaler.display,
            dpr: scaler.dpr,
        },
        start_url: String::new(),
        first: first.screenshot,
        steps,
        reward,
        done: true,
    })
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
