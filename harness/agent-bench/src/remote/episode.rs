//! One episode on a Cordon server (`--remote`): take the least busy server, create the
//! task's environment there, let the policy act through `/v1/envs/{id}/step`, read the
//! reward, record the trace as a local episode's, and close the environment.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::env::SUCCESS;
use crate::episode::record_trace;
use crate::error::{BenchError, Result};
use crate::options::{EpisodeSpec, Policy};
use crate::policy_env::play_script;
use crate::results::{EpisodeResult, failed, round2};
use crate::script::read_script;
use crate::task::{Task, TaskKind};

use super::env::RemoteEnv;
use super::servers::{Lease, RemoteServers};

/// What one remote episode runs with.
pub(crate) struct RemoteInputs<'a> {
    pub servers: &'a Arc<RemoteServers>,
    pub policy: &'a Policy,
    pub id: &'a str,
    pub task: Arc<Task>,
    pub seed: u64,
    pub dpr: Option<f64>,
    pub dir: &'a Path,
}

/// The suite a server knows `task` by: MiniWoB++'s pages or the built-in suite.
fn suite_of(task: &Task) -> &'static str {
    if crate::miniwob::is_package_task(task) {
        crate::miniwob::SUITE
    } else {
        "builtin"
    }
}

pub(crate) async fn run_remote_episode(inputs: RemoteInputs<'_>) -> EpisodeResult {
    let t0 = Instant::now();
    let task = inputs.task.clone();
    let mut result = failed(inputs.id, &task.id, inputs.seed, String::new(), false);
    result.error = None;
    result.kind = "web".into();
    result.prompt = task.prompt.clone();
    match inputs.servers.pick() {
        Err(none_left) => {
            result.fatal = true;
            result.error = Some(none_left);
        }
        Ok(lease) => {
            result.server = Some(lease.client().base().to_owned());
            let mut unreachable = None;
            if let Err(error) = play(&lease, &inputs, &mut result, &mut unreachable).await {
                result.error = Some(error.to_string());
                result.success = false;
                result.reward = 0.0;
                // The server's fault, not the task's: `--resume` runs the episode again.
                if let Some(reason) = unreachable {
                    result.fatal = true;
                    lease.mark_down(&reason);
                }
            }
        }
    }
    result.duration_ms = round2(t0.elapsed().as_secs_f64() * 1000.0);
    result
}

/// Runs the episode on the lease's server; `unreachable` says why the server could not be
/// reached when that is what ended it.
async fn play(
    lease: &Lease,
    inputs: &RemoteInputs<'_>,
    result: &mut EpisodeResult,
    unreachable: &mut Option<String>,
) -> Result<()> {
    let task = &inputs.task;
    if !matches!(task.kind, TaskKind::Web(_)) {
        return Err(BenchError::task(
            &task.id,
            "only web tasks run on Cordon servers (--remote); run it without --remote",
        ));
    }
    let script = match inputs.policy {
        Policy::Script if crate::miniwob::is_package_task(task) => {
            return Err(BenchError::task(
                &task.id,
                "the scripted policy of MiniWoB++ reads the page's DOM, which /v1/envs does \
                 not offer (a client that could run scripts in the page could set its \
                 reward); run it without --remote, or with --policy upstream",
            ));
        }
        Policy::Script => Some(read_script(task)?),
        Policy::Driver(_) => None,
    };
    let server = lease.client().base().to_owned();
    let tr = Instant::now();
    let env = RemoteEnv::create(
        lease.client().clone(),
        suite_of(task),
        &task.id,
        inputs.seed,
        inputs.dpr,
    )
    .await
    .map_err(|error| {
        if let super::client::CallError::Unreachable(reason) = &error {
            *unreachable = Some(reason.clone());
        }
        error.into_bench(&server)
    })?;
    result.reset_ms = round2(tr.elapsed().as_secs_f64() * 1000.0);
    let instruction = env.instruction().unwrap_or_else(|| task.prompt.clone());
    result.prompt.clone_from(&instruction);
    let env = Arc::new(tokio::sync::Mutex::new(env));
    let driven = match (inputs.policy, script) {
        (Policy::Script, Some(script)) => play_script(&mut *env.lock().await, script).await,
        (Policy::Driver(driver), _) => {
            let spec = EpisodeSpec {
                id: inputs.id.to_owned(),
                task: task.clone(),
                seed: inputs.seed,
                instruction,
            };
            match driver.drive_remote(spec, env.clone()) {
                Some(driving) => driving.await,
                None => Err(BenchError::task(
                    &task.id,
                    format!(
                        "the {} policy does not drive episodes on Cordon servers",
                        driver.name()
                    ),
                )),
            }
        }
        (Policy::Script, None) => Ok(()),
    };
    let mut env = env.lock().await;
    // The final word is the page's, read by the server, whatever the policy said.
    let reward = match &driven {
        Ok(()) => env.evaluate().await,
        Err(_) => Ok(0.0),
    };
    record_trace(&env.trace(), inputs.dir, result)?;
    *unreachable = env.unreachable().map(str::to_owned);
    env.close().await;
    driven?;
    result.reward = reward?;
    result.success = result.reward >= SUCCESS;
    Ok(())
}
