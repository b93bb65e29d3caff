//! [`Envs`]: the benchmark environments of one server — the live ones in memory (each
//! holds a browser session of this process), their records in the store (every episode's
//! task, seed, steps, reward and end, rewritten after each step), and the page servers
//! their tasks load from (the built-in suite, MiniWoB++'s pages).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::miniwob::{self, Package};
use cordon_agent_bench::page_server::{PageRoot, PageServer};
use cordon_computer::browser::Browser;
use cordon_core::ids::fresh_id;
use futures::future::BoxFuture;

use crate::error::ApiError;
use crate::periodic::spawn_periodic;
use crate::store::{ENV_CLOSED, ENV_INTERRUPTED, EnvEpisodeRow, EnvRow, Store};

/// Environments open at once.
pub const MAX_ENVS: usize = 16;
/// Environments idle longer than this are closed when a new one is asked for.
pub const ENV_IDLE: Duration = Duration::from_secs(15 * 60);
/// Why an environment live when its server stopped is `interrupted`.
pub use crate::store::ENV_RESTART_REASON;

/// Starts (or returns) the browser new environments run in.
pub type BrowserSource = Arc<dyn Fn() -> BoxFuture<'static, Result<Browser, String>> + Send + Sync>;

/// An environment shared between requests (and with `cordon bench`'s run).
pub type SharedEnv = Arc<tokio::sync::Mutex<WebEnv>>;

/// Where an environment's tasks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSuite {
    /// The built-in suite compiled into Cordon (and inline task objects).
    Builtin,
    /// MiniWoB++'s published pages, fetched into the cache on first use.
    Miniwob,
}

impl TaskSuite {
    pub fn name(self) -> &'static str {
        match self {
            TaskSuite::Builtin => "builtin",
            TaskSuite::Miniwob => miniwob::SUITE,
        }
    }
}

struct Entry {
    env: SharedEnv,
    touched: Instant,
    /// The number of the current episode (1, then one more per reset).
    episode: u64,
}

/// The environments of one server. Cheap to clone.
#[derive(Clone)]
pub struct Envs(Arc<Inner>);

struct Inner {
    browser: Option<BrowserSource>,
    store: Option<Arc<Store>>,
    builtin_pages: tokio::sync::OnceCell<Arc<PageServer>>,
    miniwob_pages: tokio::sync::OnceCell<(Package, Arc<PageServer>)>,
    live: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Envs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Envs").finish_non_exhaustive()
    }
}

fn env_error(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "env_error", message)
}

impl Envs {
    /// Environments whose browsers come from `browser`; `None`: only registered ones
    /// (`POST /v1/envs` is refused). Nothing is recorded.
    pub fn new(browser: Option<BrowserSource>) -> Envs {
        Envs::build(browser, None)
    }

    /// Environments recorded in `store`, so their episodes outlive the process.
    pub(crate) fn recorded(browser: BrowserSource, store: Arc<Store>) -> Envs {
        Envs::build(Some(browser), Some(store))
    }

    fn build(browser: Option<BrowserSource>, store: Option<Arc<Store>>) -> Envs {
        Envs(Arc::new(Inner {
            browser,
            store,
            builtin_pages: tokio::sync::OnceCell::new(),
            miniwob_pages: tokio::sync::OnceCell::new(),
            live: Mutex::new(HashMap::new()),
        }))
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn browser(&self) -> Option<BrowserSource> {
        self.0.browser.clone()
    }

    pub(crate) fn open_count(&self) -> usize {
        self.live().len()
    }

    /// Makes `env` reachable at `/v1/envs/{id}`; returns the id. Not recorded in the
    /// store: the environment belongs to whoever registered it.
    pub fn register(&self, env: SharedEnv) -> String {
        let id = fresh_id("env");
        self.insert(&id, env);
        id
    }

    fn insert(&self, id: &str, env: SharedEnv) {
        self.live().insert(
            id.to_owned(),
            Entry {
                env,
                touched: Instant::now(),
                episode: 1,
            },
        );
    }

    /// Makes a new environment reachable, recorded as `live` with its first episode.
    pub(crate) async fn open(&self, env: SharedEnv, suite: TaskSuite) -> Result<String, ApiError> {
        let id = fresh_id("env");
        if let Some(store) = &self.0.store {
            store
                .insert_env(&id, suite.name())
                .await
                .map_err(|e| env_error(format!("recording the environment: {e}")))?;
        }
        self.insert(&id, env.clone());
        self.record(&id, &*env.lock().await).await;
        Ok(id)
    }

    /// Takes `id` off the routes (its session stays with whoever holds the environment).
    /// Whether this process holds the live environment `id`.
    pub(crate) fn holds(&self, id: &str) -> bool {
        self.live().contains_key(id)
    }

    pub fn unregister(&self, id: &str) {
        self.live().remove(id);
    }

    /// The live environment `id`; for one this process does not hold, why not: closed,
    /// interrupted by a restart (410 both, saying how to go on), or unknown (404).
    pub(crate) async fn get(&self, id: &str) -> Result<SharedEnv, ApiError> {
        {
            let mut live = self.live();
            if let Some(entry) = live.get_mut(id) {
                entry.touched = Instant::now();
                return Ok(entry.env.clone());
            }
        }
        match self.stored(id).await? {
            Some(row) if row.state == ENV_INTERRUPTED => Err(ApiError::gone(
                "env_interrupted",
                format!(
                    "environment {id} was interrupted by a server restart: {}. Its record \
                     stays at GET /v1/envs/{id}; start a new one with POST /v1/envs \
                     {{\"task\": …, \"seed\": …}}",
                    row.reason.as_deref().unwrap_or(ENV_RESTART_REASON)
                ),
            )),
            Some(row) => Err(ApiError::gone(
                "env_closed",
                format!(
                    "environment {id} is {} ({}); start a new one with POST /v1/envs",
                    row.state,
                    row.reason.as_deref().unwrap_or("closed by its client")
                ),
            )),
            None => Err(ApiError::not_found("env", id)),
        }
    }

    /// The record of `id` in the store (`None` without a store).
    pub(crate) async fn stored(&self, id: &str) -> Result<Option<EnvRow>, ApiError> {
        let Some(store) = &self.0.store else {
            return Ok(None);
        };
        store
            .env(id)
            .await
            .map_err(|e| env_error(format!("reading the environment's record: {e}")))
    }

    /// Counts a reset of `id`: its next episode begins.
    pub(crate) fn next_episode(&self, id: &str) {
        if let Some(entry) = self.live().get_mut(id) {
            entry.episode += 1;
        }
    }

    /// Writes the current episode of `id` to the store as it stands now. A failed write is
    /// reported on stderr: the step it records did happen, and its answer still goes out.
    pub(crate) async fn record(&self, id: &str, env: &WebEnv) {
        let Some(store) = &self.0.store else {
            return;
        };
        let Some(episode) = self.live().get(id).map(|e| e.episode) else {
            return;
        };
        let (Some(task), Some(seed)) = (env.task(), env.seed()) else {
            return;
        };
        let (steps, done) = env.progress().unwrap_or((0, false));
        let row = EnvEpisodeRow {
            episode,
            task: task.id.clone(),
            seed,
            steps: u64::from(steps),
            reward: env.reward().unwrap_or(0.0),
            done,
        };
        if let Err(error) = store.record_env_episode(id, &row).await {
            eprintln!("cordon serve: recording environment {id}'s episode failed: {error}");
        }
    }

    /// Takes `id` off the routes and records it closed with `reason`.
    pub(crate) async fn close(&self, id: &str, reason: &str) -> Option<SharedEnv> {
        let entry = self.live().remove(id);
        if let Some(store) = &self.0.store
            && let Err(error) = store.end_env(id, ENV_CLOSED, reason).await
        {
            eprintln!("cordon serve: recording environment {id} closed failed: {error}");
        }
        entry.map(|e| e.env)
    }

    /// The page server of `suite`'s tasks, started on first use (MiniWoB++'s pages are
    /// fetched into the cache first when they are not there).
    pub(crate) async fn pages(&self, suite: TaskSuite) -> Result<Arc<PageServer>, ApiError> {
        let unavailable =
            |e: String| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "suite_unavailable", e);
        match suite {
            TaskSuite::Builtin => self
                .0
                .builtin_pages
                .get_or_try_init(|| async {
                    PageServer::start(PageRoot::Builtin)
                        .await
                        .map(Arc::new)
                        .map_err(|e| env_error(e.to_string()))
                })
                .await
                .cloned(),
            TaskSuite::Miniwob => self
                .miniwob()
                .await
                .map(|(_, pages)| pages)
                .map_err(unavailable),
        }
    }

    /// MiniWoB++'s installed pages and their server.
    pub(crate) async fn miniwob(&self) -> Result<(Package, Arc<PageServer>), String> {
        self.0
            .miniwob_pages
            .get_or_try_init(|| async {
                let package = miniwob::ensure_default(&|line: &str| {
                    eprintln!("cordon serve: {line}");
                })
                .await
                .map_err(|e| e.to_string())?;
                let pages = PageServer::start(PageRoot::Dir(package.html()))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>((package, Arc::new(pages)))
            })
            .await
            .cloned()
    }

    /// Deletes the records of environments over for longer than `retain`, now and then
    /// (every `retain / 4`, between a second and an hour), while these environments live.
    pub(crate) fn spawn_retention(&self, retain: Duration) {
        if self.0.store.is_none() {
            return;
        }
        let every = (retain / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        let retain_ms = u64::try_from(retain.as_millis()).unwrap_or(u64::MAX);
        spawn_periodic(&self.0, every, move |inner| async move {
            let Some(store) = &inner.store else { return };
            let cutoff = cordon_core::clock::now_ms().saturating_sub(retain_ms);
            if let Err(error) = store.purge_envs(cutoff).await {
                eprintln!("cordon serve: deleting old environment records failed: {error}");
            }
        });
    }

    /// Closes environments idle past [`ENV_IDLE`].
    pub(crate) async fn sweep(&self) {
        let idle: Vec<String> = self
            .live()
            .iter()
            .filter(|(_, e)| e.touched.elapsed() > ENV_IDLE)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if let Some(env) = self.close(&id, "closed after 15 minutes idle").await {
                env.lock().await.close().await;
            }
        }
    }
}
