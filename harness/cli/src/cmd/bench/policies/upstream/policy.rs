//! [`UpstreamPolicy`]: the driver of `--policy upstream`, web and desktop episodes alike.

use std::sync::Arc;
use std::time::Duration;

use cordon_agent_bench::BenchError;
use cordon_agent_bench::env::WebEnv;
use cordon_agent_bench::policy_env::PolicyEnv;
use cordon_agent_bench::remote::RemoteEnv;
use cordon_agent_bench::run::{Driver, EpisodeSpec};
use cordon_gateway::upstream::HttpUpstream;
use futures::future::BoxFuture;

use super::anthropic::AnthropicDialect;
use super::episode_loop::play;
use super::gemini::GeminiDialect;
use super::openai::OpenaiDialect;
use super::settings::{ComputerTool, DialectKind, SafetyChecks, Settings};

/// The longest one model turn may take.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// A model behind an upstream API chooses every action, through the gateway's upstream
/// client and in its vendor's computer-use dialect (`--upstream anthropic=URL |
/// openai-responses=URL | gemini=URL`). An episode ends when the model stops calling the
/// computer, the task is solved or hits a cap, or a vendor safety check is denied.
#[derive(Debug)]
pub struct UpstreamPolicy {
    settings: Arc<Settings>,
    upstream: Arc<HttpUpstream>,
}

impl UpstreamPolicy {
    /// From `--upstream API=URL`, `--model`, `--computer-tool`, `--enable-zoom` and
    /// `--safety-checks`; the key is `CORDON_UPSTREAM_KEY`.
    pub fn new(
        spec: &str,
        model: &str,
        computer_tool: ComputerTool,
        enable_zoom: bool,
        safety_checks: SafetyChecks,
    ) -> anyhow::Result<Self> {
        let settings = Settings::parse(spec, model, computer_tool, enable_zoom, safety_checks)?;
        let upstream = client(&settings).map_err(|e| anyhow::anyhow!("--upstream {spec}: {e}"))?;
        Ok(UpstreamPolicy {
            settings: Arc::new(settings),
            upstream: Arc::new(upstream),
        })
    }
}

fn client(settings: &Settings) -> Result<HttpUpstream, BenchError> {
    let mut upstream = HttpUpstream::new(settings.api, &settings.url, TURN_TIMEOUT)
        .map_err(|e| BenchError::Policy(e.to_string()))?
        .with_key(settings.key.clone());
    if settings.dialect == DialectKind::Anthropic
        && let Some(beta) = settings.computer_tool.beta()
    {
        upstream = upstream.with_header("anthropic-beta", beta);
    }
    Ok(upstream)
}

/// Plays one episode in the run's dialect.
async fn episode<E: PolicyEnv>(
    upstream: &HttpUpstream,
    settings: &Settings,
    env: &mut E,
    episode: &EpisodeSpec,
) -> Result<(), BenchError> {
    let safety = settings.safety_checks.approvals();
    // Room for calls refused before they run; the episode's own caps end it first.
    let turns = episode.task.max_steps.saturating_mul(2).saturating_add(2);
    let instruction = episode.instruction.as_str();
    match settings.dialect {
        DialectKind::Anthropic => {
            let dialect = AnthropicDialect::new(
                &settings.model,
                settings.computer_tool,
                settings.enable_zoom,
            );
            play(upstream, dialect, env, instruction, safety, turns).await
        }
        DialectKind::OpenaiResponses => {
            let dialect = OpenaiDialect::new(&settings.model);
            play(upstream, dialect, env, instruction, safety, turns).await
        }
        DialectKind::Gemini => {
            let dialect = GeminiDialect::new(&settings.model);
            play(upstream, dialect, env, instruction, safety, turns).await
        }
    }
}

impl Driver for UpstreamPolicy {
    fn name(&self) -> &'static str {
        "upstream"
    }

    fn drive(
        &self,
        spec: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, cordon_agent_bench::Result<()>> {
        let upstream = self.upstream.clone();
        let settings = self.settings.clone();
        Box::pin(async move {
            let mut env = env.lock().await;
            episode(&upstream, &settings, &mut *env, &spec).await
        })
    }

    fn drive_remote(
        &self,
        spec: EpisodeSpec,
        env: Arc<tokio::sync::Mutex<RemoteEnv>>,
    ) -> Option<BoxFuture<'static, cordon_agent_bench::Result<()>>> {
        let upstream = self.upstream.clone();
        let settings = self.settings.clone();
        Some(Box::pin(async move {
            let mut env = env.lock().await;
            episode(&upstream, &settings, &mut *env, &spec).await
        }))
    }

    #[cfg(feature = "desktop")]
    fn drive_desktop<'a>(
        &'a self,
        spec: EpisodeSpec,
        env: &'a mut cordon_agent_bench::desktop_env::DesktopEnv,
    ) -> Option<futures::future::LocalBoxFuture<'a, cordon_agent_bench::Result<()>>> {
        Some(Box::pin(async move {
            // A client of its own: the display's thread runs its own runtime, which the
            // shared client's pooled connections do not belong to.
            let upstream = client(&self.settings)?;
            episode(&upstream, &self.settings, env, &spec).await
        }))
    }
}
