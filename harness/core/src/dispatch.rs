//! Dispatch: one batch of tool calls from a guest, from raw `(name, input JSON)` pairs to
//! results in request order, through validation, policy, approvals, host handlers and
//! client hand-off.
//!
//! # Events of one batch, in order
//!
//! 1. Calls that fail before they can run — input not JSON or not an object, unknown tool,
//!    schema violation, policy `deny` — get their `tool.result` (`is_error: true`) at once,
//!    in request order.
//! 2. Calls with policy `ask`: one `approval.required` each, in request order; the
//!    decisions are awaited together; a refused call gets its `tool.result` error.
//! 3. Every call that runs gets its `tool.call`, in request order. A `tool.call` means
//!    "this call runs now": for `client` calls it is the request to the caller, so it is
//!    never sent for a call that is denied or still waiting for approval. Client calls are
//!    registered with the [`ClientCallBroker`] before their `tool.call` is sent, so a fast
//!    caller cannot answer an id that is not yet pending.
//! 4. If any client calls run: one `execution.awaiting` listing their ids and deadline.
//! 5. A `tool.result` for each running call as it finishes (host and client calls run
//!    concurrently, so these may come in any order).
//!
//! # Bounds
//!
//! Host calls of one batch run at most [`DEFAULT_HOST_CONCURRENCY`] at a time (set with
//! [`Dispatcher::with_host_concurrency`]); client calls all go out at once, since the
//! caller runs them. A result larger than [`CallContext::max_payload_bytes`] — from any
//! handler, a connected server or the client — reaches neither the guest nor the events:
//! the call fails with a message starting `payload_too_large`.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cordon_guest::abi::{CallResult, ToolErrorKind, ToolFailure};
use cordon_protocol::execution::{
    Caller, ClientToolResult, Decision, ExecutionEvent, Limits, ToolCallRecord,
};
use cordon_protocol::tool::{HandlerSpec, Locus, Policy};
use futures::StreamExt;
use futures::future::join_all;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use crate::broker::{ApprovalRequest, ApproveListed, Approver, ClientCallBroker};
use crate::handlers::{HostOutput, HttpClient, payload_too_large, run_host};
use crate::registry::{RegisteredTool, ToolRegistry};
use crate::truncate::truncate_chars;

/// Tool names listed in an `unknown_tool` message.
const LISTED_TOOL_NAMES: usize = 20;
/// Characters of an unknown tool's name kept in messages and records: the name comes from
/// guest code and may be arbitrarily long.
const MAX_ECHOED_NAME_CHARS: usize = 200;
/// Host calls of one batch that run at once, unless [`Dispatcher::with_host_concurrency`]
/// says otherwise: enough to overlap slow I/O, few enough that a guest batching 1,000
/// calls does not start 1,000 processes or connections at once.
pub const DEFAULT_HOST_CONCURRENCY: usize = 8;

/// Where execution events go. Sending never fails the execution: a caller that stopped
/// listening just stops receiving.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: Option<UnboundedSender<ExecutionEvent>>,
}

impl EventSink {
    /// Sends events to `tx`.
    pub fn new(tx: UnboundedSender<ExecutionEvent>) -> Self {
        EventSink { tx: Some(tx) }
    }

    /// Drops every event (nobody is listening).
    pub fn discard() -> Self {
        EventSink { tx: None }
    }

    /// Whether events can still reach someone; when not, callers may skip building them.
    pub fn is_active(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// Sends one event; a closed channel is ignored.
    pub fn emit(&self, event: ExecutionEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }

    /// Builds and sends an event only when someone listens: events clone tool inputs and
    /// outputs, which would be wasted work on a discarding sink.
    fn emit_with(&self, event: impl FnOnce() -> ExecutionEvent) {
        if self.is_active() {
            self.emit(event());
        }
    }
}

impl Default for EventSink {
    fn default() -> Self {
        EventSink::discard()
    }
}

/// Everything a batch needs from the execution that makes it. One per execution.
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The calling execution (the `caller` of every `tool.call`).
    pub execution_id: String,
    /// Where events go.
    pub events: EventSink,
    /// Where client calls wait for results.
    pub client_calls: ClientCallBroker,
    /// Who decides `ask` calls.
    pub approver: Arc<dyn Approver>,
    /// How long one batch waits for client results.
    pub client_tool_timeout: Duration,
    /// Largest result of one call, in bytes of JSON (`max_payload_bytes`): handlers stop
    /// being read past it, and bigger results fail with `payload_too_large`.
    pub max_payload_bytes: u64,
}

impl CallContext {
    /// A context with no event listener, a fresh broker, an approver that refuses every
    /// `ask` call, and the default client-tool timeout and payload limit. Fields are
    /// public to override.
    pub fn new(execution_id: impl Into<String>) -> Self {
        CallContext {
            execution_id: execution_id.into(),
            events: EventSink::discard(),
            client_calls: ClientCallBroker::default(),
            approver: Arc::new(ApproveListed::default()),
            client_tool_timeout: Duration::from_millis(Limits::default().client_tool_timeout_ms),
            max_payload_bytes: Limits::default().max_payload_bytes,
        }
    }
}

/// One finished call of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchedCall {
    /// What goes into the execution result's `tool_calls`.
    pub record: ToolCallRecord,
    /// What the guest receives: JSON text, or the failure.
    pub result: CallResult,
    /// The length of the input's text as the caller sent it (what holding its record
    /// costs, without serializing it again).
    pub input_bytes: usize,
    /// Time the *batch* spent parked on approvals and client results, which the sandbox
    /// excludes from the wall limit. Calls of a batch wait concurrently, so the batch's
    /// parked time is carried by its first call and the others carry zero: summing (or
    /// taking the maximum) over a batch gives the right total without double counting.
    pub suspended: Duration,
}

/// Runs batches of tool calls against a registry. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    registry: Arc<ToolRegistry>,
    http: HttpClient,
    host_concurrency: usize,
}

/// One call while its batch is in flight.
struct Slot<'r> {
    id: String,
    name: String,
    /// The parsed input (`null` when it was not JSON).
    input: Value,
    /// The length of its text.
    input_bytes: usize,
    started: Instant,
    tool: Option<&'r RegisteredTool>,
    done: Option<(CallResult, u64)>,
}

impl Slot<'_> {
    fn locus(&self) -> Locus {
        self.tool
            .map_or(Locus::Host, |tool| tool.declaration.handler.locus())
    }
}

impl Dispatcher {
    /// A dispatcher over `registry` (its `http` calls share the process's HTTP client).
    pub fn new(registry: Arc<ToolRegistry>) -> Self {
        Dispatcher {
            registry,
            http: HttpClient,
            host_concurrency: DEFAULT_HOST_CONCURRENCY,
        }
    }

    /// Sets how many host calls of one batch run at once (at least 1; default
    /// [`DEFAULT_HOST_CONCURRENCY`]).
    pub fn with_host_concurrency(mut self, limit: usize) -> Self {
        self.host_concurrency = limit.max(1);
        self
    }

    /// The tools this dispatcher serves.
    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Validates and runs a batch; results in request order. Never panics on guest input.
    ///
    /// See the [module docs](self) for the events it emits.
    pub async fn call_batch(
        &self,
        ctx: &CallContext,
        calls: Vec<(String, String)>,
    ) -> Vec<DispatchedCall> {
        let mut suspended = Duration::ZERO;
        let mut slots: Vec<Slot<'_>> = Vec::with_capacity(calls.len());
        let mut needs_approval = Vec::new();
        for (name, input) in calls {
            let (mut slot, checked) = self.prepare(name, &input);
            match checked {
                Ok(Policy::Allow) => {}
                Ok(Policy::Ask) => needs_approval.push(slots.len()),
                Ok(Policy::Deny) => {
                    let message = format!("policy denies tool `{}`", slot.name);
                    finish(ctx, &mut slot, Err(failure(ToolErrorKind::Denied, message)));
                }
                Err(error) => finish(ctx, &mut slot, Err(error)),
            }
            slots.push(slot);
        }

        if !needs_approval.is_empty() {
            let parked = Instant::now();
            let requests: Vec<ApprovalRequest> = needs_approval
                .iter()
                .map(|&index| approval_request(&slots[index]))
                .collect();
            for request in &requests {
                ctx.events.emit_with(|| ExecutionEvent::ApprovalRequired {
                    approval_id: request.approval_id.clone(),
                    call_id: request.call_id.clone(),
                    tool: request.tool.clone(),
                    input: request.input.clone(),
                    reason: request.reason.clone(),
                });
            }
            let decisions =
                join_all(requests.iter().map(|request| ctx.approver.decide(request))).await;
            suspended += parked.elapsed();
            for (&index, decision) in needs_approval.iter().zip(decisions) {
                if decision == Decision::Deny {
                    let slot = &mut slots[index];
                    let message = format!("approval refused for `{}`", slot.name);
                    finish(ctx, slot, Err(failure(ToolErrorKind::Denied, message)));
                }
            }
        }

        // The common case, one allowed host call from a loop, runs without the batch's
        // machinery (its futures, vectors and join are most of a call's host cost).
        if let [slot] = slots.as_mut_slice()
            && let Some(tool) = slot.tool.filter(|_| slot.done.is_none())
            && tool.declaration.handler.locus() == Locus::Host
        {
            announce(ctx, slot, Locus::Host);
            let max_payload = usize::try_from(ctx.max_payload_bytes).unwrap_or(usize::MAX);
            let outcome = run_host(tool, &slot.input, &self.http, max_payload).await;
            slot.done = Some(emit_result(ctx, slot, outcome));
            return slots
                .into_iter()
                .map(|slot| dispatched(slot, suspended))
                .collect();
        }

        // Announce every call that runs, registering client calls before their `tool.call`.
        let mut host = Vec::new();
        let mut client = Vec::new();
        for (index, slot) in slots.iter().enumerate() {
            let Some(tool) = slot.tool.filter(|_| slot.done.is_none()) else {
                continue;
            };
            let locus = tool.declaration.handler.locus();
            match locus {
                Locus::Client => {
                    client.push((index, ctx.client_calls.register(&slot.id)));
                }
                Locus::Host => host.push((index, tool)),
            }
            announce(ctx, slot, locus);
        }
        let timeout = ctx.client_tool_timeout;
        let cancel_on_drop = CancelPending {
            broker: &ctx.client_calls,
            ids: client
                .iter()
                .map(|(index, _)| slots[*index].id.clone())
                .collect(),
        };
        if !cancel_on_drop.ids.is_empty() {
            ctx.events.emit(ExecutionEvent::Awaiting {
                pending: cancel_on_drop.ids.clone(),
                deadline_unix_ms: unix_ms_after(timeout),
            });
        }

        let slots_ref = &slots;
        let max_payload = usize::try_from(ctx.max_payload_bytes).unwrap_or(usize::MAX);
        // Built as a Vec first: a lazy `map` inside the stream trips rustc's inference of
        // `Send` for the borrowing closures (rust-lang/rust#64552).
        let host_calls: Vec<_> = host
            .into_iter()
            .map(|(index, tool)| async move {
                let slot = &slots_ref[index];
                let outcome = run_host(tool, &slot.input, &self.http, max_payload).await;
                (index, emit_result(ctx, slot, outcome))
            })
            .collect();
        let concurrency = self.host_concurrency;
        let host_runs = async move {
            // The common case, one call from a loop, skips the stream's machinery.
            if host_calls.len() <= 1 {
                let mut done = Vec::with_capacity(1);
                for call in host_calls {
                    done.push(call.await);
                }
                return done;
            }
            futures::stream::iter(host_calls)
                .buffer_unordered(concurrency)
                .collect::<Vec<_>>()
                .await
        };
        let client_wait = async {
            if client.is_empty() {
                return (Vec::new(), Duration::ZERO);
            }
            let waiting = Instant::now();
            let deadline = deadline_after(timeout);
            let results = join_all(client.into_iter().map(|(index, receiver)| async move {
                let slot = &slots_ref[index];
                let outcome = await_client(ctx, slot, receiver, deadline, timeout).await;
                (index, emit_result(ctx, slot, outcome))
            }))
            .await;
            (results, waiting.elapsed())
        };
        let (host_done, (client_done, client_parked)) =
            futures::future::join(host_runs, client_wait).await;
        drop(cancel_on_drop);
        suspended += client_parked;
        for (index, done) in host_done.into_iter().chain(client_done) {
            slots[index].done = Some(done);
        }

        slots
            .into_iter()
            .enumerate()
            .map(|(position, slot)| {
                let parked = if position == 0 {
                    suspended
                } else {
                    Duration::ZERO
                };
                dispatched(slot, parked)
            })
            .collect()
    }

    /// Parses, looks up and validates one call; `Ok` carries the policy to apply.
    fn prepare(&self, name: String, input: &str) -> (Slot<'_>, Result<Policy, ToolFailure>) {
        let mut slot = Slot {
            id: random_id("call_"),
            name,
            input: Value::Null,
            input_bytes: input.len(),
            started: Instant::now(),
            tool: None,
            done: None,
        };
        let checked = self.check(&mut slot, input);
        (slot, checked)
    }

    fn check<'r>(&'r self, slot: &mut Slot<'r>, input: &str) -> Result<Policy, ToolFailure> {
        let parsed = serde_json::from_str::<Value>(input).map(|value| slot.input = value);
        // The tool name is checked first: calling a tool that does not exist is the more
        // basic mistake, and its message lists the tools that do.
        let Some(tool) = self.registry.get(&slot.name) else {
            slot.name = truncate_chars(&slot.name, MAX_ECHOED_NAME_CHARS);
            return Err(failure(
                ToolErrorKind::UnknownTool,
                self.unknown_tool_message(&slot.name),
            ));
        };
        slot.tool = Some(tool);
        if let Err(error) = parsed {
            return Err(failure(
                ToolErrorKind::InvalidInput,
                format!("input is not JSON: {error}"),
            ));
        }
        tool.validate_input(&slot.input)?;
        Ok(tool.declaration.policy)
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        let names = self.registry.names();
        if names.is_empty() {
            return format!("unknown tool `{name}`: no tools are available");
        }
        let mut message = format!(
            "unknown tool `{name}`; available tools: {}",
            names
                .iter()
                .take(LISTED_TOOL_NAMES)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        );
        if names.len() > LISTED_TOOL_NAMES {
            message.push_str(&format!(" (and {} more)", names.len() - LISTED_TOOL_NAMES));
        }
        message
    }
}

fn failure(kind: ToolErrorKind, message: String) -> ToolFailure {
    ToolFailure { kind, message }
}

/// The declared result of the slot's static tool (what a handler output of `None` stands
/// for), cloned for an event.
fn static_result(slot: &Slot<'_>) -> Value {
    match slot.tool.map(|tool| &tool.declaration.handler) {
        Some(HandlerSpec::Static { result }) => result.clone(),
        _ => Value::Null,
    }
}

/// Sends a running call's `tool.call`.
fn announce(ctx: &CallContext, slot: &Slot<'_>, locus: Locus) {
    ctx.events.emit_with(|| ExecutionEvent::ToolCall {
        id: slot.id.clone(),
        name: slot.name.clone(),
        input: slot.input.clone(),
        caller: Caller {
            execution_id: ctx.execution_id.clone(),
        },
        locus,
    });
}

/// A finished slot as the batch returns it; `suspended` is the batch's parked time when
/// this is its first call (see [`DispatchedCall::suspended`]).
fn dispatched(slot: Slot<'_>, suspended: Duration) -> DispatchedCall {
    let locus = slot.locus();
    let (result, duration_us) = slot.done.unwrap_or_else(|| {
        // Unreachable by construction: every slot is finished before. Kept as a tool
        // error rather than a panic, since guest input drives this path.
        let message = "internal error: the call was never run".to_owned();
        (Err(failure(ToolErrorKind::Failed, message)), 0)
    });
    DispatchedCall {
        record: ToolCallRecord {
            id: slot.id,
            name: slot.name,
            input: slot.input,
            is_error: result.is_err(),
            duration_us,
            locus,
        },
        result,
        input_bytes: slot.input_bytes,
        suspended,
    }
}

/// Finishes a call that never ran (rejected or refused).
fn finish(ctx: &CallContext, slot: &mut Slot<'_>, outcome: Result<HostOutput, ToolFailure>) {
    let done = emit_result(ctx, slot, outcome);
    slot.done = Some(done);
}

/// Sends the call's `tool.result` and turns the outcome into what the guest receives.
/// A result over the payload limit becomes a failure here, before anything sees it.
fn emit_result(
    ctx: &CallContext,
    slot: &Slot<'_>,
    outcome: Result<HostOutput, ToolFailure>,
) -> (CallResult, u64) {
    let duration_us = u64::try_from(slot.started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let outcome = match outcome {
        Ok((_, text)) if text.len() as u64 > ctx.max_payload_bytes => {
            let max = usize::try_from(ctx.max_payload_bytes).unwrap_or(usize::MAX);
            Err(payload_too_large(
                &format!("the result of `{}`", slot.name),
                max,
            ))
        }
        outcome => outcome,
    };
    match outcome {
        Ok((output, text)) => {
            ctx.events.emit_with(|| ExecutionEvent::ToolResult {
                id: slot.id.clone(),
                name: slot.name.clone(),
                output: output.unwrap_or_else(|| static_result(slot)),
                is_error: false,
                duration_us,
            });
            (Ok(text), duration_us)
        }
        Err(failure) => {
            ctx.events.emit_with(|| ExecutionEvent::ToolResult {
                id: slot.id.clone(),
                name: slot.name.clone(),
                output: json!({"error": failure.kind.as_str(), "message": failure.message}),
                is_error: true,
                duration_us,
            });
            (Err(failure), duration_us)
        }
    }
}

fn approval_request(slot: &Slot<'_>) -> ApprovalRequest {
    ApprovalRequest {
        approval_id: random_id("approval_"),
        call_id: slot.id.clone(),
        tool: slot.name.clone(),
        input: slot.input.clone(),
        reason: format!(
            "tool `{}` has policy `ask`: it runs only if approved",
            slot.name
        ),
    }
}

/// Waits for one client result until the batch deadline.
async fn await_client(
    ctx: &CallContext,
    slot: &Slot<'_>,
    mut receiver: oneshot::Receiver<ClientToolResult>,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<HostOutput, ToolFailure> {
    let result = match tokio::time::timeout_at(deadline, &mut receiver).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => {
            return Err(failure(
                ToolErrorKind::Failed,
                format!(
                    "client tool `{}` was abandoned before a result arrived",
                    slot.name
                ),
            ));
        }
        Err(_) => {
            ctx.client_calls.cancel(&slot.id);
            // A result submitted between the deadline firing and the cancel was accepted
            // by the broker; honour it rather than report a timeout the caller never saw.
            match receiver.try_recv() {
                Ok(result) => result,
                Err(_) => {
                    return Err(failure(
                        ToolErrorKind::Timeout,
                        format!(
                            "no result for client tool `{}` within {} ms",
                            slot.name,
                            timeout.as_millis()
                        ),
                    ));
                }
            }
        }
    };
    if result.is_error {
        let message = match result.output {
            Value::String(text) => text,
            Value::Null => format!("client tool `{}` failed without details", slot.name),
            other => other.to_string(),
        };
        return Err(failure(ToolErrorKind::Failed, message));
    }
    let text = result.output.to_string();
    Ok((Some(result.output), text))
}

/// Cancels a batch's client calls that are still pending when the batch stops waiting —
/// including when the whole execution is dropped mid-wait — so they do not linger in
/// the broker's pending list.
struct CancelPending<'a> {
    broker: &'a ClientCallBroker,
    ids: Vec<String>,
}

impl Drop for CancelPending<'_> {
    fn drop(&mut self) {
        for id in &self.ids {
            self.broker.cancel(id);
        }
    }
}

/// `prefix` + 16 hex digits, unpredictable and unique in practice: a process-wide counter
/// hashed with SipHash under keys std draws from the OS once. Cheaper than a syscall per
/// id, which matters on the per-call hot path.
fn random_id(prefix: &str) -> String {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let hash = KEYS.get_or_init(RandomState::new).hash_one(n);
    // Written by hand: `format!` is a measurable part of a call's host cost.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(prefix.len() + 16);
    id.push_str(prefix);
    for shift in (0..16).rev() {
        id.push(char::from(HEX[((hash >> (shift * 4)) & 0xf) as usize]));
    }
    id
}

fn unix_ms_after(timeout: Duration) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    u64::try_from(now.saturating_add(timeout).as_millis()).unwrap_or(u64::MAX)
}

/// `timeout` from now, saturating: a huge configured timeout means "practically never",
/// and `Instant + Duration` would panic on overflow.
fn deadline_after(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}
