//! [`ComputerPool`]: the computer sessions of one server, the one Chromium they share
//! (started on the first session) and the tasks their jobs run on.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cordon_computer::browser::{Browser, BrowserOptions};
use cordon_computer::origin::OriginPolicy;
use cordon_computer::trajectory::TrajectoryWriter;
use cordon_computer::{ActionError, Computer, EngineOptions, Error};
use cordon_protocol::computer::{Action, ComputerCall};
use serde_json::{Value, json};

use super::error::ComputerError;
use super::live_computer::{LiveComputer, SharedComputer, Stepped};
use super::setup::Setup;

/// Where computer jobs run: each job is a task of its own on the server's runtime, so
/// sessions step on every worker thread at once, and a job runs to its end even if its
/// caller stops waiting (an HTTP client that hangs up mid-step).
#[derive(Default)]
struct Worker {
    started: std::sync::atomic::AtomicBool,
}

impl Worker {
    /// Runs `job` as a task of its own and waits for its output.
    async fn run<T, F, Fut>(&self, job: F) -> Result<T, ComputerError>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        self.started.store(true, Ordering::SeqCst);
        tokio::spawn(job()).await.map_err(|error| {
            ComputerError::Browser(format!("the computer-use task failed: {error}"))
        })
    }
}

/// Computer sessions of one server and the one Chromium (started on the first session,
/// restarted by the browser backend if it crashes).
pub struct ComputerPool {
    options: BrowserOptions,
    worker: Worker,
    browser: Arc<tokio::sync::Mutex<Option<Browser>>>,
    pid: Arc<AtomicU32>,
}

impl std::fmt::Debug for ComputerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputerPool")
            .field("chromium", &self.options.executable)
            .field("pid", &self.chromium_pid())
            .finish_non_exhaustive()
    }
}

impl ComputerPool {
    /// A pool that starts Chromium as `options` say, when the first session opens.
    pub fn new(options: BrowserOptions) -> ComputerPool {
        ComputerPool {
            options,
            worker: Worker::default(),
            browser: Arc::default(),
            pid: Arc::default(),
        }
    }

    /// Why `policy`, widened by what the operator allows, refuses `url` (literal
    /// private-network addresses included), if it does; names that resolve to one are
    /// refused when the session connects.
    pub fn refusal(&self, policy: &OriginPolicy, url: &str) -> Option<String> {
        let policy = policy.clone().with_operator(
            &self.options.allow_origins,
            self.options.allow_private_network,
        );
        policy.check(url).err().map(|refusal| refusal.0)
    }

    /// Whether the operator named `url`'s origin (`--allow-origin`): such a start page
    /// needs no approval when a model opens it.
    pub fn operator_allows(&self, url: &str) -> bool {
        let named = OriginPolicy::new(self.options.allow_origins.clone(), Vec::new())
            .with_operator(&[], true);
        !self.options.allow_origins.is_empty() && named.check(url).is_ok()
    }

    /// The process id of the running Chromium, if one runs.
    pub fn chromium_pid(&self) -> Option<u32> {
        match self.pid.load(Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Opens a session and takes its first screenshot (step 1). With `record`, the
    /// trajectory is written to that directory.
    pub async fn open(
        &self,
        id: String,
        setup: &Setup,
        record: Option<PathBuf>,
    ) -> Result<(SharedComputer, Stepped), ComputerError> {
        let slot = self.browser.clone();
        let pid = self.pid.clone();
        let options = self.options.clone();
        let setup = setup.clone();
        self.worker
            .run(move || async move {
                let browser = {
                    let mut slot = slot.lock().await;
                    match &*slot {
                        Some(browser) => browser.clone(),
                        None => {
                            let browser = Browser::launch(options)
                                .await
                                .map_err(ComputerError::from_launch)?;
                            *slot = Some(browser.clone());
                            browser
                        }
                    }
                };
                let session = browser.new_session(setup.session_options()).await.map_err(
                    |error| match error {
                        Error::Action(ActionError::Blocked { .. }) => {
                            ComputerError::Blocked(error.to_string())
                        }
                        Error::BrowserMissing { .. } => ComputerError::from_launch(error),
                        other => ComputerError::Browser(format!(
                            "the browser session did not open: {other}"
                        )),
                    },
                )?;
                // A lost browser is restarted by `new_session`: the pid may be new.
                pid.store(browser.pid().unwrap_or(0), Ordering::SeqCst);
                let mut engine = EngineOptions::default();
                engine.rules = setup.rules.clone();
                engine.format = setup.image_format;
                let mut computer = Computer::new(session, engine);
                let recording = record.is_some();
                if let Some(dir) = record {
                    match TrajectoryWriter::create(&dir, &setup.session_json()) {
                        Ok(writer) => computer.record(writer),
                        Err(error) => {
                            let _closed = computer.backend_mut().close().await;
                            return Err(ComputerError::Trajectory(error.to_string()));
                        }
                    }
                }
                let display = computer.scaler().display;
                let mut live = LiveComputer {
                    id,
                    computer,
                    pending: None,
                    recording,
                    closed: None,
                    display,
                    viewport: setup.viewport,
                };
                let first = ComputerCall::native(Action::Screenshot);
                let raw = json!({"format": "native", "actions": [{"kind": "screenshot"}]});
                match live.step(first, &raw).await {
                    Ok(stepped) => Ok((Arc::new(tokio::sync::Mutex::new(live)), stepped)),
                    Err(error) => {
                        live.close("it failed to start").await;
                        Err(error)
                    }
                }
            })
            .await?
    }

    /// Starts the pool's Chromium if none runs, and returns it: benchmark environments
    /// (`/v1/envs`) run in the same browser as the sessions, each in its own context.
    pub fn launcher(
        &self,
    ) -> Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<Browser, String>> + Send + Sync>
    {
        // Shutting down then stops a browser only environments used.
        self.worker.started.store(true, Ordering::SeqCst);
        let (slot, options, pid) = (self.browser.clone(), self.options.clone(), self.pid.clone());
        Arc::new(move || {
            let (slot, options, pid) = (slot.clone(), options.clone(), pid.clone());
            Box::pin(async move {
                let mut slot = slot.lock().await;
                if let Some(browser) = &*slot {
                    return Ok(browser.clone());
                }
                let browser = Browser::launch(options)
                    .await
                    .map_err(|error| ComputerError::from_launch(error).to_string())?;
                pid.store(browser.pid().unwrap_or(0), Ordering::SeqCst);
                *slot = Some(browser.clone());
                Ok(browser)
            })
        })
    }

    /// Runs one call on `computer`.
    pub async fn step(
        &self,
        computer: &SharedComputer,
        call: ComputerCall,
        raw: Value,
    ) -> Result<Stepped, ComputerError> {
        let computer = computer.clone();
        self.worker
            .run(move || async move { computer.lock().await.step(call, &raw).await })
            .await?
    }

    /// Approves or denies the step waiting on `approval_id`.
    pub async fn decide(
        &self,
        computer: &SharedComputer,
        approval_id: String,
        approve: bool,
    ) -> Result<Stepped, ComputerError> {
        let computer = computer.clone();
        self.worker
            .run(move || async move { computer.lock().await.decide(&approval_id, approve).await })
            .await?
    }

    /// Closes a session (its BrowserContext, with cookies and storage, is disposed of).
    pub async fn close(&self, computer: &SharedComputer, why: &str) {
        let computer = computer.clone();
        let why = why.to_owned();
        let _done = self
            .worker
            .run(move || async move { computer.lock().await.close(&why).await })
            .await;
    }

    /// Stops Chromium (every session ends with it). The next `open` starts a new one.
    pub async fn shutdown(&self) {
        if self.jobs_started() {
            let slot = self.browser.clone();
            let pid = self.pid.clone();
            let _done = self
                .worker
                .run(move || async move {
                    let browser = slot.lock().await.take();
                    if let Some(browser) = browser {
                        let _closed = browser.close().await;
                    }
                    pid.store(0, Ordering::SeqCst);
                })
                .await;
        }
    }

    fn jobs_started(&self) -> bool {
        self.worker.started.load(Ordering::SeqCst)
    }
}
