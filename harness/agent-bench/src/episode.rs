//! One episode, start to end: reset the task's environment, let the policy act (the script
//! or a driver), read the reward, and record the trace and its screenshots.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cordon_computer::image::EncodedImage;

use crate::code::CodeEnv;
use crate::engines::Engines;
use crate::env::{SUCCESS, Trace, WebEnv};
use crate::error::{BenchError, Result};
use crate::options::{EpisodeSpec, Policy};
use crate::policy_env::play_script;
use crate::results::{EpisodeResult, StepRecord, failed, round2};
use crate::script::read_script;
use crate::task::{Task, TaskKind};

fn kind_name(task: &Task) -> &'static str {
    match task.kind {
        TaskKind::Web(_) => "web",
        TaskKind::Code(_) => "code",
        TaskKind::Desktop(_) => "desktop",
    }
}

/// What one episode runs with: the engines and policy of the run, the episode's id, task
/// and seed, the run's DPR, and the folder its record goes to.
pub(crate) struct EpisodeInputs<'a> {
    pub engines: &'a Engines,
    pub policy: &'a Policy,
    pub id: &'a str,
    pub task: Arc<Task>,
    pub seed: u64,
    pub dpr: Option<f64>,
    pub dir: &'a Path,
}

pub(crate) async fn run_episode(inputs: EpisodeInputs<'_>) -> EpisodeResult {
    let (task, seed) = (&inputs.task, inputs.seed);
    let t0 = Instant::now();
    let mut result = failed(inputs.id, &task.id, seed, String::new(), false);
    result.error = None;
    result.kind = kind_name(task).into();
    result.prompt = task.prompt.clone();
    let (engines, policy) = (inputs.engines, inputs.policy);
    let outcome = match &task.kind {
        TaskKind::Web(_) => web_episode(&inputs, &mut result).await,
        TaskKind::Code(_) => code_episode(engines, policy, task.clone(), seed, &mut result).await,
        TaskKind::Desktop(_) => {
            desktop_episode(
                policy,
                inputs.id,
                task.clone(),
                seed,
                inputs.dir,
                &mut result,
            )
            .await
        }
    };
    if let Err(error) = outcome {
        result.fatal = matches!(error, BenchError::Browser(_) | BenchError::Sandbox(_));
        result.error = Some(error.to_string());
        result.success = false;
    }
    result.duration_ms = round2(t0.elapsed().as_secs_f64() * 1000.0);
    result
}

async fn web_episode(inputs: &EpisodeInputs<'_>, result: &mut EpisodeResult) -> Result<()> {
    let EpisodeInputs {
        engines,
        policy,
        id,
        ref task,
        seed,
        dpr,
        dir,
    } = *inputs;
    // MiniWoB++ pages have no script: the scripted policy reads them as it goes.
    let solver = matches!(policy, Policy::Script) && crate::miniwob::is_package_task(task);
    let script = match policy {
        Policy::Script if !solver => Some(read_script(task)?),
        _ => None,
    };
    let browser = engines.browser().await?;
    let mut env = WebEnv::new(browser, Some(engines.pages.clone())).with_dpr(dpr);
    // `CORDON_BENCH_REUSE=0`: a new session per episode, to compare against.
    if std::env::var("CORDON_BENCH_REUSE").map_or(true, |v| v != "0") {
        env = env.with_pool(engines.sessions.clone());
    }
    let env = Arc::new(tokio::sync::Mutex::new(env));
    let tr = Instant::now();
    env.lock().await.reset(task.clone(), seed).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    result.session = env
        .lock()
        .await
        .session_start()
        .map(|s| s.name().to_owned());
    let instruction = env
        .lock()
        .await
        .instruction()
        .unwrap_or_else(|| task.prompt.clone());
    result.prompt.clone_from(&instruction);
    let driven = match (policy, script) {
        (Policy::Script, None) if solver => {
            crate::miniwob::play(&mut *env.lock().await, &task.id).await
        }
        (Policy::Script, Some(script)) => play_script(&mut *env.lock().await, script).await,
        (Policy::Driver(driver), _) => {
            let spec = EpisodeSpec {
                id: id.to_owned(),
                task: task.clone(),
                seed,
                instruction,
            };
            driver.drive(spec, env.clone()).await
        }
        (Policy::Script, None) => Ok(()),
    };
    let mut env = env.lock().await;
    // The final word is the page's, whatever the policy said.
    let reward = match &driven {
        Ok(()) => env.evaluate().await,
        Err(_) => Ok(0.0),
    };
    if let Some(trace) = env.trace() {
        record_trace(&trace, dir, result)?;
    }
    env.close().await;
    driven?;
    result.reward = reward?;
    result.success = result.reward >= SUCCESS;
    Ok(())
}

#[cfg(feature = "desktop")]
async fn desktop_episode(
    policy: &Policy,
    id: &str,
    task: Arc<Task>,
    seed: u64,
    dir: &Path,
    result: &mut EpisodeResult,
) -> Result<()> {
    use crate::desktop::DesktopPolicy;
    let played = match policy {
        Policy::Script => DesktopPolicy::Script(read_script(&task)?),
        Policy::Driver(driver) => DesktopPolicy::Driver(
            driver.clone(),
            EpisodeSpec {
                id: id.to_owned(),
                task: task.clone(),
                seed,
                instruction: task.prompt.clone(),
            },
        ),
    };
    let tr = Instant::now();
    let trace = crate::desktop::run(task, seed, played).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    record_trace(&trace, dir, result)?;
    result.start_url = None;
    result.reward = trace.reward;
    result.success = trace.reward >= SUCCESS;
    Ok(())
}

#[cfg(not(feature = "desktop"))]
async fn desktop_episode(
    _policy: &Policy,
    _id: &str,
    task: Arc<Task>,
    _seed: u64,
    _dir: &Path,
    _result: &mut EpisodeResult,
) -> Result<()> {
    Err(BenchError::task(
        &task.id,
        "this build has no desktop backend (the `desktop` feature)",
    ))
}

fn save_image(dir: &Path, name: &str, image: &EncodedImage) -> Result<String> {
    let file = format!("{name}.{}", image.format.extension());
    std::fs::write(dir.join(&file), &image.data)
        .map_err(|e| BenchError::io(format!("writing {}", dir.join(&file).display()), e))?;
    Ok(file)
}

pub(crate) fn record_trace(trace: &Trace, dir: &Path, result: &mut EpisodeResult) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    result.start_url = Some(trace.start_url.clone());
    result.screen = Some(serde_json::json!({
        "viewport": trace.screen.viewport, "display": trace.screen.display, "dpr": trace.screen.dpr,
    }));
    let mut shown = match &trace.first {
        Some(image) => Some(save_image(dir, "step-0000", image)?),
        None => None,
    };
    result.first.clone_from(&shown);
    for step in &trace.steps {
        let after = match &step.screenshot {
            Some(image) => Some(save_image(
                dir,
                &format!("step-{:04}", step.info.step),
                image,
            )?),
            None => shown.clone(),
        };
        result.trace.push(StepRecord {
            info: step.info.clone(),
            reward: step.reward,
            before: shown.clone(),
            after: after.clone(),
        });
        shown = after;
    }
    result.steps = u32::try_from(trace.steps.len()).unwrap_or(u32::MAX);
    result.truncated = trace.steps.last().is_some_and(|s| s.info.truncated);
    Ok(())
}

async fn code_episode(
    engines: &Engines,
    policy: &Policy,
    task: Arc<Task>,
    seed: u64,
    result: &mut EpisodeResult,
) -> Result<()> {
    let TaskKind::Code(code_task) = &task.kind else {
        return Ok(());
    };
    let code = match policy {
        Policy::Script => {
            let ext = if code_task.language.starts_with("j") {
                "js"
            } else {
                "py"
            };
            let name = format!("solution.{ext}");
            let bytes = task.file(&name).ok_or_else(|| {
                BenchError::task(&task.id, format!("the scripted policy needs its {name}"))
            })?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Policy::Driver(driver) => match driver.write_code(task.clone()) {
            Some(future) => future.await?,
            None => {
                return Err(BenchError::task(
                    &task.id,
                    format!("the {} policy does not run code tasks", driver.name()),
                ));
            }
        },
    };
    let mut env = CodeEnv::new(engines.sandbox().await?);
    let tr = Instant::now();
    env.reset(task.clone(), seed).await?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    let transition = env.step(&code).await?;
    result.reward = transition.reward;
    result.success = transition.reward >= SUCCESS;
    result.steps = 1;
    result.code.push(transition);
    Ok(())
}
