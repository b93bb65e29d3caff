//! The sandbox ([`Sandbox`]): its engines, its guest images (loaded once, on first use or
//! at start), the pool's bookkeeping, and starting executions. Sessions are opened in
//! `session.rs` (`Sandbox::session`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cordon_protocol::execution::Language;
use wasmtime::{Engine, Linker};

use crate::bridge_image;
use crate::config::SandboxConfig;
use crate::cpython;
use crate::driver;
use crate::engine::{
    KEEP_RESIDENT_JAVASCRIPT, KEEP_RESIDENT_PYTHON_LITE, engine, linker, spawn_epoch_ticker,
    tracked_max,
};
use crate::error::SandboxError;
use crate::execution::{Execution, ExecutionRequest, Job};
use crate::host_state::HostState;
use crate::image::{GuestImage, SessionSlot, Spare};
use crate::pool::make_spare;
use crate::write_tracking;

struct Shared {
    engine: Engine,
    linker: Linker<HostState>,
    config: SandboxConfig,
    images: tokio::sync::Mutex<HashMap<Language, Arc<GuestImage>>>,
    /// The JavaScript guest's engine and linker (its slots stay resident), made when it is
    /// first used.
    javascript: std::sync::Mutex<Option<(Engine, Linker<HostState>)>>,
    /// The CPython guest's own engine and linker, made when it is first used.
    cpython: std::sync::Mutex<Option<(Engine, Linker<HostState>)>>,
    /// The CPython image, loaded apart from `images`: its first build takes minutes, and
    /// the other languages' executions must not wait for it.
    cpython_image: tokio::sync::OnceCell<Arc<GuestImage>>,
    ticker_stop: Arc<AtomicBool>,
    /// Fresh instances whose result was delivered and whose pool slot is still being reset
    /// (see `driver::run_fresh`): an execution that finds the pool full waits for them.
    returning: AtomicUsize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// The sandbox: an engine, its guest images and its instance pool. Cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Sets up the engine and loads the images in [`SandboxConfig::preload`]. The first run
    /// with a new build snapshots and compiles each image (seconds); later runs load it
    /// from the cache (milliseconds).
    pub async fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let keep_resident = if write_tracking::available() {
            KEEP_RESIDENT_PYTHON_LITE
        } else {
            0
        };
        let engine = engine(&config, keep_resident)?;
        let linker = linker(&engine)?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(engine.clone(), ticker_stop.clone());
        let sandbox = Sandbox {
            shared: Arc::new(Shared {
                engine,
                linker,
                config: config.clone(),
                images: tokio::sync::Mutex::new(HashMap::new()),
                javascript: std::sync::Mutex::new(None),
                cpython: std::sync::Mutex::new(None),
                cpython_image: tokio::sync::OnceCell::new(),
                ticker_stop,
                returning: AtomicUsize::new(0),
            }),
        };
        for language in &config.preload {
            sandbox.prepare(*language).await?;
        }
        Ok(sandbox)
    }

    /// The pool's count of slots being returned (see `pool::Returning`).
    pub(crate) fn returning(&self) -> &AtomicUsize {
        &self.shared.returning
    }

    /// The image of `language`, loaded on first use.
    pub(crate) async fn image(&self, language: Language) -> Result<Arc<GuestImage>, SandboxError> {
        if language == Language::Python {
            return self
                .shared
                .cpython_image
                .get_or_try_init(|| async {
                    let (engine, linker) = self.cpython_engine()?;
                    cpython::load(&engine, &linker, &self.shared.config)
                        .await
                        .map(Arc::new)
                })
                .await
                .cloned();
        }
        let mut images = self.shared.images.lock().await;
        if let Some(image) = images.get(&language) {
            return Ok(image.clone());
        }
        let config = &self.shared.config;
        let tracked_max = tracked_max(config);
        let (engine, linker, spare) = if language == Language::Javascript {
            let (engine, linker) = self.javascript_engine()?;
            // Its slots keep their pages: no faults to save, and instantiating is a small
            // part of its run (measured: no gain from a spare).
            (engine, linker, Spare::new(false, false))
        } else {
            // RustPython's instantiation is worth making ahead; its pages are faulted in
            // ahead only where its slots are unmapped between instances.
            let spare = Spare::new(true, tracked_max.is_none());
            (
                self.shared.engine.clone(),
                self.shared.linker.clone(),
                spare,
            )
        };
        let image = bridge_image::load(
            &engine,
            &linker,
            language,
            config.cache_dir.as_deref(),
            &*config.progress,
            spare,
            tracked_max,
        )
        .await?;
        let image = Arc::new(image);
        images.insert(language, image.clone());
        Ok(image)
    }

    /// The JavaScript guest's engine and linker (made, with their epoch ticker, on first use).
    fn javascript_engine(&self) -> Result<(Engine, Linker<HostState>), SandboxError> {
        self.lazy_engine(&self.shared.javascript, "JavaScript", |config| {
            let engine = engine(config, KEEP_RESIDENT_JAVASCRIPT)?;
            let linker = linker(&engine)?;
            Ok((engine, linker))
        })
    }

    /// The CPython guest's engine and linker (made, with their epoch ticker, on first use).
    fn cpython_engine(&self) -> Result<(Engine, Linker<HostState>), SandboxError> {
        self.lazy_engine(&self.shared.cpython, "CPython", |config| {
            let engine = cpython::engine(config)?;
            let linker = cpython::linker(&engine)?;
            Ok((engine, linker))
        })
    }

    /// The engine and linker in `slot`, made by `make` (and given an epoch ticker) the
    /// first time.
    fn lazy_engine(
        &self,
        slot: &std::sync::Mutex<Option<(Engine, Linker<HostState>)>>,
        name: &str,
        make: impl FnOnce(&SandboxConfig) -> Result<(Engine, Linker<HostState>), SandboxError>,
    ) -> Result<(Engine, Linker<HostState>), SandboxError> {
        let mut slot = slot
            .lock()
            .map_err(|_| SandboxError::Engine(format!("the {name} engine's lock is poisoned")))?;
        if let Some(made) = &*slot {
            return Ok(made.clone());
        }
        let (engine, linker) = make(&self.shared.config)?;
        spawn_epoch_ticker(engine.clone(), self.shared.ticker_stop.clone());
        *slot = Some((engine.clone(), linker.clone()));
        Ok((engine, linker))
    }

    /// Makes sure the image for `language` is loaded and an instance of it is ready for
    /// the first execution (useful before timing anything).
    pub async fn prepare(&self, language: Language) -> Result<(), SandboxError> {
        let image = self.image(language).await?;
        make_spare(&self.shared.returning, &image).await;
        Ok(())
    }

    /// Runs code in a fresh instance. Must be called within a tokio runtime.
    pub fn execute(&self, request: ExecutionRequest) -> Execution {
        let language = request.language;
        let (handle, job) = Execution::start(request);
        let sandbox = self.clone();
        tokio::spawn(async move {
            let returning = &sandbox.shared.returning;
            driver::run_fresh(sandbox.image(language), returning, job).await;
        });
        handle
    }

    /// Runs a session's `job` on its instance in `slot` (a fresh one when it holds none),
    /// in a task of its own.
    pub(crate) fn spawn_in_session(&self, slot: Arc<tokio::sync::Mutex<SessionSlot>>, job: Job) {
        let language = job.request.language;
        let sandbox = self.clone();
        tokio::spawn(async move {
            let returning = &sandbox.shared.returning;
            driver::run_in_session(sandbox.image(language), returning, slot, job).await;
        });
    }
}
