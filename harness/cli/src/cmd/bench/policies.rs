//! The policies of `cordon bench` that are not scripts: an external agent driving each
//! episode over HTTP, and a model behind an upstream API.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use cordon_agent_bench::env::EnvAction;
use cordon_computer::image::EncodedImage;
use cordon_gateway::upstream::{Api, Credential, HttpUpstream, Upstream as _};
use cordon_protocol::conversation::anthropic;
use cordon_server::guard::{HostGuard, guard_requests};
use cordon_server::http::envs::{Envs, routes};
use serde_json::{Value, json};

use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::run::{Driver, EpisodeSpec};
use futures::future::BoxFuture;

/// A model through the gateway's upstream client chooses every action: each turn is an
/// Anthropic Messages conversation (the task's prompt, the computer tool at the episode's
/// display size, each screenshot as the tool's result), sent through `HttpUpstream` in
/// whichever API the upstream speaks. The episode ends when the model stops calling the
/// tool, the page says the task is solved, or a cap is hit.
#[derive(Debug)]
pub struct UpstreamPolicy {
    upstream: Arc<HttpUpstream>,
    model: String,
}

/// The longest one model turn may take.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);

impl UpstreamPolicy {
    pub fn new(spec: &str, model: &str) -> anyhow::Result<Self> {
        let (api, url) = spec
            .split_once('=')
            .context("--upstream takes API=URL (anthropic, openai-chat, openai-responses)")?;
        let api = Api::parse(api).with_context(|| {
            format!("unknown upstream API {api:?}: use anthropic, openai-chat or openai-responses")
        })?;
        if api != Api::Anthropic {
            // The computer tool is a vendor built-in: it reaches only an Anthropic upstream
            // as is; the OpenAI computer tool's loop is not written for bench yet.
            anyhow::bail!(
                "--policy upstream drives the computer through an anthropic upstream for now; \
                 give --upstream anthropic=URL"
            );
        }
        let key = std::env::var("CORDON_UPSTREAM_KEY").ok().map(Credential);
        let upstream = HttpUpstream::new(api, url, TURN_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("--upstream {spec}: {e}"))?
            .with_key(key);
        Ok(UpstreamPolicy {
            upstream: Arc::new(upstream),
            model: model.to_owned(),
        })
    }
}

fn image_block(screenshot: Option<&EncodedImage>) -> Value {
    match screenshot {
        Some(shot) => json!({"type": "image", "source": {
            "type": "base64", "media_type": shot.format.media_type(),
            "data": base64::engine::general_purpose::STANDARD.encode(&shot.data)}}),
        None => json!({"type": "text", "text": "(no screenshot)"}),
    }
}

impl Driver for UpstreamPolicy {
    fn name(&self) -> &'static str {
        "upstream"
    }

    fn drive(
        &self,
        episode: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, cordon_agent_bench::Result<()>> {
        let upstream = self.upstream.clone();
        let model = self.model.clone();
        Box::pin(async move {
            let policy = |e: String| cordon_agent_bench::BenchError::Policy(e);
            let (display, first) = {
                let env = env.lock().await;
                let screen = env
                    .screen()
                    .ok_or_else(|| policy("the episode was not reset".into()))?;
                let trace = env
                    .trace()
                    .ok_or_else(|| policy("the episode was not reset".into()))?;
                (screen.display, trace.first)
            };
            let tool = json!({"type": "computer_20250124", "name": "computer",
                              "display_width_px": display.width, "display_height_px": display.height});
            let mut messages = vec![json!({"role": "user", "content": [
                {"type": "text", "text": episode.task.prompt},
                image_block(first.as_ref()),
            ]})];
            loop {
                let body = json!({"model": model, "max_tokens": 1024, "tools": [tool],
                                  "messages": messages, "stream": false});
                let request =
                    anthropic::decode_request(&body).map_err(|e| policy(e.to_string()))?;
                let turn = upstream
                    .call(&request, None)
                    .await
                    .map_err(|e| policy(e.to_string()))?;
                let reply = anthropic::encode_response(&turn);
                let content = reply["content"].as_array().cloned().unwrap_or_default();
                let calls: Vec<Value> = content
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .cloned()
                    .collect();
                messages.push(json!({"role": "assistant", "content": content}));
                if calls.is_empty() {
                    return Ok(());
                }
                let mut results = Vec::new();
                let mut done = false;
                for call in calls {
                    let t = env
                        .lock()
                        .await
                        .step(EnvAction {
                            format: "anthropic".into(),
                            actions: vec![call["input"].clone()],
                        })
                        .await?;
                    let mut result = json!({"type": "tool_result", "tool_use_id": call["id"]});
                    if let Some(error) = &t.info.error {
                        result["is_error"] = json!(true);
                        result["content"] = json!([{"type": "text", "text": error}]);
                    } else {
                        result["content"] = json!([image_block(t.observation.screenshot.as_ref())]);
                    }
                    results.push(result);
                    if t.done {
                        done = true;
                        break;
                    }
                }
                messages.push(json!({"role": "user", "content": results}));
                if done {
                    return Ok(());
                }
            }
        })
    }
}

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
                "prompt": episode.task.prompt,
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
