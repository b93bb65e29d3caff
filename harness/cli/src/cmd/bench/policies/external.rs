//! The external policy: another agent drives each episode over HTTP, bench only scores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::run::{Driver, EpisodeSpec};
use cordon_server::guard::{HostGuard, guard_requests};
use cordon_server::http::envs::{Envs, routes};
use futures::future::BoxFuture;

/// Another agent drives each episode over HTTP; bench only scores. Each episode's
/// environment is served at `/v1/envs/{id}` (step, evaluate, finish) on `--addr`, announced
/// as one JSON line on stdout; the episode ends when the agent solves it, says it is
/// finished (`POST /v1/envs/{id}/finish`), or hits the task's caps.
pub struct ExternalPolicy {
    envs: Envs,
    base: String,
    _server: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for ExternalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalPolicy")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// How often an external episode is looked at (solved, finished, out of time).
const POLL: Duration = Duration::from_millis(100);

impl ExternalPolicy {
    pub async fn start(addr: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        let local = listener.local_addr()?;
        if !local.ip().is_loopback() {
            anyhow::bail!(
                "--addr {addr} is not a loopback address: the episodes' environments have no \
                 authentication, serve them on 127.0.0.1"
            );
        }
        let envs = Envs::new(None);
        // The same Host/Origin guard as `cordon serve`: a web page on the agent's machine must
        // not reach the episodes by DNS rebinding.
        let guard = Arc::new(HostGuard::new(local, &[]));
        let router = routes()
            .with_state(envs.clone())
            .layer(axum::middleware::from_fn_with_state(guard, guard_requests));
        let server = tokio::spawn(async move {
            let _served = axum::serve(listener, router).await;
        });
        let base = format!("http://{local}");
        eprintln!("bench: external policy: episodes are served on {base}/v1/envs/{{id}}");
        Ok(ExternalPolicy {
            envs,
            base,
            _server: server,
        })
    }
}

impl Driver for ExternalPolicy {
    fn name(&self) -> &'static str {
        "external"
    }

    fn drive(
        &self,
        episode: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, cordon_agent_bench::Result<()>> {
        let envs = self.envs.clone();
        let base = self.base.clone();
        Box::pin(async move {
            let id = envs.register(env.clone());
            let announce = serde_json::json!({
                "episode": episode.id,
                "task": episode.task.id,
                "seed": episode.seed,
                "prompt": episode.instruction,
                "env": id,
                "url": format!("{base}/v1/envs/{id}"),
            });
            println!("{announce}");
            let deadline = Instant::now() + Duration::from_secs_f64(episode.task.max_seconds);
            loop {
                tokio::time::sleep(POLL).await;
                let mut env = env.lock().await;
                let over = env.progress().is_none_or(|(_, done)| done);
                if over {
                    break;
                }
                if Instant::now() >= deadline {
                    env.finish();
                    break;
                }
            }
            envs.unregister(&id);
            Ok(())
        })
    }
}
