//! Runs one execution on an instance: sets the run up in the store, enters the guest,
//! races it against the wall limit and cancellation, and fits what came out into an
//! [`ExecutionResult`] (how it ended is classified in `ending.rs`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use cordon_core::dispatch::CallContext;
use cordon_guest::abi;
use cordon_protocol::execution::{
    ErrorInfo, ExecutionEvent, ExecutionResult, ExecutionStatus, LimitKind, Usage,
};
use serde_json::Value;

use crate::cpython;
use crate::ending::{Ended, classify, failure};
use crate::error::SandboxError;
use crate::execution::Job;
use crate::host_state::{MemoryGuard, RunState};
use crate::image::{GuestImage, LiveInstance, SessionSlot};
use crate::meter::{CpuMetered, Meter, Stop};
use crate::output_budget;
use crate::pool::{Returning, fresh_instance, make_spare};
use crate::workspace::Quota;

/// Runs `job` on a fresh instance of the image `image` resolves to; `returning` counts the
/// pool's slots being returned (see [`Returning`]).
pub(crate) async fn run_fresh(
    image: impl Future<Output = Result<Arc<GuestImage>, SandboxError>>,
    returning: &AtomicUsize,
    job: Job,
) {
    let live = match image.await {
        Ok(image) => fresh_instance(returning, &image)
            .await
            .map(|live| (image, live)),
        Err(error) => Err(error.to_string()),
    };
    match live {
        Ok((image, mut live)) => {
            let (result, _healthy) = run(&mut live, &job).await;
            // The caller gets the result first; returning the slot to the pool (restoring
            // or unmapping the pages the run wrote) and making the next spare are not on
            // its path (figures in `docs/benchmarks.md`).
            let returning = Returning::start(returning);
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

/// Runs `job` on the session instance in `slot`, or on a fresh instance of the image
/// `image` resolves to (awaited only then) when it holds none; keeps the instance there
/// if it may be reused.
pub(crate) async fn run_in_session(
    image: impl Future<Output = Result<Arc<GuestImage>, SandboxError>>,
    returning: &AtomicUsize,
    slot: Arc<tokio::sync::Mutex<SessionSlot>>,
    job: Job,
) {
    let mut slot = slot.lock().await;
    if slot.paused {
        // As below: the slot is free before the refusal is out.
        drop(slot);
        let message = "the session was paused; resume it to run code in it";
        finish(
            job,
            failure(ExecutionStatus::Error, "SessionPaused", message),
        );
        return;
    }
    let (live, made_from) = match slot.live.take() {
        Some(live) => (Ok(live), None),
        None => match image.await {
            Ok(image) => (fresh_instance(returning, &image).await, Some(image)),
            Err(error) => (Err(error.to_string()), None),
        },
    };
    match live {
        Ok(mut live) => {
            let (result, healthy) = run(&mut live, &job).await;
            if healthy {
                slot.live = Some(live);
            }
            // The slot is free before the result is out: a caller that pauses the session
            // as soon as it has the result must find it idle.
            drop(slot);
            finish(job, result);
            // The session took the spare (or would have): make the next one.
            if let Some(image) = made_from {
                make_spare(returning, &image).await;
            }
        }
        Err(message) => {
            drop(slot);
            finish(
                job,
                failure(ExecutionStatus::Error, "SandboxUnavailable", &message),
            );
        }
    }
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
        workspace.set_quota(Quota {
            bytes: limits.workspace_bytes,
            files: limits.workspace_files,
        });
    }
    live.store.data_mut().fs.attach(request.workspace.clone());
    // `/tmp` of the CPython guest: the workspace's quotas, counted apart from it.
    live.store.data().fs.set_scratch_quota(Quota {
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
    let result_size = output_budget::value_len(&result.result) as u64;
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
    truncated |= output_budget::fit_to_output_limit(&mut result, limits.max_output_bytes);
    result.truncated = truncated;
    (result, healthy)
}

/// Calls the guest's `cordon_execute`, racing it against the wall limit and cancellation.
async fn drive(live: &mut LiveInstance, job: &Job, meter: &Arc<Meter>, frame_len: i32) -> Ended {
    if live.turns {
        live.store.set_epoch_deadline(1);
        let call = CpuMetered::new(
            cpython::enter(&mut live.store, live.instance),
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
