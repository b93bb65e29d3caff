//! `Bridge`: the state the driver shares with the native functions guest code calls — the
//! queue of tool calls waiting for the next batch, the timers, the unhandled rejections —
//! and what those functions do with it.

use std::{
    cell::RefCell,
    mem,
    time::{Duration, Instant},
};

use cordon_guest::{ToolFailure, abi::CallResult};
use rquickjs::{Ctx, Function, Persistent, Promise, Value, function::Rest};

use crate::exception::{caught, exception_message, type_error};
use crate::runtime_js::Hooks;
use crate::saved::{Saved, restore};

/// Longest timer delay (node's, 2^31 - 1 ms); longer, negative and NaN delays mean "now"
/// (node uses 1 ms).
const MAX_TIMER_DELAY_MS: f64 = 2_147_483_647.0;

/// A tool call waiting for the next flush.
pub(crate) struct Queued {
    name: String,
    input: String,
    /// The stack where the call was made, for the `ToolError` if it fails.
    site: Saved<Value<'static>>,
    resolve: Saved<Function<'static>>,
    reject: Saved<Function<'static>>,
}

pub(crate) struct Timer {
    id: u32,
    due: Instant,
    /// Insertion order: timers due at the same instant fire in the order they were set.
    order: u64,
    repeat: Option<Duration>,
    callback: Saved<Function<'static>>,
    args: Vec<Saved<Value<'static>>>,
}

#[derive(Default)]
pub(crate) struct Timers {
    next_id: u32,
    next_order: u64,
    entries: Vec<Timer>,
}

/// State shared by the driver and the native functions guest code calls.
pub(crate) struct Bridge {
    pub(crate) hooks: Hooks,
    pub(crate) queue: RefCell<Vec<Queued>>,
    pub(crate) timers: RefCell<Timers>,
    /// Rejected promises nothing has handled yet: `(promise, reason)`.
    pub(crate) unhandled: RefCell<Vec<(Saved<Value<'static>>, Saved<Value<'static>>)>>,
    /// The first exception thrown by a timer callback or a microtask: it ends the execution,
    /// as an uncaught exception ends a node process.
    pub(crate) uncaught: RefCell<Option<Saved<Value<'static>>>>,
}

impl Bridge {
    pub(crate) fn clear(&self) {
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

    pub(crate) fn failure_error<'js>(
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
    pub(crate) fn queue_call<'js>(
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
    pub(crate) fn call_now<'js>(
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

    pub(crate) fn parse_result<'js>(
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
    pub(crate) fn flush<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<()> {
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

    pub(crate) fn set_timer<'js>(
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

    pub(crate) fn clear_timer(&self, id: Option<Value<'_>>) {
        if let Some(id) = id.and_then(|id| id.as_number()) {
            self.timers
                .borrow_mut()
                .entries
                .retain(|timer| f64::from(timer.id) != id);
        }
    }

    /// The earliest timer: `Ok(timer)` if due (removed, or re-armed when repeating),
    /// `Err(wait)` if not yet; `None` when there is none.
    pub(crate) fn next_timer(&self) -> Option<Result<Timer, Duration>> {
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

    pub(crate) fn fire<'js>(&self, ctx: &Ctx<'js>, timer: Timer) -> rquickjs::Result<()> {
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

    pub(crate) fn record_uncaught<'js>(&self, ctx: &Ctx<'js>, value: Value<'js>) {
        let mut uncaught = self.uncaught.borrow_mut();
        if uncaught.is_none() {
            *uncaught = Some(Persistent::save(ctx, value));
        }
    }

    pub(crate) fn track_rejection<'js>(
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
