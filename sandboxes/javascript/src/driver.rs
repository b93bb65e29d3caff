//! The runtime driver: the QuickJS runtime of the image, and the loop that runs one
//! execution and batches its tool calls.
//!
//! One execution: bind the declared tools, evaluate the code as an async global script
//! (top-level `await`; its promise resolves to `{ value: <completion value> }`), then
//! drive: run every pending job, send every queued tool call as one batch, settle their
//! promises, fire due timers, repeat, until the code's promise has settled and nothing is
//! left to do. Tool functions never call the host themselves: they only queue, so every
//! call made before the code blocks leaves together.

use std::{cell::RefCell, rc::Rc, time::Duration};

use cordon_guest::{Outcome, abi::STREAM_STDERR};
use rquickjs::{
    Array, Context, Ctx, Error, Exception, Function, Object, Persistent, Promise, Runtime, Value,
    context::EvalOptions, promise::PromiseState, runtime::RejectionTracker,
};

use crate::bridge::Bridge;
use crate::exception::{caught, exception_message};
use crate::globals::install_globals;
use crate::runtime_js::load_runtime;
use crate::saved::{Saved, restore};
use crate::stack_limit::arm_stack_limit;
use crate::tool_bindings::bind_tools;

/// QuickJS's own heap cap: a backup to the host's memory limit (which is authoritative).
/// Reaching it raises a catchable `InternalError: out of memory` in the guest code instead
/// of failing an allocation somewhere the engine cannot recover from.
const HEAP_LIMIT: usize = 1 << 30;

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

pub(crate) struct Loaded {
    runtime: Runtime,
    context: Context,
    bridge: Rc<Bridge>,
    call: Saved<Function<'static>>,
}

impl Loaded {
    pub(crate) fn initialize() -> Result<Loaded, String> {
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

    pub(crate) fn run(&self, code: &str, tools: &[&str]) -> Outcome {
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
        bind_tools(ctx, &self.bridge, &self.call, tools);
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
