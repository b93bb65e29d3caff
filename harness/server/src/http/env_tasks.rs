//! Which task a new environment runs: a built-in task by id, a MiniWoB++ task type by name
//! (`{"suite": "miniwob", "task": "click-button"}` or `"miniwob/click-button"`), or an
//! inline web task object.

use cordon_agent_bench::miniwob;
use cordon_agent_bench::task::{Suite, Task, TaskDir, TaskKind};
use serde_json::Value;

use super::env_registry::{Envs, TaskSuite};
use crate::error::ApiError;

fn invalid(message: String) -> ApiError {
    ApiError::invalid_request("invalid_task", message)
}

/// The suite a request names (`builtin` when it names none).
pub(crate) fn suite_named(name: Option<&str>) -> Result<TaskSuite, ApiError> {
    match name {
        None | Some("builtin") => Ok(TaskSuite::Builtin),
        Some(miniwob::SUITE) => Ok(TaskSuite::Miniwob),
        Some(other) => Err(ApiError::invalid_request(
            "invalid_request",
            format!("`suite` is builtin or miniwob, not {other:?}"),
        )),
    }
}

/// The task `spec` names in `suite`, and the suite it comes from.
pub(crate) async fn find_task(
    envs: &Envs,
    suite: TaskSuite,
    spec: &Value,
) -> Result<(TaskSuite, Task), ApiError> {
    match spec {
        Value::String(name) => {
            if let Some(rest) = name.strip_prefix("miniwob/") {
                return Ok((TaskSuite::Miniwob, miniwob_task(envs, rest).await?));
            }
            match suite {
                TaskSuite::Miniwob => Ok((TaskSuite::Miniwob, miniwob_task(envs, name).await?)),
                TaskSuite::Builtin => Ok((TaskSuite::Builtin, builtin_task(name)?)),
            }
        }
        Value::Object(_) if suite == TaskSuite::Builtin => {
            let task = Task::parse(&spec.to_string(), "inline", TaskDir::None).map_err(invalid)?;
            if !matches!(task.kind, TaskKind::Web(_)) {
                return Err(invalid(
                    "only web tasks run over HTTP; run code tasks with `cordon bench`".into(),
                ));
            }
            Ok((TaskSuite::Builtin, task))
        }
        Value::Object(_) => Err(invalid(
            "a task object runs without `suite`; a MiniWoB++ task is named by its type".into(),
        )),
        other => Err(invalid(format!(
            "`task` is a task's id (see /v1/envs/tasks) or a task object, not {other}"
        ))),
    }
}

fn builtin_task(name: &str) -> Result<Task, ApiError> {
    let id = name.strip_prefix("builtin/").unwrap_or(name);
    let suite = Suite::builtin();
    let known: Vec<String> = suite.entries.iter().map(|e| e.id.clone()).collect();
    let entry = suite
        .entries
        .into_iter()
        .find(|e| e.id == id)
        .ok_or_else(|| invalid(format!("no built-in task {name:?}; there are {known:?}")))?;
    entry.task.map_err(invalid)
}

async fn miniwob_task(envs: &Envs, name: &str) -> Result<Task, ApiError> {
    let (package, _) = envs.miniwob().await.map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "suite_unavailable",
            e,
        )
    })?;
    let names = miniwob::task_names(&package).map_err(|e| invalid(e.to_string()))?;
    if !names.iter().any(|n| n == name) {
        return Err(invalid(format!(
            "no MiniWoB++ task {name:?}; GET /v1/envs/tasks?suite=miniwob lists them"
        )));
    }
    miniwob::task(&package, name).map_err(invalid)
}

/// The tasks of `suite` as `/v1/envs/tasks` lists them: `(id, prompt, seeds, max_steps)`.
pub(crate) async fn list(envs: &Envs, suite: TaskSuite) -> Result<Vec<Task>, ApiError> {
    match suite {
        TaskSuite::Builtin => Ok(Suite::builtin()
            .entries
            .into_iter()
            .filter_map(|e| e.task.ok())
            .collect()),
        TaskSuite::Miniwob => {
            let (package, _) = envs.miniwob().await.map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "suite_unavailable",
                    e,
                )
            })?;
            let names = miniwob::task_names(&package).map_err(|e| invalid(e.to_string()))?;
            Ok(names
                .iter()
                .filter_map(|name| miniwob::task(&package, name).ok())
                .collect())
        }
    }
}
