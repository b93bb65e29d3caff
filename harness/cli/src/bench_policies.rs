//! The policies of `cordon bench` that are not scripts: an external agent driving each
//! episode over HTTP, and a model behind an upstream API.

use std::sync::Arc;

use cordon_bench::env::WebEnv;
use cordon_bench::run::{Driver, EpisodeSpec};
use futures::future::BoxFuture;

/// A model through an upstream API chooses every action.
#[derive(Debug)]
pub struct UpstreamPolicy {}

impl UpstreamPolicy {
    pub fn new(_spec: &str, _model: &str) -> anyhow::Result<Self> {
        anyhow::bail!("--policy upstream is not available in this build yet")
    }
}

impl Driver for UpstreamPolicy {
    fn name(&self) -> &'static str {
        "upstream"
    }

    fn drive(
        &self,
        _episode: EpisodeSpec,
        _env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, cordon_bench::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// Another agent drives each episode over HTTP; bench scores.
#[derive(Debug)]
pub struct ExternalPolicy {}

impl ExternalPolicy {
    pub async fn start(_addr: &str) -> anyhow::Result<Self> {
        anyhow::bail!("--policy external is not available in this build yet")
    }
}

impl Driver for ExternalPolicy {
    fn name(&self) -> &'static str {
        "external"
    }

    fn drive(
        &self,
        _episode: EpisodeSpec,
        _env: Arc<tokio::sync::Mutex<WebEnv>>,
    ) -> BoxFuture<'static, cordon_bench::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}
