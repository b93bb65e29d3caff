//! The QuickJS runtime, the driver loop that batches tool calls, and the ABI exports.
//!
//! One execution: bind the declared tools, evaluate the code as an async global script
//! (top-level `await`; its promise resolves to `{ value: <completion value> }`), then
//! drive: run every pending job, send every queued tool call as one batch, settle their
//! promises, fire due timers, repeat, until the code's promise has settled and nothing is
//! left to do. Tool functions never call the host themselves: they only queue, so every
//! call made before the code blocks leaves together.

use std::{
    cell::{Cell, RefCell},
    collections::{HashMap, HashSet},
    mem,
    rc::Rc,
    time::{Duration, Instant},
};

use cordon_guest::{
    Guest, Outcome, ToolFailure,
    abi::{CallResult, STREAM_STDERR, STREAM_STDOUT},
};
use rquickjs::{
    Array, Context, Ctx, Error, Exception, Function, Object, Persistent, Promise, Runtime, Value,
    context::EvalOptions,
    function::{Opt, Rest},
    promise::PromiseState,
    runtime::RejectionTracker,
};

/// The JavaScript half of the runtime: console, ToolError, result and error formatting.
const RUNTIME: &str = include_str!("runtime.js");

/// QuickJS's own heap cap: a backup to the host's memory limit (which is authoritative).
/// Reaching it raises a catchable `InternalError: out of memory` in the guest code instead
/// of failing an allocation somewhere the engine cannot recover from.
const HEAP_LIMIT: usize = 1 << 30;

/// How much of the C (shadow) stack JavaScript may use before QuickJS throws `RangeError:
/// Maximum call stack size exceeded`: a plain JS frame costs ~300 bytes of it, so ~10,000
/// frames, about node's depth. Each frame also costs ~820 bytes of *wasm* stack, so this
/// must stay well under `max_wasm_stack` × 300 / 820 (≈ 6 MiB for the host's 16 MiB), or
/// the wasm stack runs out first and the execution traps (see the README).
const JS_STACK_LIMIT: usize = 3 << 20;
/// C stack kept free above the deepest JS frame, for the native code it calls and for
/// building the RangeError (matters when the C stack is small, e.g. the default 1 MiB).
const C_STACK_RESERVE: usize = 256 << 10;

/// Longest timer delay (node's, 2^31 - 1 ms); longer, negative and NaN delays mean "now"
/// (node uses 1 ms).
const MAX_TIMER_DELAY_MS: f64 = 2_147_483_647.0;

/// Words that cannot name a global binding: such tools are reachable through `tools` only.
const RESERVED: &str = "arguments await break case catch class const continue debugger default \
    delete do else enum eval export extends false finally for function if implements import in \
    instanceof interface let new null package private protected public return static super \
    switch this throw true try typeof var void while with yield";

type Saved<T> = Persistent<T>;

/// Handles into `runtime.js`, captured at initialization so guest code that replaces
/// globals cannot reach them.
struct Hooks {
    encode_result: Saved<Function<'static>>,
    describe: Saved<Function<'static>>,
    make_tool_error: Saved<Function<'static>>,
    call_site: Saved<Function<'static>>,
    tool_error: Saved<Function<'static>>,
    tools: Saved<Object<'static>>,
    /// The realm's plain objects and arrays, for writing tool arguments directly.
    ordinary: crate::json::Ordinary,
    /// Globals that exist before any code runs; a tool never replaces one of them.
    intrinsics: HashSet<String>,
}

/// A tool call waiting for the next flush.
struct Queued {
    name: String,
    input: String,
    /// The stack where the call was made, for the `ToolError` if it fails.
    site: Saved<Value<'static>>,
    resolve: Saved<Function<'static>>,
    reject: Saved<Function<'static>>,
}

struct Timer {
    id: u32,
    due: Instant,
    /// Insertion order: timers due at the same instant fire in the order they were set.
    order: u64,
    repeat: Option<Duration>,
    callback: Saved<Function<'static>>,
    args: Vec<Saved<Value<'static>>>,
}

#[derive(Default)]
struct Timers {
    next_id: u32,
    next_order: u64,
    entries: Vec<Timer>,
}

/// State shared by the driver and the native functions guest code calls.
struct Bridge {
    hooks: Hooks,
    queue: RefCell<Vec<Queued>>,
    timers: RefCell<Timers>,
    /// Rejected promises nothing has handled yet: `(promise, reason)`.
    unhandled: RefCell<Vec<(Saved<Value<'static>>, Saved<Value<'static>>)>>,
    /// The first exception thrown by a timer callback or a microtask: it ends the execution,
    /// as an uncaught exception ends a node process.
    uncaught: RefCell<Option<Saved<Value<'static>>>>,
}

/// What the driver waits for.
enum Waiting {
    /// The promise of the evaluated script, resolving to `{ value }`.
    Script(Saved<Promise<'static>>),
    /// The final value was a promise: its result is the result.
    FinalPromise(Saved<Promise<'static>>),
    /// The final value is known; tool calls and timers still pending run to completion.
    Finished(Saved<Value<'static>>),
}

enum Step {
    Again,
    Sleep(Duration),
    Done(Outcome),
}

struct Loaded {
    runtime: Runtime,
    context: Context,
    bridge: Rc<Bridge>,
    call: Saved<Function<'static>>,
}

thread_local! {
    // wasm32-wasip1 has one thread; this lives in linear memory and so in the snapshot.
    static LOADED: RefCell<Option<Loaded>> = const { RefCell::new(None) };
    /// xorshift64* state behind `Math.random` and `crypto`; 0 (unseeded) in the snapshot.
    /// QuickJS seeds its own generator from the clock when the context is created, so it
    /// would be frozen into the snapshot and every instance would draw the same numbers.
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

fn random_u64() -> u64 {
    RANDOM.with(|cell| {
        let mut state = cell.get();
        if state == 0 {
            state = wasi_random_u64() | 1;
        }
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        cell.set(state);
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

fn internal_error(message: impl Into<String>) -> Outcome {
    Outcome::Error {
        error_type: "CordonInternalError".into(),
        message: message.into(),
        traceback: String::new(),
    }
}

/// Turns a pending exception (`Error::Exception`) into its value; other errors into a JS
/// `Error` carrying their message.
fn caught<'js>(ctx: &Ctx<'js>, error: Error) -> Value<'js> {
    if !matches!(error, Error::Exception) {
        let _ = Exception::throw_message(ctx, &error.to_string());
    }
    ctx.catch()
}

fn type_error<'js>(ctx: &Ctx<'js>, message: &str) -> Value<'js> {
    let _ = Exception::throw_type(ctx, message);
    let error = ctx.catch();
    // `tools.call` is a native function (see `direct`): its own frame tops the stack of
    // an error raised in it, where the author's call site belongs (runtime.js drops it
    // the same way from the errors it makes).
    if let Some(object) = error.as_object()
        && let Ok(stack) = object.get::<_, String>("stack")
        && let Some(rest) = stack.strip_prefix("    at call (native)\n")
    {
        let _ = object.set("stack", rest);
    }
    error
}

fn exception_message(value: &Value<'_>) -> String {
    value
        .as_exception()
        .and_then(Exception::message)
        .or_else(|| value.as_string().and_then(|s| s.to_string().ok()))
        .unwrap_or_else(|| "unknown error".into())
}

/// A tool name part as a JavaScript identifier (the same rule as the Python guest's).
fn js_name(part: &str) -> String {
    let mut name: String = part
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

fn restore<'js, T>(saved: &Saved<T>, ctx: &Ctx<'js>) -> rquickjs::Result<T::Changed<'js>>
where
    T: Clone + rquickjs::JsLifetime<'static>,
{
    saved.clone().restore(ctx)
}

impl Bridge {
    fn clear(&self) {
        self.queue.borrow_mut().clear();
        self.timers.borrow_mut().entries.clear();
        self.unhandled.borrow_mut().clear();
        self.uncaught.borrow_mut().take();
    }

    fn tool_error<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        kind: &str,
        message: String,
        site: Option<Value<'js>>,
    ) -> Value<'js> {
        let made = restore(&self.hooks.make_tool_error, ctx).and_then(|make| {
            make.call::<_, Value>((
                message.as_str(),
                kind,
                tool,
                site.unwrap_or_else(|| Value::new_undefined(ctx.clone())),
            ))
        });
        match made {
            Ok(error) => error,
            Err(error) => caught(ctx, error),
        }
    }

    fn failure_error<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        failure: &ToolFailure,
        site: Option<Value<'js>>,
    ) -> Value<'js> {
        let message = format!("{tool}: {}", failure.message);
        self.tool_error(ctx, tool, failure.kind.as_str(), message, site)
    }

    /// The JSON text of a tool's one argument, or the error to raise.
    fn encode_input<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        shown: &str,
        args: &[Value<'js>],
    ) -> Result<String, Value<'js>> {
        let usage = || {
            let message = format!(
                "{shown}() takes one object argument, e.g. await {shown}({{ name: value }})"
            );
            type_error(ctx, &message)
        };
        let value = match args {
            [] => return Ok("{}".into()),
            [value] if value.is_undefined() || value.is_null() => return Ok("{}".into()),
            [value] => value,
            _ => return Err(usage()),
        };
        if !value.is_object() || value.is_array() || value.is_function() {
            return Err(usage());
        }
        // Plain data (nearly every call) is written directly, without JSON.stringify's
        // set-up; anything else is left to it, untouched.
        if let Some(json) = crate::json::encode(ctx, &self.hooks.ordinary, value) {
            return Ok(json);
        }
        let not_json = |reason: String| {
            let message = format!("{tool}: arguments are not JSON: {reason}");
            self.tool_error(ctx, tool, "invalid_input", message, None)
        };
        match ctx.json_stringify(value.clone()) {
            Ok(Some(json)) => json
                .to_string()
                .map_err(|error| not_json(error.to_string())),
            Ok(None) => Err(not_json("toJSON() returned undefined".into())),
            Err(error) => Err(not_json(exception_message(&caught(ctx, error)))),
        }
    }

    /// A tool function's body: queue the call, hand back its promise.
    fn queue_call<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        shown: &str,
        args: &[Value<'js>],
    ) -> rquickjs::Result<Promise<'js>> {
        let (promise, resolve, reject) = ctx.promise()?;
        match self.encode_input(ctx, tool, shown, args) {
            Ok(input) => {
                let site = restore(&self.hooks.call_site, ctx)?.call::<_, Value>(())?;
                self.queue.borrow_mut().push(Queued {
                    name: tool.to_owned(),
                    input,
                    site: Persistent::save(ctx, site),
                    resolve: Persistent::save(ctx, resolve),
                    reject: Persistent::save(ctx, reject),
                });
            }
            // An async function never throws at the call: it returns a rejected promise.
            Err(error) => reject.call::<_, ()>((error,))?,
        }
        Ok(promise)
    }

    /// `tools.call(name, args)`: one call, synchronously, bypassing the batch.
    fn call_now<'js>(
        &self,
        ctx: &Ctx<'js>,
        name: &Value<'js>,
        args: Option<Value<'js>>,
    ) -> rquickjs::Result<Value<'js>> {
        let Some(tool) = name.as_string().and_then(|s| s.to_string().ok()) else {
            let message = "tools.call() takes the tool name as a string, e.g. \
                           tools.call(\"get_weather\", { city: \"Paris\" })";
            return Err(ctx.throw(type_error(ctx, message)));
        };
        let input = self
            .encode_input(ctx, &tool, "tools.call", args.as_slice())
            .map_err(|error| ctx.throw(error))?;
        match cordon_guest::call(&tool, &input) {
            Ok(json) => self
                .parse_result(ctx, &tool, &json, None)
                .map_err(|error| ctx.throw(error)),
            Err(failure) => Err(ctx.throw(self.failure_error(ctx, &tool, &failure, None))),
        }
    }

    fn parse_result<'js>(
        &self,
        ctx: &Ctx<'js>,
        tool: &str,
        json: &str,
        site: Option<Value<'js>>,
    ) -> Result<Value<'js>, Value<'js>> {
        if let Some(value) = crate::json::decode(ctx, json) {
            return Ok(value);
        }
        ctx.json_parse(json).map_err(|error| {
            let reason = exception_message(&caught(ctx, error));
            let message = format!("{tool}: the tool returned invalid JSON: {reason}");
            self.tool_error(ctx, tool, "tool_failed", message, site)
        })
    }

    /// Sends every queued call (one `call`, or one `call_many` batch) and settles them.
    fn flush<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<()> {
        let batch = mem::take(&mut *self.queue.borrow_mut());
        let results: Vec<CallResult> = match batch.as_slice() {
            [] => return Ok(()),
            [one] => vec![cordon_guest::call(&one.name, &one.input)],
            many => {
                let calls: Vec<(&str, &str)> = many
                    .iter()
                    .map(|q| (q.name.as_str(), q.input.as_str()))
                    .collect();
                cordon_guest::call_many(&calls)
            }
        };
        for (queued, result) in batch.into_iter().zip(results) {
            let site = queued.site.restore(ctx)?;
            let settled = match result {
                Ok(json) => self.parse_result(ctx, &queued.name, &json, Some(site)),
                Err(failure) => Err(self.failure_error(ctx, &queued.name, &failure, Some(site))),
            };
            // Settling only queues reaction jobs: no guest code runs here.
            match settled {
                Ok(value) => queued.resolve.restore(ctx)?.call::<_, ()>((value,))?,
                Err(error) => queued.reject.restore(ctx)?.call::<_, ()>((error,))?,
            }
        }
        Ok(())
    }

    fn set_timer<'js>(
        &self,
        ctx: &Ctx<'js>,
        callback: Value<'js>,
        delay: Option<Value<'js>>,
        args: Vec<Value<'js>>,
        repeat: bool,
    ) -> rquickjs::Result<u32> {
        let Some(callback) = callback.into_function() else {
            let message = "the first argument must be a function, e.g. setTimeout(() => ..., 100)";
            return Err(ctx.throw(type_error(ctx, message)));
        };
        let mut ms = delay.and_then(|d| d.as_number()).unwrap_or(0.0);
        if !(0.0..=MAX_TIMER_DELAY_MS).contains(&ms) {
            ms = 0.0;
        }
        let delay = Duration::from_secs_f64(ms / 1000.0);
        let mut timers = self.timers.borrow_mut();
        timers.next_id = timers.next_id.wrapping_add(1).max(1);
        timers.next_order += 1;
        let timer = Timer {
            id: timers.next_id,
            due: Instant::now() + delay,
            order: timers.next_order,
            repeat: repeat.then_some(delay.max(Duration::from_millis(1))),
            callback: Persistent::save(ctx, callback),
            args: args
                .into_iter()
                .map(|arg| Persistent::save(ctx, arg))
                .collect(),
        };
        let id = timer.id;
        timers.entries.push(timer);
        Ok(id)
    }

    fn clear_timer(&self, id: Option<Value<'_>>) {
        if let Some(id) = id.and_then(|id| id.as_number()) {
            self.timers
                .borrow_mut()
                .entries
                .retain(|timer| f64::from(timer.id) != id);
        }
    }

    /// The earliest timer: `Ok(timer)` if due (removed, or re-armed when repeating),
    /// `Err(wait)` if not yet; `None` when there is none.
    fn next_timer(&self) -> Option<Result<Timer, Duration>> {
        let mut timers = self.timers.borrow_mut();
        let (index, first) = timers
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, timer)| (timer.due, timer.order))?;
        let now = Instant::now();
        if first.due > now {
            return Some(Err(first.due - now));
        }
        let timer = timers.entries.swap_remove(index);
        if let Some(every) = timer.repeat {
            timers.next_order += 1;
            let order = timers.next_order;
            timers.entries.push(Timer {
                id: timer.id,
                due: now + every,
                order,
                repeat: timer.repeat,
                callback: timer.callback.clone(),
                args: timer.args.clone(),
            });
        }
        Some(Ok(timer))
    }

    fn fire<'js>(&self, ctx: &Ctx<'js>, timer: Timer) -> rquickjs::Result<()> {
        let callback = timer.callback.restore(ctx)?;
        let args = timer
            .args
            .into_iter()
            .map(|arg| arg.restore(ctx))
            .collect::<rquickjs::Result<Vec<_>>>()?;
        if let Err(error) = callback.call::<_, ()>((Rest(args),)) {
            let value = caught(ctx, error);
            self.record_uncaught(ctx, value);
        }
        Ok(())
    }

    fn record_uncaught<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) {
        let mut uncaught = self.uncaught.borrow_mut();
        if uncaught.is_none() {
            *uncaught = Some(Persistent::save(ctx, value));
        }
    }

    fn track_rejection<'js>(
        &self,
        ctx: &Ctx<'js>,
        promise: Value<'js>,
        reason: Value<'js>,
        handled: bool,
    ) {
        let mut unhandled = self.unhandled.borrow_mut();
        if handled {
            unhandled.retain(|(saved, _)| restore(saved, ctx).map_or(true, |p| p != promise));
        } else {
            unhandled.push((
                Persistent::save(ctx, promise),
                Persistent::save(ctx, reason),
            ));
        }
    }
}

impl Loaded {
    fn initialize() -> Result<Loaded, String> {
        // A failure here is a bug in this crate: say what JavaScript threw, if it did.
        let explain = |ctx: &Ctx<'_>, error: Error| {
            let value = caught(ctx, error);
            let stack = value
                .as_exception()
                .and_then(Exception::stack)
                .unwrap_or_default();
            format!("{}\n{stack}", exception_message(&value))
        };
        let runtime = Runtime::new().map_err(|error| error.to_string())?;
        runtime.set_memory_limit(HEAP_LIMIT);
        let context = Context::full(&runtime).map_err(|error| error.to_string())?;
        if !arm_stack_limit(&runtime, &context) {
            return Err("could not find QuickJS's stack limit (has rquickjs-sys changed?)".into());
        }
        let hooks = context.with(|ctx| load_runtime(&ctx).map_err(|error| explain(&ctx, error)))?;
        let bridge = Rc::new(Bridge {
            hooks,
            queue: RefCell::default(),
            timers: RefCell::default(),
            unhandled: RefCell::default(),
            uncaught: RefCell::default(),
        });
        let tracker_bridge = Rc::clone(&bridge);
        let tracker: RejectionTracker = Box::new(move |ctx, promise, reason, handled| {
            tracker_bridge.track_rejection(&ctx, promise, reason, handled);
        });
        runtime.set_host_promise_rejection_tracker(Some(tracker));
        let call = context
            .with(|ctx| install_globals(&ctx, &bridge).map_err(|error| explain(&ctx, error)))?;
        Ok(Loaded {
            runtime,
            context,
            bridge,
            call,
        })
    }

    fn run(&self, code: &str, tools: &[&str]) -> Outcome {
        self.bridge.clear();
        let started = self.context.with(|ctx| self.start(&ctx, code, tools));
        let mut waiting = match started {
            Ok(promise) => Waiting::Script(promise),
            Err(outcome) => {
                self.bridge.clear();
                return outcome;
            }
        };
        let outcome = loop {
            self.run_jobs();
            let step = self.context.with(|ctx| {
                self.step(&ctx, &mut waiting).unwrap_or_else(|error| {
                    let value = caught(&ctx, error);
                    Step::Done(self.describe(&ctx, value))
                })
            });
            match step {
                Step::Again => {}
                // WASI's poll_oneoff: the host's deadline still bounds it.
                Step::Sleep(wait) => std::thread::sleep(wait),
                Step::Done(outcome) => break outcome,
            }
        };
        // Jobs left behind (after an error) run now rather than in the next execution;
        // calls and timers left behind die with this one.
        self.run_jobs();
        self.bridge.clear();
        outcome
    }

    fn start<'js>(
        &self,
        ctx: &Ctx<'js>,
        code: &str,
        tools: &[&str],
    ) -> Result<Saved<Promise<'static>>, Outcome> {
        self.bind_tools(ctx, tools);
        guard_completion(ctx);
        let mut options = EvalOptions::default();
        options.global = true;
        options.strict = false; // sloppy, as node runs scripts: `x = 1` makes a global
        options.backtrace_barrier = true;
        options.promise = true; // top-level await; the result is a promise of `{ value }`
        options.filename = Some("<cell>".into());
        match ctx.eval_with_options::<Promise, _>(code, options) {
            Ok(promise) => Ok(Persistent::save(ctx, promise)),
            Err(Error::InvalidString(_)) => Err(Outcome::Error {
                error_type: "SyntaxError".into(),
                message: "the code contains a NUL character".into(),
                traceback: String::new(),
            }),
            Err(error) => {
                let value = caught(ctx, error);
                Err(self.describe(ctx, value))
            }
        }
    }

    /// Runs every pending job (promise reactions, `queueMicrotask`), recording the first
    /// exception one throws.
    fn run_jobs(&self) {
        loop {
            match self.runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                Err(failed) => failed.0.with(|ctx| {
                    let value = ctx.catch();
                    self.bridge.record_uncaught(&ctx, value);
                }),
            }
        }
    }

    fn step<'js>(&self, ctx: &Ctx<'js>, waiting: &mut Waiting) -> rquickjs::Result<Step> {
        if let Some(error) = self.bridge.uncaught.borrow_mut().take() {
            let value = error.restore(ctx)?;
            return Ok(Step::Done(self.describe(ctx, value)));
        }
        match waiting {
            Waiting::Script(saved) | Waiting::FinalPromise(saved) => {
                let promise = restore(saved, ctx)?;
                match promise.state() {
                    PromiseState::Pending => {}
                    PromiseState::Rejected => {
                        let reason = match promise.result::<Value>() {
                            Some(Err(error)) => caught(ctx, error),
                            _ => Value::new_undefined(ctx.clone()),
                        };
                        return Ok(Step::Done(self.describe(ctx, reason)));
                    }
                    PromiseState::Resolved => {
                        let mut value = match promise.result::<Value>() {
                            Some(Ok(value)) => value,
                            Some(Err(error)) => return Err(error),
                            None => Value::new_undefined(ctx.clone()),
                        };
                        if matches!(waiting, Waiting::Script(_)) {
                            value = match value.as_object() {
                                Some(completion) => completion.get("value")?,
                                None => Value::new_undefined(ctx.clone()),
                            };
                        }
                        // A final promise (`Promise.all([...])` as the last expression) is
                        // awaited: its result is what the author wants to see.
                        *waiting = match value.try_into_promise() {
                            Ok(next) => Waiting::FinalPromise(Persistent::save(ctx, next)),
                            Err(value) => Waiting::Finished(Persistent::save(ctx, value)),
                        };
                        return Ok(Step::Again);
                    }
                }
            }
            Waiting::Finished(_) => {}
        }
        if !self.bridge.queue.borrow().is_empty() {
            self.bridge.flush(ctx)?;
            return Ok(Step::Again);
        }
        match self.bridge.next_timer() {
            Some(Ok(timer)) => {
                self.bridge.fire(ctx, timer)?;
                return Ok(Step::Again);
            }
            Some(Err(wait)) => return Ok(Step::Sleep(wait)),
            None => {}
        }
        let Waiting::Finished(value) = waiting else {
            let message = "deadlock: the code awaits a promise that nothing can settle \
                           (no tool call, timer or job is pending)";
            return Ok(Step::Done(Outcome::Error {
                error_type: "Error".into(),
                message: message.into(),
                traceback: format!("Error: {message}"),
            }));
        };
        let value = restore(value, ctx)?;
        Ok(Step::Done(self.finish(ctx, value)?))
    }

    fn finish<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) -> rquickjs::Result<Outcome> {
        let first_unhandled = self.bridge.unhandled.borrow_mut().drain(..).next();
        if let Some((_, reason)) = first_unhandled {
            let reason = reason.restore(ctx)?;
            let mut outcome = self.describe(ctx, reason);
            if let Outcome::Error { traceback, .. } = &mut outcome {
                traceback.push_str(
                    "\n(an unhandled promise rejection: nothing awaited this promise or called \
                     .catch() on it)",
                );
            }
            return Ok(outcome);
        }
        let encoded: Array = restore(&self.bridge.hooks.encode_result, ctx)?.call((value,))?;
        Ok(Outcome::Completed {
            result_json: encoded.get(0)?,
            result_repr: encoded.get(1)?,
        })
    }

    fn describe<'js>(&self, ctx: &Ctx<'js>, error: Value<'js>) -> Outcome {
        let described = restore(&self.bridge.hooks.describe, ctx).and_then(|describe| {
            let parts: Array = describe.call((error,))?;
            Ok((parts.get(0)?, parts.get(1)?, parts.get(2)?))
        });
        match described {
            Ok((error_type, message, traceback)) => Outcome::Error {
                error_type,
                message,
                traceback,
            },
            Err(error) => {
                let value = caught(ctx, error);
                Outcome::Error {
                    error_type: "Error".into(),
                    message: format!(
                        "the exception could not be described: {}",
                        exception_message(&value)
                    ),
                    traceback: String::new(),
                }
            }
        }
    }

    /// Exposes the declared tools as globals and under `tools`. A tool whose first name
    /// part is a reserved word or an existing standard global is reachable through
    /// `tools` only; `tools.call` and `tools.ToolError` are never replaced.
    fn bind_tools<'js>(&self, ctx: &Ctx<'js>, tools: &[&str]) {
        // Each binding stands alone: if guest code made one impossible (a non-writable
        // global, say), the others still happen, and its code meets a clear error later.
        let attempt = |result: rquickjs::Result<()>| {
            if let Err(error) = result {
                let _ = caught(ctx, error);
            }
        };
        let hooks = &self.bridge.hooks;
        let globals = ctx.globals();
        let (Ok(holder), Ok(tool_error)) =
            (restore(&hooks.tools, ctx), restore(&hooks.tool_error, ctx))
        else {
            return;
        };
        attempt(restore(&self.call, ctx).and_then(|call| holder.set("call", call)));
        attempt(holder.set("ToolError", tool_error.clone()));
        attempt(globals.set("tools", holder.clone()));
        attempt(globals.set("ToolError", tool_error));
        let mut namespaces: HashMap<String, Object<'js>> = HashMap::new();
        for &tool in tools {
            let parts: Vec<String> = tool.split('.').map(js_name).collect();
            let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
                continue;
            };
            let function = match tool_function(ctx, &self.bridge, tool, last) {
                Ok(function) => function,
                Err(error) => {
                    attempt(Err(error));
                    continue;
                }
            };
            if first != "call" && first != "ToolError" {
                place(ctx, &holder, &parts, &function, &mut namespaces);
            }
            let reserved = RESERVED.split_whitespace().any(|word| word == first);
            if !reserved && !hooks.intrinsics.contains(first) {
                place(ctx, &globals, &parts, &function, &mut namespaces);
            }
        }
    }
}

/// The async script's promise resolves to a plain `{ value }` object made by QuickJS: a
/// `value` setter on `Object.prototype` would swallow the completion value, a `then` would
/// turn the object into a thenable that never settles, and the session would be broken for
/// good. Neither is ever legitimate, so they are removed (with a note on stderr).
fn guard_completion(ctx: &Ctx<'_>) {
    let Some(prototype) = Object::new(ctx.clone())
        .ok()
        .and_then(|object| object.get_prototype())
    else {
        return;
    };
    for name in ["value", "then"] {
        if prototype.contains_key(name).unwrap_or(false) && prototype.remove(name).is_ok() {
            let note = format!("cordon: removed Object.prototype.{name}: the runtime needs it\n");
            cordon_guest::write_output(STREAM_STDERR, note.as_bytes());
        }
    }
    let _ = ctx.catch();
}

/// Sets `holder.a.b.c = function`, creating the namespace objects on the way (shared
/// between `tools` and the globals, so `server.x` and `tools.server.x` are one object).
fn place<'js>(
    ctx: &Ctx<'js>,
    holder: &Object<'js>,
    parts: &[String],
    function: &Function<'js>,
    namespaces: &mut HashMap<String, Object<'js>>,
) {
    let placed = (|| -> rquickjs::Result<()> {
        let mut target = holder.clone();
        let mut path = String::new();
        let Some((last, inner)) = parts.split_last() else {
            return Ok(());
        };
        for part in inner {
            path.push_str(part);
            path.push('.');
            let namespace = match namespaces.get(&path) {
                Some(namespace) => namespace.clone(),
                None => {
                    let namespace = Object::new(ctx.clone())?;
                    namespaces.insert(path.clone(), namespace.clone());
                    namespace
                }
            };
            target.set(part.as_str(), namespace.clone())?;
            target = namespace;
        }
        target.set(last.as_str(), function.clone())
    })();
    if let Err(error) = placed {
        let _ = caught(ctx, error);
    }
}

fn tool_function<'js>(
    ctx: &Ctx<'js>,
    bridge: &Rc<Bridge>,
    tool: &str,
    shown: &str,
) -> rquickjs::Result<Function<'js>> {
    let bridge = Rc::clone(bridge);
    let tool = tool.to_owned();
    let shown_name = shown.to_owned();
    let function = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: Rest<Value<'js>>| {
        bridge.queue_call(&ctx, &tool, &shown_name, &args.0)
    })?;
    function.set_name(shown)?;
    Ok(function)
}

/// Evaluates `runtime.js` and keeps its hooks.
fn load_runtime<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Hooks> {
    let native = Object::new(ctx.clone())?;
    native.set(
        "write",
        Function::new(ctx.clone(), |stream: i32, text: rquickjs::String<'js>| {
            let stream = if stream == STREAM_STDERR {
                STREAM_STDERR
            } else {
                STREAM_STDOUT
            };
            // runtime.js hands over well-formed strings only.
            let text = text.to_string()?;
            cordon_guest::write_output(stream, text.as_bytes());
            rquickjs::Result::Ok(())
        })?,
    )?;
    native.set(
        "randomUint32",
        Function::new(ctx.clone(), || (random_u64() >> 32) as u32)?,
    )?;
    native.set(
        "isError",
        Function::new(ctx.clone(), |value: Value<'js>| value.is_error())?,
    )?;
    native.set(
        "promiseState",
        Function::new(ctx.clone(), |value: Value<'js>| {
            value.as_promise().map(|promise| match promise.state() {
                PromiseState::Pending => "pending",
                PromiseState::Resolved => "fulfilled",
                PromiseState::Rejected => "rejected",
            })
        })?,
    )?;
    native.set(
        "promiseResult",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, value: Value<'js>| {
            let undefined = Value::new_undefined(ctx.clone());
            match value
                .as_promise()
                .and_then(|promise| promise.result::<Value>())
            {
                Some(Ok(value)) => value,
                // `result` rethrows a rejection: take it back as a plain value.
                Some(Err(error)) => caught(&ctx, error),
                None => undefined,
            }
        })?,
    )?;
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = true;
    options.filename = Some("<cordon>".into());
    let setup: Function = ctx.eval_with_options(RUNTIME, options)?;
    let exports: Object = setup.call((native,))?;
    let function = |name: &str| -> rquickjs::Result<Saved<Function<'static>>> {
        Ok(Persistent::save(ctx, exports.get::<_, Function>(name)?))
    };
    let intrinsics: Vec<String> = exports.get("intrinsics")?;
    Ok(Hooks {
        encode_result: function("encodeResult")?,
        describe: function("describe")?,
        make_tool_error: function("makeToolError")?,
        call_site: function("callSite")?,
        tool_error: function("ToolError")?,
        tools: Persistent::save(ctx, exports.get::<_, Object>("tools")?),
        ordinary: crate::json::Ordinary::learn(ctx)?,
        intrinsics: intrinsics
            .into_iter()
            .chain(
                [
                    "tools",
                    "ToolError",
                    "fs",
                    "setTimeout",
                    "clearTimeout",
                    "setInterval",
                    "clearInterval",
                ]
                .map(String::from),
            )
            .collect(),
    })
}

/// Installs the Rust-backed globals (timers, `Math.random`) and returns `tools.call`.
fn install_globals<'js>(
    ctx: &Ctx<'js>,
    bridge: &Rc<Bridge>,
) -> rquickjs::Result<Saved<Function<'static>>> {
    let globals = ctx.globals();
    let random = Function::new(ctx.clone(), || {
        // 53 random bits, as V8 does.
        (random_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    })?;
    random.set_name("random")?;
    globals.get::<_, Object>("Math")?.set("random", random)?;
    for (name, repeat) in [("setTimeout", false), ("setInterval", true)] {
        let bridge = Rc::clone(bridge);
        let function = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  callback: Value<'js>,
                  delay: Opt<Value<'js>>,
                  args: Rest<Value<'js>>| {
                bridge.set_timer(&ctx, callback, delay.0, args.0, repeat)
            },
        )?;
        function.set_name(name)?;
        globals.set(name, function)?;
    }
    for name in ["clearTimeout", "clearInterval"] {
        let bridge = Rc::clone(bridge);
        let function = Function::new(ctx.clone(), move |id: Opt<Value<'js>>| {
            bridge.clear_timer(id.0)
        })?;
        function.set_name(name)?;
        globals.set(name, function)?;
    }
    let call_bridge = Rc::clone(bridge);
    let general = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, name: Value<'js>, args: Opt<Value<'js>>| {
            call_bridge.call_now(&ctx, &name, args.0)
        },
    )?;
    let call = direct::tools_call(ctx, bridge, &general)?;
    call.set_name("call")?;
    crate::fs::install(ctx)?;
    Ok(Persistent::save(ctx, call))
}

/// Re-arms QuickJS's stack check, which QuickJS-ng 0.16 (in rquickjs 0.14) compiles out on
/// WASI: there `update_stack_limit` forces `stack_limit = 0`, so `set_max_stack_size` does
/// nothing and runaway recursion ends in a trap (the host's wasm stack limit, or an
/// out-of-bounds access below the C stack) that kills the session, instead of a RangeError
/// the code can catch. The check itself (`js_check_stack_overflow`: C stack pointer below
/// `stack_limit`) still runs on every call and in the parser, JSON and RegExp.
///
/// `JSRuntime` is opaque, but `stack_size`, `stack_top` and `stack_limit` are consecutive
/// `uintptr_t`s: set `stack_size` to a marker through the API, find the marker followed by
/// a plausible top and a zero limit, and write the limit. Nothing recomputes it later
/// (rquickjs calls `JS_UpdateStackTop` only with its `parallel` feature). Upstream
/// (quickjs-ng PR 1700) enables the check on WASI; delete this when rquickjs ships that.
/// If the layout ever differs, nothing is written and initialization fails, so an rquickjs
/// upgrade cannot drop the check unnoticed.
#[allow(
    unsafe_code,
    reason = "writes one field of QuickJS's opaque JSRuntime, found by pattern"
)]
fn arm_stack_limit(runtime: &Runtime, context: &Context) -> bool {
    // Below 16 MiB: rquickjs turns larger sizes into 0 (no limit).
    const MARKER: usize = 0x00ed_57ac;
    /// `sizeof(JSRuntime)` in words on wasm32 for quickjs-ng 0.16.2 (784 bytes; the three
    /// fields are at bytes 636..648): the scan never leaves the struct.
    const STRUCT_WORDS: usize = 196;
    runtime.set_max_stack_size(MARKER);
    let words = context.get_runtime_ptr().cast::<usize>();
    if words.is_null() {
        return false;
    }
    for index in 0..STRUCT_WORDS - 2 {
        // SAFETY: `words` points to the live JSRuntime, at least STRUCT_WORDS words long;
        // these are aligned loads of initialized fields inside it.
        let (size, top, stack_limit) = unsafe {
            (
                *words.add(index),
                *words.add(index + 1),
                *words.add(index + 2),
            )
        };
        if size == MARKER && top > C_STACK_RESERVE && stack_limit == 0 {
            // With the stack first in linear memory (wasm-ld's layout for Rust), the top
            // address is about the stack's size.
            let limit = JS_STACK_LIMIT.min(top - C_STACK_RESERVE);
            // SAFETY: as above; this is the `stack_limit` field QuickJS reads on each call.
            unsafe { *words.add(index + 2) = top - limit };
            return true;
        }
    }
    false
}

/// Eight bytes from WASI's `random_get`: fresh in every instance, unlike anything
/// computed before the snapshot. Rust's std has no stable API for it.
#[allow(unsafe_code, reason = "calls the WASI random_get import")]
fn wasi_random_u64() -> u64 {
    #[link(wasm_import_module = "wasi_snapshot_preview1")]
    unsafe extern "C" {
        fn random_get(buf: *mut u8, buf_len: usize) -> u16;
    }
    let mut bytes = [0u8; 8];
    // SAFETY: `bytes` is valid for `bytes.len()` writable bytes for the whole call.
    let errno = unsafe { random_get(bytes.as_mut_ptr(), bytes.len()) };
    if errno != 0 {
        // No random source: the clock still differs between instances.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        return nanos as u64;
    }
    u64::from_le_bytes(bytes)
}

struct JavaScript;

impl Guest for JavaScript {
    fn initialize() {
        match Loaded::initialize() {
            Ok(loaded) => LOADED.with_borrow_mut(|slot| *slot = Some(loaded)),
            Err(error) => {
                // Fails the image build loudly: the snapshot must never hold a half runtime.
                eprintln!("cordon javascript guest: initialization failed: {error}");
                std::process::abort();
            }
        }
    }

    fn execute(code: &str, tools: &[&str]) -> Outcome {
        LOADED.with_borrow(|loaded| match loaded {
            Some(loaded) => loaded.run(code, tools),
            None => internal_error("the image was not pre-initialized"),
        })
    }
}

cordon_guest::export_guest!(JavaScript);

/// `tools.call` as a native function QuickJS calls directly, for the calls nearly every
/// program makes: a tool name and a plain-data argument. rquickjs's wrapper around a Rust
/// closure takes a reference to the context for every value it wraps and releases it
/// after, and copies the name into a Rust string: about a tenth of a call. Anything the
/// direct path does not take (another argument shape, a value `JSON.stringify` must
/// write, a result `JSON.parse` must read) goes to the general function, before anything
/// observable has happened, or, for a result, after the call with the text in hand.
#[allow(
    unsafe_code,
    reason = "a native function on QuickJS's C API; every value is freed or handed on"
)]
mod direct {
    use std::ptr::NonNull;
    use std::rc::Rc;

    use rquickjs::{Ctx, Function, Value, qjs};

    use super::Bridge;

    /// The largest argument buffer kept for the next call.
    const KEPT_BUFFER_BYTES: usize = 64 << 10;

    thread_local! {
        /// The bridge the native entry serves (the guest has one context, one thread).
        static BRIDGE: std::cell::RefCell<Option<Rc<Bridge>>> =
            const { std::cell::RefCell::new(None) };
        /// The arguments' text, reused between calls (taken for a call: one made while
        /// it is out gets a buffer of its own).
        static INPUT: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
    }

    /// A function that runs `general`'s calls directly where it can, else calls it.
    pub(super) fn tools_call<'js>(
        ctx: &Ctx<'js>,
        bridge: &Rc<Bridge>,
        general: &Function<'js>,
    ) -> rquickjs::Result<Function<'js>> {
        BRIDGE.with(|slot| *slot.borrow_mut() = Some(Rc::clone(bridge)));
        let mut data = [general.as_raw()];
        // SAFETY: the engine keeps its own reference to `general` (it duplicates the data
        // values); the new function's reference is handed to its wrapper.
        unsafe {
            let raw = qjs::JS_NewCFunctionData(
                ctx.as_raw().as_ptr(),
                Some(entry),
                // `tools.call.length`, as rquickjs counted it: one required argument.
                1,
                0,
                1,
                data.as_mut_ptr(),
            );
            if qjs::JS_IsException(raw) {
                return Err(rquickjs::Error::Exception);
            }
            Value::from_raw(ctx.clone(), raw)
                .into_function()
                .ok_or(rquickjs::Error::Unknown)
        }
    }

    unsafe extern "C" fn entry(
        ctx: *mut qjs::JSContext,
        this: qjs::JSValue,
        argc: std::ffi::c_int,
        argv: *mut qjs::JSValue,
        _magic: std::ffi::c_int,
        data: *mut qjs::JSValue,
    ) -> qjs::JSValue {
        // SAFETY: the engine passes `argc` live arguments and the one data value given at
        // creation, all alive for the call.
        unsafe {
            let count = usize::try_from(argc).unwrap_or(0);
            let args = if argv.is_null() {
                &[][..]
            } else {
                std::slice::from_raw_parts(argv, count)
            };
            let bridge = BRIDGE.with(|slot| slot.borrow().clone());
            if let Some(bridge) = bridge
                && let Some(value) = call(&bridge, ctx, args)
            {
                return value;
            }
            qjs::JS_Call(ctx, *data, this, argc, argv)
        }
    }

    /// Runs a call of the shapes the direct path takes: `None`, having done nothing,
    /// for any other.
    ///
    /// # Safety
    /// `ctx` is the live context and `args` are alive in it for the call.
    unsafe fn call(
        bridge: &Bridge,
        ctx: *mut qjs::JSContext,
        args: &[qjs::JSValue],
    ) -> Option<qjs::JSValue> {
        let ordinary = &bridge.hooks.ordinary;
        // SAFETY: reading tags and class ids of live values; the name is a live string
        // and the argument is only read.
        unsafe {
            let (name, input) = match args {
                [name] => (*name, None),
                [name, input] if qjs::JS_IsUndefined(*input) || qjs::JS_IsNull(*input) => {
                    (*name, None)
                }
                [name, input] if ordinary.is_plain_object(*input) => (*name, Some(*input)),
                _ => return None,
            };
            if !qjs::JS_IsString(name) {
                return None;
            }
            let input = match input {
                Some(input) => crate::json::encode_raw(ctx, ordinary, input, INPUT.take())?,
                None => {
                    let mut empty = INPUT.take();
                    empty.clear();
                    empty.push_str("{}");
                    empty
                }
            };
            // A name the engine cannot write out as UTF-8 (a lone surrogate) goes to the
            // general path, which words it as it always has.
            let value = crate::json::with_text(ctx, crate::json::Text::Value(name), |tool| {
                settle(bridge, ctx, tool, &input)
            });
            // A buffer grown by one large argument is not kept for the session's life.
            if input.capacity() <= KEPT_BUFFER_BYTES {
                INPUT.set(input);
            }
            value
        }
    }

    /// Calls `tool` and turns its answer into the value returned, or the exception thrown.
    ///
    /// # Safety
    /// `ctx` is the live context.
    unsafe fn settle(
        bridge: &Bridge,
        ctx: *mut qjs::JSContext,
        tool: &str,
        input: &str,
    ) -> qjs::JSValue {
        cordon_guest::call_with(tool, input, |answer| {
            // SAFETY: `ctx` is live; values built here are owned and handed on.
            unsafe { settle_answer(bridge, ctx, tool, answer) }
        })
    }

    /// # Safety
    /// `ctx` is the live context.
    unsafe fn settle_answer(
        bridge: &Bridge,
        ctx: *mut qjs::JSContext,
        tool: &str,
        answer: Result<&str, cordon_guest::ToolFailure>,
    ) -> qjs::JSValue {
        // SAFETY: `ctx` is live; values built here are owned and handed on.
        unsafe {
            if let Ok(json) = answer
                && let Some(value) = crate::json::decode_raw(ctx, json)
            {
                return value;
            }
            // The rare ends (an error, text only `JSON.parse` reads) take the general path's
            // own wording, through rquickjs.
            let Some(raw) = NonNull::new(ctx) else {
                return qjs::JS_EXCEPTION;
            };
            let ctx = Ctx::from_raw(raw);
            let settled = match &answer {
                Ok(json) => bridge.parse_result(&ctx, tool, json, None),
                Err(failure) => Err(bridge.failure_error(&ctx, tool, failure, None)),
            };
            match settled {
                Ok(value) => qjs::JS_DupValue(raw.as_ptr(), value.as_raw()),
                Err(error) => {
                    qjs::JS_Throw(raw.as_ptr(), qjs::JS_DupValue(raw.as_ptr(), error.as_raw()));
                    qjs::JS_EXCEPTION
                }
            }
        }
    }
}
