//! Runs one execution on an instance and turns whatever happened into an
//! [`ExecutionResult`]: the guest's own outcome, a limit, a cancellation or a fault.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cordon_core::dispatch::CallContext;
use cordon_guest::abi::{self, Outcome};
use cordon_protocol::execution::{
    ErrorInfo, ExecutionEvent, ExecutionResult, ExecutionStatus, LimitKind, ResultEncoding, Usage,
};
use serde_json::Value;
use wasmtime::{Instance, Store, Trap, UpdateDeadline};

use crate::bound;
use crate::host::{self, HostState, MemoryGuard, RunState};
use crate::image::{GuestImage, GuestKind};
use crate::meter::{CpuMetered, Meter, Stop};
use crate::pages::{self, PageRun};
use crate::{Job, Sandbox};

/// An instance with its store, kept by sessions between executions.
pub(crate) struct LiveInstance {
    store: Store<HostState>,
    instance: Instance,
    /// Entered with a `turn` (the CPython guest) rather than `cordon_execute`.
    turns: bool,
}

async fn instantiate(image: &GuestImage) -> Result<LiveInstance, String> {
    // Each image's own engine: the CPython guest has one of its own.
    let mut store = Store::new(image.pre.module().engine(), HostState::new(Meter::new()));
    let turns = match &image.kind {
        GuestKind::Bridge => false,
        GuestKind::Cpython { mounts } => {
            store
                .data_mut()
                .fs
                .set_mounts(crate::wasi_fs::instance_mounts(mounts));
            true
        }
    };
    // No cap while the snapshot's own memory is mapped; each execution sets its limit.
    store.data_mut().memory.limit = usize::MAX;
    store.limiter(|state| &mut state.memory);
    store.epoch_deadline_callback(|state| match state.data().meter.check() {
        // Yield so other executions on this worker thread get their turn.
        Ok(()) => Ok(UpdateDeadline::Yield(1)),
        Err(reason) => Err(host::stop(reason)),
    });
    store.set_epoch_deadline(1);
    let instance = image
        .pre
        .instantiate_async(&mut store)
        .await
        .map_err(|error| format!("could not instantiate the guest: {error:#}"))?;
    let memory = instance.get_memory(&mut store, "memory");
    store.data_mut().guest_memory = memory;
    if let (Some(max), Some(memory)) = (image.tracked_max, memory) {
        let len = crate::dirty::tracked_len(memory.data_size(&store), max);
        // SAFETY: the memory starts its pool slot, every slot of which holds `max` bytes,
        // and no guest code has run in it: it holds what the image does.
        #[allow(unsafe_code, reason = "arming a fresh instance's own memory slot")]
        unsafe {
            crate::dirty::track(memory.data_ptr(&store), len);
        }
    }
    Ok(LiveInstance {
        store,
        instance,
        turns,
    })
}

/// A fresh instance of `image`: the spare one if it is ready, else one made now.
async fn fresh_instance(sandbox: &Sandbox, image: &GuestImage) -> Result<LiveInstance, String> {
    // A full pool may only be waiting for slots whose results were just delivered (or for
    // a spare being made); wait for those (a slot's reset takes micro- to milliseconds),
    // not for anything else. The count is read before each attempt: a slot is freed (a
    // spare put up) before it stops being counted, so when nothing was being returned as
    // an attempt began, a full pool is really full.
    let patience = Instant::now() + RETURN_PATIENCE;
    loop {
        let returning = sandbox.shared.returning.load(Ordering::SeqCst);
        // A spare still being made is not waited for: making one here runs alongside it
        // on another core (measured: waiting made back-to-back executions slower).
        if let Some(live) = image.spare.take() {
            return Ok(live);
        }
        match instantiate(image).await {
            Ok(live) => return Ok(live),
            Err(message) if returning == 0 || Instant::now() > patience => return Err(message),
            Err(_) => tokio::task::yield_now().await,
        }
    }
}

/// How long an execution that finds the pool full waits for slots being returned.
const RETURN_PATIENCE: Duration = Duration::from_millis(100);

/// Counts a fresh instance as being returned to the pool while it lives.
struct Returning<'a>(&'a AtomicUsize);

impl<'a> Returning<'a> {
    fn start(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Returning(count)
    }
}

impl Drop for Returning<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) async fn run_fresh(sandbox: Sandbox, job: Job) {
    let live = match sandbox.image(job.request.language).await {
        Ok(image) => fresh_instance(&sandbox, &image)
            .await
            .map(|live| (image, live)),
        Err(error) => Err(error.to_string()),
    };
    match live {
        Ok((image, mut live)) => {
            let (result, _healthy) = run(&mut live, &job).await;
            // The caller gets the result first; returning the slot to the pool (restoring
            // or unmapping the pages the run wrote) and making the next spare are not on
            // its path. Measured: a fresh JavaScript instance 210-262 -> 105-128 us p50,
            // CPython 3.6-4.6 -> 2.7-3.3 ms.
            let returning = Returning::start(&sandbox.shared.returning);
            finish(job, result);
            // The next spare first (in another slot), then what this run touched (for the
            // spare after it), then this slot's reset: the spare is ready that much sooner
            // for an execution that comes at once. A pool with no other free slot gets its
            // spare after the reset.
            image.spare.refill(&image).await;
            image.spare.learn(&live);
            drop(live);
            image.spare.refill(&image).await;
            drop(returning);
        }
        Err(message) => {
            let result = failure(ExecutionStatus::Error, "SandboxUnavailable", &message);
            finish(job, result);
        }
    }
}

pub(crate) async fn run_in_session(
    sandbox: Sandbox,
    slot: Arc<tokio::sync::Mutex<Option<LiveInstance>>>,
    job: Job,
) {
    let mut slot = slot.lock().await;
    let (live, made_from) = match slot.take() {
        Some(live) => (Ok(live), None),
        None => match sandbox.image(job.request.language).await {
            Ok(image) => (fresh_instance(&sandbox, &image).await, Some(image)),
            Err(error) => (Err(error.to_string()), None),
        },
    };
    match live {
        Ok(mut live) => {
            let (result, healthy) = run(&mut live, &job).await;
            if healthy {
                *slot = Some(live);
            }
            finish(job, result);
            drop(slot);
            // The session took the spare (or would have): make the next one.
            if let Some(image) = made_from {
                make_spare(&sandbox, &image).await;
            }
        }
        Err(message) => finish(
            job,
            failure(ExecutionStatus::Error, "SandboxUnavailable", &message),
        ),
    }
}

/// A fresh instance of an image made ahead of the execution that will take it, with the
/// pages the image's fresh runs touch already faulted in where its slots are unmapped
/// between instances (see [`crate::pages`]). An execution that finds one ready skips
/// instantiating and nearly all of its page faults (measured for RustPython's `print(1)`:
/// ~250 faults, 3 with the spare). The instance is as fresh as one made on the spot: no
/// guest code has run in it.
#[derive(Default)]
pub(crate) struct Spare {
    /// Off for JavaScript: its slots keep their pages, and instantiating is a small part
    /// of its run (measured: no gain).
    enabled: bool,
    /// Fault the pages the last fresh run touched into the spare: off where slots are
    /// reset in place (their pages stay mapped).
    prefault: bool,
    ready: std::sync::Mutex<Option<LiveInstance>>,
    /// One spare is made at a time.
    filling: std::sync::atomic::AtomicBool,
    /// The pages the last fresh run touched (read, or written), to fault in ahead.
    touched: std::sync::Mutex<Arc<[PageRun]>>,
}

/// The most of a spare's memory faulted in ahead (a run that used more leaves the rest
/// to be faulted as it is touched).
const PREFAULT_BUDGET_BYTES: usize = 16 << 20;

impl Spare {
    pub(crate) fn new(enabled: bool, prefault: bool) -> Self {
        Spare {
            enabled,
            prefault,
            ..Spare::default()
        }
    }

    fn take(&self) -> Option<LiveInstance> {
        self.ready.lock().ok()?.take()
    }

    /// Notes the pages a fresh instance's run touched, for the next spare.
    fn learn(&self, live: &LiveInstance) {
        let Some(memory) = live.store.data().guest_memory.filter(|_| self.prefault) else {
            return;
        };
        let budget = PREFAULT_BUDGET_BYTES / pages::page_size();
        if let Ok(runs) = pages::touched(memory.data(&live.store), budget)
            && let Ok(mut touched) = self.touched.lock()
        {
            *touched = runs.into();
        }
    }

    /// Makes the spare if there is none (and no other task is making it). A full pool
    /// leaves it unmade: executions then instantiate as they come.
    async fn refill(&self, image: &GuestImage) {
        let ready = || self.ready.lock().map_or(true, |ready| ready.is_some());
        if !self.enabled || ready() || self.filling.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(mut live) = instantiate(image).await {
            if self.prefault
                && let Some(memory) = live.store.data().guest_memory
            {
                let touched = self.touched.lock().map(|t| t.clone()).unwrap_or_default();
                pages::populate(memory.data_mut(&mut live.store), &touched);
            }
            if let Ok(mut ready) = self.ready.lock() {
                *ready = Some(live);
            }
        }
        self.filling.store(false, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spare")
            .field("enabled", &self.enabled)
            .field("prefault", &self.prefault)
            .finish_non_exhaustive()
    }
}

/// Makes `image`'s spare instance if it has none (before a first execution, and after a
/// session took it), counted as a slot being returned while it is made.
pub(crate) async fn make_spare(sandbox: &Sandbox, image: &GuestImage) {
    let returning = Returning::start(&sandbox.shared.returning);
    image.spare.refill(image).await;
    drop(returning);
}

fn finish(job: Job, result: ExecutionResult) {
    // The copy is for a listener; with none (a caller that only waits for the result) it
    // would clone every tool call's input for nothing.
    if job.events.is_active() {
        job.events.emit(ExecutionEvent::Completed(result.clone()));
    }
    // The handle may be gone (caller stopped caring); the result is still in the events.
    let _ = job.done.send(result);
}

enum Ended {
    Returned(wasmtime::Result<()>),
    Stopped(Stop),
}

fn memory_size(live: &mut LiveInstance) -> usize {
    live.instance
        .get_memory(&mut live.store, "memory")
        .map(|memory| memory.data_size(&live.store))
        .unwrap_or(0)
}

/// Runs `job` on `live`; returns the result and whether the instance may be reused.
async fn run(live: &mut LiveInstance, job: &Job) -> (ExecutionResult, bool) {
    let request = &job.request;
    let limits = request.limits;
    let meter = live.store.data().meter.clone();
    meter.reset(&limits, job.events.clone());

    let current = memory_size(live);
    let limit = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
    if current > limit {
        let message = format!(
            "the {} image needs {} MiB before any code runs; memory_bytes is {} MiB",
            request.language.as_str(),
            current >> 20,
            limit >> 20
        );
        let mut result = failure(ExecutionStatus::LimitExceeded, "LimitExceeded", &message);
        result.limit = Some(LimitKind::Memory);
        return (result, true);
    }
    if let Some(workspace) = &request.workspace {
        workspace.set_quota(crate::workspace::Quota {
            bytes: limits.workspace_bytes,
            files: limits.workspace_files,
        });
    }
    live.store.data_mut().fs.attach(request.workspace.clone());
    // `/tmp` of the CPython guest: the workspace's quotas, counted apart from it.
    live.store
        .data()
        .fs
        .set_scratch_quota(crate::workspace::Quota {
            bytes: limits.workspace_bytes,
            files: limits.workspace_files,
        });
    live.store.data_mut().memory = MemoryGuard {
        limit,
        hit: false,
        peak: current,
    };

    let registry = request.tools.registry();
    let names = registry.names();
    let frame = abi::encode_execute_request(&names, &request.code);
    let Ok(frame_len) = i32::try_from(frame.len()) else {
        let mut result = failure(
            ExecutionStatus::LimitExceeded,
            "LimitExceeded",
            "the code is larger than 2 GiB",
        );
        result.limit = Some(LimitKind::Payload);
        return (result, true);
    };
    let call_context = CallContext {
        execution_id: job.id.clone(),
        events: job.events.clone(),
        client_calls: job.control.client_calls.clone(),
        approver: job.approver.clone(),
        client_tool_timeout: Duration::from_millis(limits.client_tool_timeout_ms),
        max_payload_bytes: limits.max_payload_bytes,
    };
    live.store.data_mut().run = Some(RunState {
        inbox: frame,
        dispatcher: request.tools.clone(),
        call_context: Arc::new(call_context),
        limits,
        tool_calls: Vec::new(),
        recorded_input_bytes: 0,
        inputs_truncated: false,
        outcome: None,
    });
    job.events.emit(ExecutionEvent::Started {
        execution_id: job.id.clone(),
        language: request.language,
    });

    let ended = drive(live, job, &meter, frame_len).await;

    let state = live.store.data_mut();
    let run = state.run.take();
    let memory = std::mem::take(&mut state.memory);
    let (tool_calls, inputs_truncated, outcome) = run
        .map(|run| (run.tool_calls, run.inputs_truncated, run.outcome))
        .unwrap_or_default();
    let wall_ms = u64::try_from(meter.started().elapsed().as_millis()).unwrap_or(u64::MAX);
    let usage = Usage {
        wall_ms,
        cpu_ms: u64::try_from(meter.cpu_used().as_millis()).unwrap_or(u64::MAX),
        peak_memory_bytes: memory.peak as u64,
    };
    let (mut result, healthy) = classify(ended, outcome, &meter, &memory, limits.memory_bytes);
    let mut output = meter.output();
    output.finish();
    let total = output.total();
    (result.stdout, result.stderr) = output.take();
    drop(output);
    let mut truncated = inputs_truncated || total > limits.max_output_bytes;
    // The final value is output too: a huge result must not slip past the output limit.
    let result_size = bound::value_len(&result.result) as u64;
    if result.status == ExecutionStatus::Completed && total + result_size > limits.max_output_bytes
    {
        truncated = true;
        result.status = ExecutionStatus::LimitExceeded;
        result.limit = Some(LimitKind::Output);
        result.result = Value::Null;
        result.result_encoding = None;
        result.error = Some(ErrorInfo {
            error_type: "LimitExceeded".into(),
            message: format!(
                "the final value ({result_size} bytes) plus output exceeds {} bytes",
                limits.max_output_bytes
            ),
            traceback: String::new(),
        });
    }
    result.tool_calls = tool_calls;
    result.usage = usage;
    // Error text and tool inputs share what is left of the budget.
    truncated |= bound::fit_to_output_limit(&mut result, limits.max_output_bytes);
    result.truncated = truncated;
    (result, healthy)
}

/// Calls the guest's `cordon_execute`, racing it against the wall limit and cancellation.
async fn drive(live: &mut LiveInstance, job: &Job, meter: &Arc<Meter>, frame_len: i32) -> Ended {
    if live.turns {
        live.store.set_epoch_deadline(1);
        let call = CpuMetered::new(
            crate::cpython::enter(&mut live.store, live.instance),
            meter.clone(),
        );
        return race(call, job, meter).await;
    }
    let execute = match live
        .instance
        .get_typed_func::<i32, ()>(&mut live.store, abi::EXPORT_EXECUTE)
    {
        Ok(execute) => execute,
        Err(error) => return Ended::Returned(Err(error)),
    };
    live.store.set_epoch_deadline(1);
    let call = CpuMetered::new(
        execute.call_async(&mut live.store, frame_len),
        meter.clone(),
    );
    race(call, job, meter).await
}

/// Races the guest's entry call against the wall limit and cancellation.
async fn race(
    call: impl std::future::Future<Output = wasmtime::Result<()>>,
    job: &Job,
    meter: &Arc<Meter>,
) -> Ended {
    tokio::pin!(call);
    loop {
        // While suspended on client tools the wall clock is paused; re-check periodically.
        let wait = meter.wall_remaining().unwrap_or(Duration::from_millis(250));
        tokio::select! {
            returned = &mut call => return Ended::Returned(returned),
            () = tokio::time::sleep(wait) => {
                if meter.wall_remaining() == Some(Duration::ZERO) {
                    // Dropping `call` unwinds the guest wherever it waits (host call, sleep).
                    return Ended::Stopped(meter.wall_stop());
                }
            }
            () = job.control.cancel.notified() => {
                return Ended::Stopped(meter.record_stop(Stop::Cancelled));
            }
        }
    }
}

fn stopped(reason: Stop) -> (ExecutionResult, bool) {
    let result = match reason {
        Stop::Limit { kind, message } => {
            let mut result = failure(ExecutionStatus::LimitExceeded, "LimitExceeded", &message);
            result.limit = Some(kind);
            result
        }
        Stop::Cancelled => failure(
            ExecutionStatus::Cancelled,
            "Cancelled",
            "the execution was cancelled",
        ),
        Stop::Bridge(message) => failure(
            ExecutionStatus::Error,
            "BridgeViolation",
            &format!("the guest broke the bridge protocol: {message}"),
        ),
    };
    (result, false)
}

fn memory_stop(limit: u64) -> (ExecutionResult, bool) {
    stopped(Stop::limit(
        LimitKind::Memory,
        format!("memory limit of {} MiB reached", limit >> 20),
    ))
}

fn classify(
    ended: Ended,
    outcome: Option<Outcome>,
    meter: &Meter,
    memory: &MemoryGuard,
    memory_limit: u64,
) -> (ExecutionResult, bool) {
    // A recorded stop comes first: everything after it is its consequence.
    if let Some(reason) = meter.stop_reason() {
        return stopped(reason);
    }
    match ended {
        Ended::Stopped(reason) => stopped(reason),
        Ended::Returned(Err(trap)) => {
            if let Some(reason) = trap.downcast_ref::<Stop>() {
                return stopped(reason.clone());
            }
            if memory.hit {
                return memory_stop(memory_limit);
            }
            let (kind, message) = match trap.downcast_ref::<Trap>() {
                Some(Trap::StackOverflow) => (
                    "StackOverflow",
                    "the guest ran out of stack (recursion too deep)".to_owned(),
                ),
                Some(trap) => ("GuestFault", format!("the guest runtime trapped: {trap}")),
                None => (
                    "GuestFault",
                    format!("the guest runtime failed: {}", first_line(&trap)),
                ),
            };
            (failure(ExecutionStatus::Error, kind, &message), false)
        }
        Ended::Returned(Ok(())) => match outcome {
            Some(Outcome::Completed {
                result_json,
                result_repr,
            }) => {
                let mut result = empty_result(ExecutionStatus::Completed);
                if let Some(json) = result_json {
                    // The guest encoded it; fall back to text if it is somehow not JSON.
                    match serde_json::from_str(&json) {
                        Ok(value) => {
                            result.result = value;
                            result.result_encoding = Some(ResultEncoding::Json);
                        }
                        Err(_) => {
                            result.result = Value::String(json);
                            result.result_encoding = Some(ResultEncoding::Repr);
                        }
                    }
                } else if let Some(repr) = result_repr {
                    result.result = Value::String(repr);
                    result.result_encoding = Some(ResultEncoding::Repr);
                }
                (result, true)
            }
            Some(Outcome::Error {
                error_type,
                message,
                traceback,
            }) => {
                // Whatever the guest called it (MemoryError, InternalError: out of memory, or a
                // later error caused by it), an uncaught error after the cap was hit is the cap.
                if memory.hit {
                    return memory_stop(memory_limit);
                }
                let mut result = failure(ExecutionStatus::Error, &error_type, &message);
                if let Some(error) = &mut result.error {
                    error.traceback = traceback;
                }
                (result, true)
            }
            None => (
                failure(
                    ExecutionStatus::Error,
                    "GuestFault",
                    "the guest returned without reporting an outcome",
                ),
                false,
            ),
        },
    }
}

fn first_line(error: &wasmtime::Error) -> String {
    // The outer context of a failure inside the guest is only "error while executing at
    // wasm backtrace:"; what went wrong is the innermost cause.
    error
        .root_cause()
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A result with no output, value, error, tool calls or usage (filled in by the caller).
fn empty_result(status: ExecutionStatus) -> ExecutionResult {
    ExecutionResult {
        status,
        limit: None,
        stdout: String::new(),
        stderr: String::new(),
        result: Value::Null,
        result_encoding: None,
        error: None,
        tool_calls: Vec::new(),
        usage: Usage::default(),
        truncated: false,
    }
}

/// An [`empty_result`] that ended with `error_type: message`.
fn failure(status: ExecutionStatus, error_type: &str, message: &str) -> ExecutionResult {
    let error = ErrorInfo {
        error_type: error_type.into(),
        message: message.into(),
        traceback: String::new(),
    };
    ExecutionResult {
        error: Some(error),
        ..empty_result(status)
    }
}

/// A result for failures of Cordon itself (never expected; reported, not panicked).
pub(crate) fn internal_failure(message: &str) -> ExecutionResult {
    failure(ExecutionStatus::Error, "CordonInternalError", message)
}
