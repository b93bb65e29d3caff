//! The JSON `/v1/envs` answers with: an environment (live, or as its record stands), an
//! observation, a transition, and a benchmark error as an API error.

use axum::http::StatusCode;
use base64::Engine as _;
use cordon_agent_bench::env::{Observation, WebEnv};
use cordon_agent_bench::{BenchError, Transition};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::store::{ENV_LIVE, EnvEpisodeRow, EnvRow};

pub(crate) fn bench_error(error: BenchError) -> ApiError {
    match error {
        BenchError::Task { .. } => ApiError::invalid_request("invalid_task", error.to_string()),
        BenchError::State(_) => ApiError::conflict("episode_over", error.to_string()),
        BenchError::Browser(_) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "browser_error", error.to_string())
        }
        other => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "env_error",
            other.to_string(),
        ),
    }
}

pub(crate) fn observation_json(o: &Observation) -> Value {
    json!({
        "url": o.url,
        "text": o.text,
        "screenshot": o.screenshot.as_ref().map(|s| json!({
            "media_type": s.format.media_type(),
            "data": base64::engine::general_purpose::STANDARD.encode(&s.data),
            "width": s.size.width,
            "height": s.size.height,
        })),
    })
}

pub(crate) fn transition_json(t: &Transition) -> Value {
    json!({
        "observation": observation_json(&t.observation),
        "reward": t.reward,
        "done": t.done,
        "truncated": t.info.truncated,
        "info": t.info,
    })
}

fn episode_json(e: &EnvEpisodeRow) -> Value {
    json!({
        "episode": e.episode, "task": e.task, "seed": e.seed, "steps": e.steps,
        "reward": e.reward, "done": e.done,
    })
}

/// A live environment: its current episode, and every episode of its record (`record`:
/// the store's row, `None` when nothing is recorded).
pub(crate) fn describe(id: &str, env: &WebEnv, record: Option<&EnvRow>) -> Value {
    let task = env.task();
    let (steps, done) = env.progress().unwrap_or((0, false));
    let episodes: Vec<Value> = match record {
        Some(row) => row.episodes.iter().map(episode_json).collect(),
        None => Vec::new(),
    };
    json!({
        "id": id,
        "status": ENV_LIVE,
        "suite": record.map(|r| r.suite.clone()),
        "task": task.map(|t| t.id.clone()),
        "prompt": task.map(|t| t.prompt.clone()),
        "instruction": env.instruction(),
        "max_steps": task.map(|t| t.max_steps),
        "seed": env.seed(),
        "steps": steps,
        "reward": env.reward(),
        "done": done,
        "screen": env.screen().map(|s| json!({"viewport": s.viewport, "display": s.display, "dpr": s.dpr})),
        "episodes": episodes,
    })
}

/// An environment this process does not hold, as its record stands: `closed`, or
/// `interrupted` (live in a process that stopped), with its last episode on top.
pub(crate) fn describe_record(row: &EnvRow) -> Value {
    let last = row.episodes.last();
    json!({
        "id": row.id,
        "status": row.state,
        "reason": row.reason,
        "suite": row.suite,
        "task": last.map(|e| e.task.clone()),
        "seed": last.map(|e| e.seed),
        "steps": last.map_or(0, |e| e.steps),
        "reward": last.map(|e| e.reward),
        "done": last.is_some_and(|e| e.done),
        "episodes": row.episodes.iter().map(episode_json).collect::<Vec<_>>(),
    })
}
