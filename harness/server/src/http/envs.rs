//! Benchmark environments over HTTP (`/v1/envs`): the gym-style interface of
//! `cordon-agent-bench` — reset, step, evaluate — on isolated browser sessions of this server's
//! Chromium, with the reward read by Cordon from the page. The same routes serve the
//! episodes of `cordon bench --policy external`, where bench registers each episode's
//! environment and an outside agent drives it.
//!
//! | route | |
//! |---|---|
//! | `GET /v1/envs/tasks` | the built-in tasks |
//! | `POST /v1/envs` `{task, seed, dpr, image_format}` | a new environment, reset: `201 {id, …, observation}` |
//! | `GET /v1/envs/{id}` | its task, seed, steps, reward, done |
//! | `POST /v1/envs/{id}/reset` `{seed}` | a new episode of the same task |
//! | `POST /v1/envs/{id}/step` `{format, actions}` | `{observation, reward, done, truncated, info}` |
//! | `POST /v1/envs/{id}/evaluate` | `{reward, done, steps}`: the reward read now |
//! | `POST /v1/envs/{id}/finish` | ends the episode (an external agent is done) |
//! | `DELETE /v1/envs/{id}` | closes its session |

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use cordon_agent_bench::env::{EnvAction, Observation, WebEnv};
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_agent_bench::task::{Suite, Task, TaskDir, TaskKind};
use cordon_agent_bench::{BenchError, Transition};
use cordon_computer::browser::Browser;
use cordon_computer::image::ImageFormat;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::ApiJson;
use crate::api::ErrorBody;
use crate::error::ApiError;
use cordon_core::ids::fresh_id;

/// Environments open at once.
pub const MAX_ENVS: usize = 16;
/// Environments idle longer than this are closed when a new one is asked for.
pub const ENV_IDLE: Duration = Duration::from_secs(15 * 60);

/// Starts (or returns) the browser new environments run in.
pub type BrowserSource = Arc<dyn Fn() -> BoxFuture<'static, Result<Browser, String>> + Send + Sync>;

/// An environment shared between requests (and with `cordon bench`'s run).
pub type SharedEnv = Arc<tokio::sync::Mutex<WebEnv>>;

struct Entry {
    env: SharedEnv,
    touched: Instant,
}

/// The environments of one server. Cheap to clone.
#[derive(Clone)]
pub struct Envs(Arc<Inner>);

struct Inner {
    browser: Option<BrowserSource>,
    pages: tokio::sync::OnceCell<Arc<PageServer>>,
    live: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Envs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envs").finish_non_exhaustive()
    }
}

impl Envs {
    /// Environments whose browsers come from `browser`; `None`: only registered ones
    /// (`POST /v1/envs` is refused).
    pub fn new(browser: Option<BrowserSource>) -> Envs {
        Envs(Arc::new(Inner {
            browser,
            pages: tokio::sync::OnceCell::new(),
            live: Mutex::new(HashMap::new()),
        }))
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `env` reachable at `/v1/envs/{id}`; returns the id.
    pub fn register(&self, env: SharedEnv) -> String {
        let id = fresh_id("env");
        self.live().insert(
            id.clone(),
            Entry {
                env,
                touched: Instant::now(),
            },
        );
        id
    }

    /// Takes `id` off the routes (its session stays with whoever holds the environment).
    pub fn unregister(&self, id: &str) {
        self.live().remove(id);
    }

    fn get(&self, id: &str) -> Result<SharedEnv, ApiError> {
        let mut live = self.live();
        let entry = live
            .get_mut(id)
            .ok_or_else(|| ApiError::not_found("env", id))?;
        entry.touched = Instant::now();
        Ok(entry.env.clone())
    }

    async fn pages(&self) -> Result<Arc<PageServer>, ApiError> {
        self.0
            .pages
            .get_or_try_init(|| async {
                PageServer::start(PageRoot::Builtin)
                    .await
                    .map(Arc::new)
                    .map_err(|e| {
                        ApiError::new(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "env_error",
                            e.to_string(),
                        )
                    })
            })
            .await
            .cloned()
    }

    /// Closes environments idle past [`ENV_IDLE`].
    async fn sweep(&self) {
        let idle: Vec<SharedEnv> = {
            let mut live = self.live();
            let old: Vec<String> = live
                .iter()
                .filter(|(_, e)| e.touched.elapsed() > ENV_IDLE)
                .map(|(id, _)| id.clone())
                .collect();
            old.iter()
                .filter_map(|id| live.remove(id))
                .map(|e| e.env)
                .collect()
        };
        for env in idle {
            env.lock().await.close().await;
        }
    }
}

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

fn bench_error(error: BenchError) -> ApiError {
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

fn transition_json(t: &Transition) -> Value {
    json!({
        "observation": observation_json(&t.observation),
        "reward": t.reward,
        "done": t.done,
        "truncated": t.info.truncated,
        "info": t.info,
    })
}

async fn describe(id: &str, env: &WebEnv) -> Value {
    let task = env.task();
    let (steps, done) = env.progress().unwrap_or((0, false));
    json!({
        "id": id,
        "task": task.map(|t| t.id.clone()),
        "prompt": task.map(|t| t.prompt.clone()),
        "max_steps": task.map(|t| t.max_steps),
        "seed": env.seed(),
        "steps": steps,
        "done": done,
        "screen": env.screen().map(|s| json!({"viewport": s.viewport, "display": s.display, "dpr": s.dpr})),
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateEnv {
    /// A built-in task's id (`form`, or `builtin/form`), or a task object (web, with `url`).
    task: Value,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    dpr: Option<f64>,
    #[serde(default)]
    image_format: Option<String>,
}

fn find_task(spec: &Value) -> Result<Task, ApiError> {
    let invalid = |m: String| ApiError::invalid_request("invalid_task", m);
    match spec {
        Value::String(name) => {
            let id = name.strip_prefix("builtin/").unwrap_or(name);
            let suite = Suite::builtin();
            let known: Vec<String> = suite.entries.iter().map(|e| e.id.clone()).collect();
            let entry = suite
                .entries
                .into_iter()
                .find(|e| e.id == id)
                .ok_or_else(|| {
                    invalid(format!("no built-in task {name:?}; there are {known:?}"))
                })?;
            entry.task.map_err(invalid)
        }
        Value::Object(_) => {
            let task = Task::parse(&spec.to_string(), "inline", TaskDir::None).map_err(invalid)?;
            if !matches!(task.kind, TaskKind::Web(_)) {
                return Err(invalid(
                    "only web tasks run over HTTP; run code tasks with `cordon bench`".into(),
                ));
            }
            Ok(task)
        }
        other => Err(invalid(format!(
            "`task` is a built-in task's id or a task object, not {other}"
        ))),
    }
}

/// A new environment on a task, reset to its first observation.
#[utoipa::path(
    post, path = "/v1/envs", tag = "envs",
    request_body(content = Object, description = "`{task, seed?, dpr?, image_format?}`: `task` is a built-in task's id (see `/v1/envs/tasks`) or a task object"),
    responses(
        (status = 201, description = "`{id, task, seed, steps, reward, done, observation}`", body = Object),
        (status = 422, description = "Unknown task, or a bad `dpr` / `image_format`", body = ErrorBody),
        (status = 503, description = "No browser here, or too many environments open", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn create_env(
    State(envs): State<Envs>,
    ApiJson(body): ApiJson<CreateEnv>,
) -> Result<Response, ApiError> {
    let task = Arc::new(find_task(&body.task)?);
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
    let source = envs.0.browser.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "browser_unavailable",
            "this server only serves the environments of a bench run",
        )
    })?;
    envs.sweep().await;
    if envs.live().len() >= MAX_ENVS {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_envs",
            format!("{MAX_ENVS} environments are open: DELETE /v1/envs/{{id}} one first"),
        ));
    }
    let pages = envs.pages().await?;
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
    let id = envs.register(env.clone());
    let mut out = describe(&id, &*env.lock().await).await;
    out["observation"] = observation_json(&first);
    Ok((
        StatusCode::CREATED,
        [(axum::http::header::LOCATION, format!("/v1/envs/{id}"))],
        Json(out),
    )
        .into_response())
}

/// The built-in tasks.
#[utoipa::path(
    get, path = "/v1/envs/tasks", tag = "envs",
    responses((status = 200, description = "`{tasks: [{id, prompt, seeds, max_steps}]}`", body = Object)),
    security(("bearer" = []))
)]
pub(super) async fn list_tasks() -> Json<Value> {
    let tasks: Vec<Value> = Suite::builtin()
        .entries
        .into_iter()
        .filter_map(|e| e.task.ok())
        .map(
            |t| json!({"id": t.id, "prompt": t.prompt, "seeds": t.seeds, "max_steps": t.max_steps}),
        )
        .collect();
    Json(json!({ "tasks": tasks }))
}

/// An environment's task, seed, steps, reward and whether it is done.
#[utoipa::path(
    get, path = "/v1/envs/{id}", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 200, description = "`{id, task, seed, steps, reward, done}`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn get_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id)?;
    let env = env.lock().await;
    Ok(Json(describe(&id, &env).await))
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
    ),
    security(("bearer" = []))
)]
pub(super) async fn reset_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id)?;
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
        let mut out = describe(&id, &env).await;
        out["observation"] = observation_json(&first);
        Ok::<_, ApiError>(out)
    })
    .await??;
    Ok(Json(out))
}

/// Runs actions in the environment.
#[utoipa::path(
    post, path = "/v1/envs/{id}/step", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    request_body(content = Object, description = "`{format, actions}`: actions in any vendor's computer-use shape"),
    responses(
        (status = 200, description = "`{observation, reward, done, truncated, info}`", body = Object),
        (status = 404, description = "Unknown environment", body = ErrorBody),
        (status = 409, description = "The episode is over", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn step_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
    ApiJson(action): ApiJson<EnvAction>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id)?;
    let out = detached(async move {
        let mut env = env.lock().await;
        env.step(action)
            .await
            .map(|t| transition_json(&t))
            .map_err(bench_error)
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
    ),
    security(("bearer" = []))
)]
pub(super) async fn evaluate_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id)?;
    let out = detached(async move {
        let mut env = env.lock().await;
        let reward = env.evaluate().await.map_err(bench_error)?;
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
    ),
    security(("bearer" = []))
)]
pub(super) async fn finish_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let env = envs.get(&id)?;
    let mut env = env.lock().await;
    env.finish();
    let (steps, done) = env.progress().unwrap_or((0, true));
    Ok(Json(json!({"done": done, "steps": steps})))
}

/// Closes the environment and its browser session.
#[utoipa::path(
    delete, path = "/v1/envs/{id}", tag = "envs",
    params(("id" = String, Path, description = "Environment id")),
    responses(
        (status = 204, description = "Closed"),
        (status = 404, description = "Unknown environment", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(super) async fn delete_env(
    State(envs): State<Envs>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let env = envs.get(&id)?;
    envs.unregister(&id);
    detached(async move { env.lock().await.close().await }).await?;
    Ok(StatusCode::NO_CONTENT)
}
