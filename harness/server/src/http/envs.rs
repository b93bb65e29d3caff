//! Benchmark environments over HTTP (`/v1/envs`): the gym-style interface of
//! `cordon-agent-bench` — reset, step, evaluate — on isolated browser sessions of this server's
//! Chromium, with the reward read by Cordon from the page. The same routes serve the
//! episodes of `cordon bench --policy external`, where bench registers each episode's
//! environment and an outside agent drives it, and the episodes `cordon bench --remote`
//! spreads over servers.
//!
//! Every episode is recorded in the server's store as it goes (`env_registry`), so after a
//! restart `GET /v1/envs/{id}` still answers with each episode's task, seed, steps, reward
//! and end; an environment whose browser session died with the process is `interrupted`.
//!
//! | route | |
//! |---|---|
//! | `GET /v1/envs/tasks?suite=builtin\|miniwob` | the tasks of a suite |
//! | `POST /v1/envs` `{task, suite, seed, dpr, image_format}` | a new environment, reset: `201 {id, …, observation}` |
//! | `GET /v1/envs/{id}` | its status, task, seed, steps, reward, done, and every episode |
//! | `POST /v1/envs/{id}/reset` `{seed}` | a new episode of the same task |
//! | `POST /v1/envs/{id}/step` `{format, actions, safety_checks}` | `{observation, reward, done, truncated, info}` |
//! | `POST /v1/envs/{id}/evaluate` | `{reward, done, steps}`: the reward read now |
//! | `POST /v1/envs/{id}/finish` | ends the episode (an external agent is done) |
//! | `DELETE /v1/envs/{id}` | closes its session |

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cordon_agent_bench::env::{EnvAction, WebEnv};
use cordon_agent_bench::task::Approvals;
use cordon_computer::image::ImageFormat;
use serde::Deserialize;
use serde_json::{Value, json};

use super::env_answers::{
    bench_error, describe, describe_record, observation_json, transition_json,
};
use super::env_tasks::{find_task, list, suite_named};
use super::extract::ApiJson;
use crate::api::ErrorBody;
use crate::error::ApiError;

pub use super::env_registry::{
    BrowserSource, ENV_IDLE, ENV_RESTART_REASON, Envs, MAX_ENVS, SharedEnv, TaskSuite,
};

/// The routes, for any state the environments can be taken from.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Envs: FromRef<S>,
{
    Router::new()
        .route("/v1/envs", post(create_env))
        .route("/v1/envs/tasks", get(list_tasks))
        .route("/v1/envs/{id}", get(get_env).delete(delete_env))
        .route("/v1/envs/{id}/reset", post(reset_env))
        .route("/v1/envs/{id}/step", post(step_env))
        .route("/v1/envs/{id}/evaluate", post(evaluate_env))
        .route("/v1/envs/{id}/finish", post(finish_env))
}

/// Runs `job` on a task of its own, so a client that hangs up never cuts a step in half.
async fn detached<T: Send + 'static>(
    job: impl Future<Output = T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::spawn(job).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "env_error",
            format!("the environment's task failed: {e}"),
        )
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateEnv {
    /// A task's id in `suite` (`form`, `builtin/form`, `miniwob/click-button`), or a task
    /// object (web, with `url`).
    task: Value,
    /// `builtin` (default) or `miniwob`.
    #[serde(default)]
    suite: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    dpr: Option<f64>,
    #[serde(default)]
    image_format: Option<String>,
}

/// A new environment on a task, reset to its first observation.
#[utoipa::path(
    post, path = "/v1/envs", tag = "envs",
    request_body(content = Object, description = "`{task, suite?, seed?, dpr?, image_format?}`: `task` is a task's id in `suite` (`builtin`, the default, or `miniwob`; see `/v1/envs/tasks`) or a task object"),
    responses(
        (status = 201, description = "`{id, status, suite, task, seed, steps, reward, done, episodes, observation}`", body = Object),
        (status = 422, description = "Unknown task or suite, or a bad `dpr` / `image_format`", body = ErrorBody),
        (status = 503, description = "No browser here, too many environments open, or the MiniWoB++ pages could not be fetched", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create_env(
    State(envs): State<Envs>,
    ApiJson(body): ApiJson<CreateEnv>,
) -> Result<Response, ApiError> {
    let suite = suite_named(body.suite.as_deref())?;
    if let Some(dpr) = body.dpr
        && dpr != 1.0
        && dpr != 2.0
    {
        return Err(ApiError::invalid_request(
            "invalid_request",
            format!("`dpr` must be 1 or 2, not {dpr}"),
        ));
    }
    let format = match &body.image_format {
        None => ImageFormat::Png,
        Some(name) => ImageFormat::parse(name).ok_or_else(|| {
            ApiError::invalid_request(
                "invalid_request",
                format!("`image_format` must be png, jpeg or jpeg:QUALITY, not {name:?}"),
            )
        })?,
    };
    let source = envs.browser().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "browser_unavailable",
            "this server only serves the environments of a bench run",
        )
    })?;
    let (suite, task) = find_task(&envs, suite, &body.task).await?;
    let task = Arc::new(task);
    envs.sweep().await;
    if envs.open_count() >= MAX_ENVS {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_envs",
            format!("{MAX_ENVS} environments are open: DELETE /v1/envs/{{id}} one first"),
        ));
    }
    let pages = envs.pages(suite).await?;
    let seed = body.seed.unwrap_or(0);
    let (env, first) = detached(async move {
        let browser = source().await.map_err(|e| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "browser_unavailable", e)
        })?;
        let mut env = WebEnv::new(browser, Some(pages))
            .with_dpr(body.dpr)
            .with_format(format);
        let first = env.reset(task, seed).await.map_err(bench_error)?;
        Ok::<_, ApiError>((env, first))
    })
    .await??;
    let env = Arc::new(tokio::sync::Mutex::new(env));
    let id = envs.open(env.clone(), suite).await?;
    let record = envs.stored(&id).await?;
    let mut out = describe(&id, &*env.lock().await, record.as_ref());
    out["observation"] = observation_json(&first);
    Ok((
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, format!("/v1/envs/{id}"))],
        Json(out),
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct TasksQuery {
    #[serde(default)]
    suite: Option<String>,
}

/// The tasks of a suite.
#[utoipa::path(
    get, path = "/v1/envs/tasks", tag = "envs",
    params(("suite" = Option<String>, Query, description = "`builtin` (default) or `miniwob`")),
    responses(
        (status = 200, description = "`{suite, tasks: [{id, prompt, seeds, max_steps}]}`", body = Object),
        (status = 422, description = "Unknown suite", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn list_tasks(
    State(envs): State<Envs>,
    Query(query): Query<TasksQuery>,
) -> Result<Json<Value>, ApiError> {
    let suite = suite_named(query.suite.as_deref())?;
    let tasks: Vec<Value> = list(&envs, suite)
        .await?
        .into_iter()
        .map(
            |t| json!({"id": t.id, "prompt": t.prompt, "seeds": t.seeds, "max_steps": t.max_steps}),
        )
        .collect();
    Ok(Json(json!({ "suite": suite.name(), "tasks": tasks })))
}

/// An environment's status, task, seed, steps, reward and end, with every episode it ran.
#[utoipa::path(
    get, path = "/v1/envs/{id}", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 200, description = "`{id, status, task, seed, steps, reward, done, episodes}`; `status` is `live`, `closed` or `interrupted` (its server restarted)", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match envs.get(&id).await {
        Ok(env) => {
            let record = envs.stored(&id).await?;
            let env = env.lock().await;
            Ok(Json(describe(&id, &env, record.as_ref())))
        }
        Err(refused) => match envs.stored(&id).await? {
            Some(row) => Ok(Json(describe_record(&row))),
            None => Err(refused),
        },
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    #[serde(default)]
    seed: Option<u64>,
}

/// A new episode of the same task.
#[utoipa::path(
    post, path = "/v1/envs/{id}/reset", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    request_body(content = Object, description = "`{seed?}` (an empty body keeps the seed)"),
    responses(
        (status = 200, description = "The environment, with its first `observation`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
        (status = 410, description = "The environment was closed, or interrupted by a server restart", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn reset_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id).await?;
    let body: ResetBody = if body.iter().all(u8::is_ascii_whitespace) {
        ResetBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::invalid_request("invalid_request", e.to_string()))?
    };
    let seed = body.seed;
    let out = detached(async move {
        let mut env = env.lock().await;
        let task = env
            .task()
            .cloned()
            .ok_or_else(|| ApiError::conflict("episode_over", "the environment has no task"))?;
        let seed = seed.or(env.seed()).unwrap_or(0);
        let first = env.reset(task, seed).await.map_err(bench_error)?;
        envs.next_episode(&id);
        envs.record(&id, &env).await;
        let record = envs.stored(&id).await?;
        let mut out = describe(&id, &env, record.as_ref());
        out["observation"] = observation_json(&first);
        Ok::<_, ApiError>(out)
    })
    .await??;
    Ok(Json(out))
}

/// A step's body: one model call, and how the vendor safety checks it raises are answered.
#[derive(Debug, Deserialize)]
pub(super) struct StepBody {
    #[serde(flatten)]
    action: EnvAction,
    /// `approve` or `deny` the vendor safety checks of this and later steps (OpenAI
    /// `pending_safety_checks`, Gemini `require_confirmation`); absent: as the task says.
    #[serde(default)]
    safety_checks: Option<Approvals>,
}

/// Runs actions in the environment.
#[utoipa::path(
    post, path = "/v1/envs/{id}/step", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    request_body(content = Object, description = "`{format, actions, safety_checks?}`: actions in any vendor's computer-use shape"),
    responses(
        (status = 200, description = "`{observation, reward, done, truncated, info}`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
        (status = 409, description = "The episode is over", body = ErrorBody),
        (status = 410, description = "The environment was closed, or interrupted by a server restart", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn step_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<StepBody>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id).await?;
    let out = detached(async move {
        let mut env = env.lock().await;
        if let Some(answer) = body.safety_checks {
            env.answer_safety_checks(Some(answer));
        }
        let stepped = env.step(body.action).await;
        envs.record(&id, &env).await;
        stepped.map(|t| transition_json(&t)).map_err(bench_error)
    })
    .await??;
    Ok(Json(out))
}

/// The reward read from the page now.
#[utoipa::path(
    post, path = "/v1/envs/{id}/evaluate", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 200, description = "`{reward, done, steps}`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
        (status = 410, description = "The environment was closed, or interrupted by a server restart", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn evaluate_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id).await?;
    let out = detached(async move {
        let mut env = env.lock().await;
        let reward = env.evaluate().await.map_err(bench_error)?;
        envs.record(&id, &env).await;
        let (steps, done) = env.progress().unwrap_or((0, false));
        Ok::<_, ApiError>(json!({"reward": reward, "done": done, "steps": steps}))
    })
    .await??;
    Ok(Json(out))
}

/// Ends the episode (an external agent is done).
#[utoipa::path(
    post, path = "/v1/envs/{id}/finish", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 200, description = "`{done, steps}`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
        (status = 410, description = "The environment was closed, or interrupted by a server restart", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn finish_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id).await?;
    let mut env = env.lock().await;
    env.finish();
    envs.record(&id, &env).await;
    let (steps, done) = env.progress().unwrap_or((0, true));
    Ok(Json(json!({"done": done, "steps": steps})))
}

/// Closes the environment and its browser session; its record stays (`closed`).
#[utoipa::path(
    delete, path = "/v1/envs/{id}", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 204, description = "Closed (or already over)"),
        (status = 404, description = "Unknown environment", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    match envs.get(&id).await {
        Ok(_) => {}
        // Closed or interrupted: nothing is open to close.
        Err(refused) if refused.status == StatusCode::GONE => return Ok(StatusCode::NO_CONTENT),
        Err(refused) => return Err(refused),
    }
    if let Some(env) = envs.close(&id, "closed by its client").await {
        detached(async move { env.lock().await.close().await }).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
