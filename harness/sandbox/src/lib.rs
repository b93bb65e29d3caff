//! Cordon's WebAssembly sandbox: runs model-written Python and JavaScript in wasmtime with
//! fixed limits, where the only way out is the tool bridge.
//!
//! - [`Sandbox`] owns the engine and the pre-initialized guest images (loaded from a disk
//!   cache; made on first use).
//! - [`Sandbox::execute`] runs code in a fresh instance; [`Sandbox::session`] keeps one
//!   instance so variables survive from one execution to the next.
//! - An [`Execution`] streams [`ExecutionEvent`]s, takes client-tool results and approval
//!   decisions while it is suspended, and ends with an [`ExecutionResult`].
//! - A [`Workspace`] is the guest's `/workspace`: files in memory, with quotas, that the
//!   host writes and reads around executions (`ExecutionRequest::workspace`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), cordon_sandbox::SandboxError> {
//! use std::sync::Arc;
//! use cordon_core::{Dispatcher, ToolRegistry};
//! use cordon_protocol::execution::Language;
//! use cordon_sandbox::{ExecutionRequest, Sandbox, SandboxConfig};
//!
//! let sandbox = Sandbox::new(SandboxConfig::default()).await?;
//! let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
//! let result = sandbox
//!     .execute(ExecutionRequest::new(Language::PythonLite, "print(6 * 7)", tools))
//!     .wait()
//!     .await;
//! assert_eq!(result.stdout, "42\n");
//!
//! // Files in, files out.
//! let workspace = cordon_sandbox::Workspace::new(cordon_sandbox::Quota { bytes: 1 << 20, files: 100 });
//! workspace.write("in.csv", b"a,b\n1,2\n").unwrap();
//! let code = "import csv\nrows = list(csv.reader(open('in.csv')))\nopen('n.txt', 'w').write(str(len(rows)))";
//! let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
//! let request = ExecutionRequest::new(Language::PythonLite, code, tools).workspace(workspace.clone());
//! sandbox.execute(request).wait().await;
//! assert_eq!(workspace.read("n.txt").unwrap(), b"2");
//! # Ok(()) }
//! ```

mod bound;
pub mod cpython;
mod dirty;
mod driver;
mod host;
mod image;
mod meter;
mod pages;
mod wasi_fs;
mod workspace;

use cordon_core::ids::fresh_id;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cordon_core::broker::{
    ApprovalBroker, Approver, ClientCallBroker, SubmitError, UnknownApproval,
};
use cordon_core::dispatch::Dispatcher;
use cordon_protocol::execution::{
    ClientToolResult, Decision, ExecutionEvent, ExecutionResult, Language, Limits,
};
use tokio::sync::{mpsc, oneshot};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig,
    ProfilingStrategy,
};

pub use image::default_cache_dir;
pub use workspace::{FileEntry, GUEST_ROOT, Quota, Workspace, WorkspaceError, split_path};

use crate::host::HostState;
use crate::image::GuestImage;

/// Errors setting up the sandbox. (How an execution ends is an [`ExecutionResult`], never
/// an error: guest faults and limits are results the model can read.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// wasmtime rejected the engine configuration.
    #[error("engine setup failed: {0}")]
    Engine(String),
    /// This build has no image for the language.
    #[error("no {language} guest image in this build (its crate was not built)")]
    ImageMissing {
        /// The language asked for.
        language: &'static str,
    },
    /// Making or loading a guest image failed.
    #[error("guest image: {0}")]
    Image(String),
}

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

/// Native stack for guest code. Python frames are deep; 16 MiB lets RustPython's own
/// recursion limit (a clean `RecursionError`) trigger before the stack runs out.
const WASM_STACK: usize = 16 << 20;
/// Bytes of a returned JavaScript memory slot reset in place (its written pages, found
/// with Linux's `PAGEMAP_SCAN` where the kernel has it, copied back from the image) rather
/// than unmapped: the next fresh instance finds them mapped instead of faulting each one
/// in (measured: 48 faults and ~220 µs per `console.log(1)` → 0 faults, ~135 µs). The
/// QuickJS image and a small run fit in it.
const KEEP_RESIDENT_JAVASCRIPT: usize = 4 << 20;
/// The same for RustPython, only where the kernel tracks written pages exactly
/// ([`dirty`]). Without that, every page of a touched page table counts as written and
/// the copy costs more than the faults it saves (measured: 0.9 ms → 1.1 ms at 4 MiB,
/// 2.7 ms at 16 MiB); its slots are then unmapped and a spare is faulted in ahead.
const KEEP_RESIDENT_PYTHON_LITE: usize = 8 << 20;
/// The same for tables, in both guests' engine (the function tables are a few hundred
/// KiB; RustPython's lazily filled table faulted ~30 pages per fresh run when unmapped).
const KEEP_RESIDENT_TABLE: usize = 1 << 20;
/// Unused slots that keep their resident pages (and image mapping): bounds what idle slots
/// hold to `MAX_WARM_SLOTS × (KEEP_RESIDENT_PYTHON_LITE + KEEP_RESIDENT_TABLE)`.
const MAX_WARM_SLOTS: u32 = 32;
/// Epoch tick: the granularity of CPU/wall limits and of yielding to other executions.
const EPOCH_TICK: Duration = Duration::from_millis(5);

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

/// The instance pool's settings every engine shares: `max_instances` of everything, and
/// instances up to `instance_size` bytes.
pub(crate) fn pool_config(config: &SandboxConfig, instance_size: usize) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    let count = config.max_instances.max(1);
    pool.total_core_instances(count)
        .total_memories(count)
        .total_tables(count)
        .total_stacks(count)
        .max_memory_size(max_memory(config))
        .table_elements(200_000)
        .max_core_instance_size(instance_size);
    pool
}

/// The largest memory an instance may have: every pool slot holds this much.
fn max_memory(config: &SandboxConfig) -> usize {
    usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX)
}

/// Has `pool` reset `bytes` of each returned memory slot in place (its written pages
/// copied back from the image) instead of unmapping them; 0 unmaps them all.
pub(crate) fn keep_resident(pool: &mut PoolingAllocationConfig, bytes: usize) {
    if bytes > 0 {
        pool.pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident(bytes);
    }
}

/// How far an image's instances are armed for exact write tracking ([`dirty`]): the
/// largest memory, which every slot holds; none where the kernel cannot track.
pub(crate) fn tracked_max(config: &SandboxConfig) -> Option<usize> {
    dirty::available().then(|| max_memory(config))
}

/// The engine settings every guest shares (epoch limits, deep stacks, copy-on-write
/// images), over `pool`.
pub(crate) fn engine_config(pool: PoolingAllocationConfig) -> Config {
    let mut wasm = Config::new();
    wasm.epoch_interruption(true)
        .max_wasm_stack(WASM_STACK)
        .async_stack_size(WASM_STACK + (1 << 20))
        .memory_init_cow(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // `perf record` shows guest functions by name only with a map of the compiled code
    // (`/tmp/perf-<pid>.map`); written when asked for, since it costs at every image load.
    if std::env::var_os("CORDON_PERF_MAP").is_some() {
        wasm.profiler(ProfilingStrategy::PerfMap);
    }
    wasm
}

/// An engine for the RustPython and JavaScript guests. `keep_resident` bytes of each
/// returned memory slot are reset in place instead of unmapped (0: all unmapped); tables
/// always keep theirs.
fn engine(config: &SandboxConfig, keep_resident: usize) -> Result<Engine, SandboxError> {
    let mut pool = pool_config(config, 4 << 20);
    pool.table_keep_resident(KEEP_RESIDENT_TABLE)
        .max_unused_warm_slots(MAX_WARM_SLOTS);
    self::keep_resident(&mut pool, keep_resident);
    let mut wasm = engine_config(pool);
    // The build has GC support for the CPython guest's exceptions (its own engine); these
    // guests need neither.
    wasm.wasm_gc(false).wasm_exceptions(false);
    Engine::new(&wasm).map_err(|error| SandboxError::Engine(format!("{error:#}")))
}

impl Sandbox {
    /// Sets up the engine and loads the images in [`SandboxConfig::preload`]. The first run
    /// with a new build snapshots and compiles each image (seconds); later runs load it
    /// from the cache (milliseconds).
    pub async fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let keep_resident = if dirty::available() {
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

    async fn image(&self, language: Language) -> Result<Arc<GuestImage>, SandboxError> {
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
            (engine, linker, driver::Spare::new(false, false))
        } else {
            // RustPython's instantiation is worth making ahead; its pages are faulted in
            // ahead only where its slots are unmapped between instances.
            let spare = driver::Spare::new(true, tracked_max.is_none());
            (
                self.shared.engine.clone(),
                self.shared.linker.clone(),
                spare,
            )
        };
        let image = image::load(
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
        driver::make_spare(self, &image).await;
        Ok(())
    }

    /// Runs code in a fresh instance. Must be called within a tokio runtime.
    pub fn execute(&self, request: ExecutionRequest) -> Execution {
        let (handle, job) = Execution::start(request);
        let sandbox = self.clone();
        tokio::spawn(driver::run_fresh(sandbox, job));
        handle
    }

    /// Opens a session: one instance kept across executions, so state survives.
    pub fn session(&self, spec: SessionSpec) -> Session {
        Session {
            sandbox: self.clone(),
            spec: Arc::new(spec),
            live: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }
}

/// A linker with WASI, its file calls shadowed by Cordon's in-memory filesystem; each
/// guest adds its own way out (the bridge, or CPython's door).
pub(crate) fn wasi_linker(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut HostState| &mut state.wasi)
        .map_err(engine_error)?;
    wasi_fs::add_to_linker(&mut linker).map_err(engine_error)?;
    Ok(linker)
}

pub(crate) fn engine_error(error: wasmtime::Error) -> SandboxError {
    SandboxError::Engine(format!("{error:#}"))
}

/// The linker of the RustPython and JavaScript guests: WASI and the bridge.
fn linker(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = wasi_linker(engine)?;
    host::add_bridge(&mut linker).map_err(engine_error)?;
    Ok(linker)
}

fn spawn_epoch_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    // A plain thread: it must tick even when every runtime worker is busy running guests.
    let spawned = std::thread::Builder::new()
        .name("cordon-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
    if let Err(error) = spawned {
        // Without a ticker, CPU and wall limits only trigger at host calls; say so loudly.
        eprintln!("cordon-sandbox: could not start the epoch thread: {error}");
    }
}

/// What to run and with which tools and limits.
#[derive(Clone)]
#[non_exhaustive]
pub struct ExecutionRequest {
    /// Guest language.
    pub language: Language,
    /// Source code.
    pub code: String,
    /// The tools this code may call.
    pub tools: Dispatcher,
    /// Limits for this execution.
    pub limits: Limits,
    /// Who decides `ask` calls; `None` parks them for [`Execution::decide`].
    pub approver: Option<Arc<dyn Approver>>,
    /// Id to use (e.g. assigned by a store); a fresh one when `None`.
    pub id: Option<String>,
    /// The files the guest sees at `/workspace`; none when `None`. Its quotas are set
    /// from `limits` when the execution starts.
    pub workspace: Option<Workspace>,
}

impl std::fmt::Debug for ExecutionRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutionRequest")
            .field("language", &self.language)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ExecutionRequest {
    /// A request with default limits.
    pub fn new(language: Language, code: impl Into<String>, tools: Dispatcher) -> Self {
        ExecutionRequest {
            language,
            code: code.into(),
            tools,
            limits: Limits::default(),
            approver: None,
            id: None,
            workspace: None,
        }
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Gives the execution a workspace (`/workspace` in the guest).
    pub fn workspace(mut self, workspace: Workspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// Sets who decides `ask` calls.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Sets the execution id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// The handle of a running execution.
///
/// Events arrive in order and end with `execution.completed`. While the execution is
/// suspended on client tools, post their results with [`Execution::submit_tool_results`].
pub struct Execution {
    id: String,
    events: mpsc::UnboundedReceiver<ExecutionEvent>,
    control: ExecutionControl,
    done: oneshot::Receiver<ExecutionResult>,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Controls an execution from anywhere (a server's request handlers): results, approvals,
/// cancellation. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ExecutionControl {
    pub(crate) client_calls: ClientCallBroker,
    /// Parks `ask` calls when the request had no approver of its own (else stays empty).
    approvals: ApprovalBroker,
    pub(crate) cancel: Arc<tokio::sync::Notify>,
}

impl ExecutionControl {
    /// Delivers results for pending client calls (all at once or over several calls).
    /// Unknown, duplicate or already-answered ids reject the whole request.
    pub fn submit_tool_results(&self, results: Vec<ClientToolResult>) -> Result<(), SubmitError> {
        self.client_calls.submit(results)
    }

    /// Ids of client calls waiting for results.
    pub fn pending_tool_calls(&self) -> Vec<String> {
        self.client_calls.pending()
    }

    /// Decides a parked `ask` approval (only when the request had no approver of its own).
    pub fn decide(&self, approval_id: &str, decision: Decision) -> Result<(), UnknownApproval> {
        self.approvals.resolve(approval_id, decision)
    }

    /// Stops the execution: at the next epoch tick if the guest runs, at once if it waits.
    pub fn cancel(&self) {
        // A stored permit if the driver is not waiting yet: the cancel is never lost.
        self.cancel.notify_one();
    }
}

/// What the driver needs to run an execution.
pub(crate) struct Job {
    pub(crate) id: String,
    pub(crate) request: ExecutionRequest,
    pub(crate) events: cordon_core::dispatch::EventSink,
    pub(crate) control: ExecutionControl,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) done: oneshot::Sender<ExecutionResult>,
}

impl Execution {
    fn start(request: ExecutionRequest) -> (Execution, Job) {
        let id = request.id.clone().unwrap_or_else(|| fresh_id("exec"));
        let (tx, rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        let approvals =
            ApprovalBroker::new(Duration::from_millis(request.limits.client_tool_timeout_ms));
        let approver: Arc<dyn Approver> = match &request.approver {
            Some(approver) => approver.clone(),
            None => Arc::new(approvals.clone()),
        };
        let control = ExecutionControl {
            client_calls: ClientCallBroker::default(),
            approvals,
            cancel: Arc::new(tokio::sync::Notify::new()),
        };
        let job = Job {
            id: id.clone(),
            request,
            events: cordon_core::dispatch::EventSink::new(tx),
            control: control.clone(),
            approver,
            done: done_tx,
        };
        (
            Execution {
                id,
                events: rx,
                control,
                done: done_rx,
            },
            job,
        )
    }

    /// The execution's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The next event; `None` after `execution.completed`.
    pub async fn next_event(&mut self) -> Option<ExecutionEvent> {
        self.events.recv().await
    }

    /// A cloneable controller for this execution.
    pub fn control(&self) -> ExecutionControl {
        self.control.clone()
    }

    /// See [`ExecutionControl::submit_tool_results`].
    pub fn submit_tool_results(&self, results: Vec<ClientToolResult>) -> Result<(), SubmitError> {
        self.control.submit_tool_results(results)
    }

    /// See [`ExecutionControl::decide`].
    pub fn decide(&self, approval_id: &str, decision: Decision) -> Result<(), UnknownApproval> {
        self.control.decide(approval_id, decision)
    }

    /// See [`ExecutionControl::cancel`].
    pub fn cancel(&self) {
        self.control.cancel();
    }

    /// Waits for the end, discarding events not yet read.
    pub async fn wait(mut self) -> ExecutionResult {
        self.events.close();
        match self.done.await {
            Ok(result) => result,
            Err(_) => driver::internal_failure("the execution task ended without a result"),
        }
    }

    /// Splits into the event stream and the final result.
    pub fn into_parts(
        self,
    ) -> (
        mpsc::UnboundedReceiver<ExecutionEvent>,
        ExecutionControl,
        ResultFuture,
    ) {
        (self.events, self.control, ResultFuture { done: self.done })
    }
}

/// Resolves to an execution's result.
#[derive(Debug)]
pub struct ResultFuture {
    done: oneshot::Receiver<ExecutionResult>,
}

impl std::future::Future for ResultFuture {
    type Output = ExecutionResult;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.done).poll(cx).map(|result| {
            result.unwrap_or_else(|_| {
                driver::internal_failure("the execution task ended without a result")
            })
        })
    }
}

/// What a session runs with.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionSpec {
    /// Guest language.
    pub language: Language,
    /// Tools available to every execution of the session.
    pub tools: Dispatcher,
    /// Limits for each execution.
    pub limits: Limits,
    /// Who decides `ask` calls; `None` parks them per execution.
    pub approver: Option<Arc<dyn Approver>>,
    /// The files every execution of the session sees at `/workspace`.
    pub workspace: Option<Workspace>,
}

impl std::fmt::Debug for SessionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSpec")
            .field("language", &self.language)
            .finish_non_exhaustive()
    }
}

impl SessionSpec {
    /// A session spec with default limits.
    pub fn new(language: Language, tools: Dispatcher) -> Self {
        SessionSpec {
            language,
            tools,
            limits: Limits::default(),
            approver: None,
            workspace: None,
        }
    }

    /// Sets the limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Gives the session a workspace (`/workspace` in the guest).
    pub fn workspace(mut self, workspace: Workspace) -> Self {
        self.workspace = Some(workspace);
        self
    }
}

/// A REPL-like session: executions run one at a time on one instance, so globals persist.
///
/// An execution stopped by a limit, a fault or cancellation discards the instance (its
/// state may be half-updated); the next execution starts from a fresh one.
#[derive(Clone)]
pub struct Session {
    sandbox: Sandbox,
    spec: Arc<SessionSpec>,
    live: Arc<tokio::sync::Mutex<Option<driver::LiveInstance>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Runs code in the session's instance (after any execution already running).
    pub fn execute(&self, code: impl Into<String>) -> Execution {
        self.execute_with_id(code, None)
    }

    /// Like [`Self::execute`] with a caller-chosen execution id.
    pub fn execute_with_id(&self, code: impl Into<String>, id: Option<String>) -> Execution {
        let spec = &self.spec;
        let request = ExecutionRequest {
            language: spec.language,
            code: code.into(),
            tools: spec.tools.clone(),
            limits: spec.limits,
            approver: spec.approver.clone(),
            id,
            workspace: spec.workspace.clone(),
        };
        self.execute_request(request)
    }

    /// Like [`Self::execute`] with this execution's own tools instead of the session's:
    /// globals persist while each caller's request declares the tools its code may call
    /// (the model gateway's code-execution containers).
    pub fn execute_with_tools(&self, code: impl Into<String>, tools: Dispatcher) -> Execution {
        let spec = &self.spec;
        self.execute_request(ExecutionRequest {
            language: spec.language,
            code: code.into(),
            tools,
            limits: spec.limits,
            approver: spec.approver.clone(),
            id: None,
            workspace: spec.workspace.clone(),
        })
    }

    fn execute_request(&self, request: ExecutionRequest) -> Execution {
        let (handle, job) = Execution::start(request);
        tokio::spawn(driver::run_in_session(
            self.sandbox.clone(),
            self.live.clone(),
            job,
        ));
        handle
    }

    /// The session's workspace, if it has one.
    pub fn workspace(&self) -> Option<&Workspace> {
        self.spec.workspace.as_ref()
    }

    /// Whether the session currently holds a live instance.
    pub async fn is_warm(&self) -> bool {
        self.live.lock().await.is_some()
    }
}
