//! How the sandbox is set up: [`SandboxConfig`].

use std::path::PathBuf;
use std::sync::Arc;

use cordon_protocol::execution::Language;

use crate::cache::default_cache_dir;

/// How the sandbox is set up.
#[derive(Clone)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// Languages to load at start (others load on first use).
    pub preload: Vec<Language>,
    /// Where precompiled images are cached; `None` compiles in memory every start.
    pub cache_dir: Option<PathBuf>,
    /// Live instances at once (running executions + sessions): sizes the instance pool.
    pub max_instances: u32,
    /// Largest `memory_bytes` any execution may ask for.
    pub max_memory_bytes: u64,
    /// Called with a line of text during slow one-time work (first image build).
    pub progress: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            preload: vec![Language::PythonLite],
            cache_dir: default_cache_dir(),
            max_instances: 1_000,
            max_memory_bytes: 4 << 30,
            progress: Arc::new(|_| {}),
        }
    }
}

impl std::fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxConfig")
            .field("preload", &self.preload)
            .field("cache_dir", &self.cache_dir)
            .field("max_instances", &self.max_instances)
            .field("max_memory_bytes", &self.max_memory_bytes)
            .finish_non_exhaustive()
    }
}

impl SandboxConfig {
    /// Sets [`Self::preload`].
    pub fn preload(mut self, languages: Vec<Language>) -> Self {
        self.preload = languages;
        self
    }

    /// Sets [`Self::cache_dir`].
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Sets [`Self::max_instances`].
    pub fn max_instances(mut self, count: u32) -> Self {
        self.max_instances = count;
        self
    }

    /// Sets [`Self::progress`].
    pub fn progress(mut self, report: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.progress = Arc::new(report);
        self
    }
}
