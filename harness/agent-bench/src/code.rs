//! The gym-style interface over the sandbox: a code episode starts with the task's files in
//! a fresh workspace; each step runs the policy's code there; the reward comes from the
//! task's checker program, run in the same sandbox and workspace after the policy's code
//! (never from the policy's own output).

use std::sync::Arc;
use std::time::Instant;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{ExecutionResult, ExecutionStatus, Language, Limits};
use cordon_sandbox::{ExecutionRequest, Quota, Sandbox, Workspace};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env::{SUCCESS, unfinished_episode};
use crate::error::{BenchError, Result};
use crate::task::{CodeTask, Task, TaskKind};

/// What the policy sees of a code task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeObservation {
    pub prompt: String,
    /// The files in `/workspace` now.
    pub files: Vec<String>,
    /// The last run's output (empty after reset).
    pub stdout: String,
    pub stderr: String,
}

/// One code step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeTransition {
    pub observation: CodeObservation,
    pub reward: f64,
    pub done: bool,
    /// `completed`, `error`, `limit_exceeded` … of the policy's code.
    pub status: String,
    /// The checker's own output, for people reading the report.
    pub checker: String,
    pub wall_ms: f64,
}

/// A code episode environment over a sandbox.
pub struct CodeEnv {
    sandbox: Sandbox,
    episode: Option<CodeEpisode>,
}

impl std::fmt::Debug for CodeEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeEnv").finish_non_exhaustive()
    }
}

struct CodeEpisode {
    task: Arc<Task>,
    code: CodeTask,
    language: Language,
    workspace: Workspace,
    steps: u32,
    started: Instant,
    done: bool,
}

/// Workspaces of code tasks: 64 MiB and 10,000 entries.
const QUOTA: Quota = Quota {
    bytes: 64 << 20,
    files: 10_000,
};

fn status_name(status: ExecutionStatus) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

impl CodeEnv {
    pub fn new(sandbox: Sandbox) -> CodeEnv {
        CodeEnv {
            sandbox,
            episode: None,
        }
    }

    /// Starts an episode: a fresh workspace with the task's files.
    pub async fn reset(&mut self, task: Arc<Task>, seed: u64) -> Result<CodeObservation> {
        let TaskKind::Code(code) = &task.kind else {
            return Err(BenchError::task(&task.id, "not a code task"));
        };
        let language = Language::parse(&code.language).ok_or_else(|| {
            BenchError::task(
                &task.id,
                format!(
                    "`language` must be python, python-lite or javascript, not {:?}",
                    code.language
                ),
            )
        })?;
        if task.file(&code.checker).is_none() {
            return Err(BenchError::task(
                &task.id,
                format!("its checker {:?} is missing", code.checker),
            ));
        }
        let workspace = Workspace::new(QUOTA);
        if let Some(dir) = &code.workspace {
            for (path, bytes) in task.files_under(dir) {
                workspace
                    .write(&path, &bytes)
                    .map_err(|e| BenchError::task(&task.id, format!("workspace {path}: {e}")))?;
            }
        }
        // The seed is a file of the workspace, for tasks whose data depend on it.
        workspace
            .write(".seed", seed.to_string().as_bytes())
            .map_err(|e| BenchError::task(&task.id, e.to_string()))?;
        let observation = CodeObservation {
            prompt: task.prompt.clone(),
            files: files(&workspace),
            stdout: String::new(),
            stderr: String::new(),
        };
        self.episode = Some(CodeEpisode {
            code: code.clone(),
            task,
            language,
            workspace,
            steps: 0,
            started: Instant::now(),
            done: false,
        });
        Ok(observation)
    }

    /// Runs the policy's code, then the checker.
    pub async fn step(&mut self, code: &str) -> Result<CodeTransition> {
        let t0 = Instant::now();
        let episode = unfinished_episode(self.episode.as_mut(), |e| e.done)?;
        episode.steps += 1;
        let ran = run(&self.sandbox, episode.language, code, &episode.workspace).await;
        let (reward, checker) = check(&self.sandbox, episode).await?;
        episode.done = reward >= SUCCESS
            || episode.steps >= episode.task.max_steps
            || episode.started.elapsed().as_secs_f64() >= episode.task.max_seconds;
        Ok(CodeTransition {
            observation: CodeObservation {
                prompt: episode.task.prompt.clone(),
                files: files(&episode.workspace),
                stdout: ran.stdout.clone(),
                stderr: ran.stderr.clone(),
            },
            reward,
            done: episode.done,
            status: status_name(ran.status),
            checker,
            wall_ms: t0.elapsed().as_secs_f64() * 1000.0,
        })
    }

    /// Runs the checker now.
    pub async fn evaluate(&mut self) -> Result<f64> {
        match &self.episode {
            None => Ok(0.0),
            Some(episode) => Ok(check(&self.sandbox, episode).await?.0),
        }
    }
}

fn files(workspace: &Workspace) -> Vec<String> {
    workspace
        .list()
        .into_iter()
        .map(|f| f.path)
        .filter(|p| p != ".seed")
        .collect()
}

async fn run(
    sandbox: &Sandbox,
    language: Language,
    code: &str,
    workspace: &Workspace,
) -> ExecutionResult {
    let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
    let limits = Limits {
        workspace_bytes: QUOTA.bytes,
        workspace_files: QUOTA.files,
        ..Limits::default()
    };
    let mut request = ExecutionRequest::new(language, code, tools).workspace(workspace.clone());
    request.limits = limits;
    sandbox.execute(request).wait().await
}

/// The checker's reward and what it printed: 1 when it completes (or its last expression,
/// when that is a number in 0..=1 or a boolean), 0 when it raises or hits a limit.
async fn check(sandbox: &Sandbox, episode: &CodeEpisode) -> Result<(f64, String)> {
    let source = episode
        .task
        .file(&episode.code.checker)
        .ok_or_else(|| BenchError::task(&episode.task.id, "its checker is missing"))?;
    let source = String::from_utf8_lossy(&source).into_owned();
    let result = run(sandbox, episode.language, &source, &episode.workspace).await;
    let said = [result.stdout.trim(), result.stderr.trim()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let reward = match (result.status, &result.result) {
        (ExecutionStatus::Completed, Value::Bool(b)) => f64::from(u8::from(*b)),
        (ExecutionStatus::Completed, Value::Number(n)) => n.as_f64().unwrap_or(0.0).clamp(0.0, 1.0),
        (ExecutionStatus::Completed, _) => 1.0,
        _ => 0.0,
    };
    let said = match &result.error {
        Some(error) if said.is_empty() => format!("{}: {}", error.error_type, error.message),
        _ => said,
    };
    Ok((reward, said))
}
