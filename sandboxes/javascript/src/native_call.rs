//! `tools.call` as a native function QuickJS calls directly, for the calls nearly every
//! program makes: a tool name and a plain-data argument. rquickjs's wrapper around a Rust
//! closure takes a reference to the context for every value it wraps and releases it
//! after, and copies the name into a Rust string: a measurable part of a call (figures in
//! `docs/benchmarks.md`). Anything the direct path does not take (another argument shape,
//! a value `JSON.stringify` must write, a result `JSON.parse` must read) goes to the
//! general function, before anything observable has happened, or, for a result, after the
//! call with the text in hand.
#![allow(
    unsafe_code,
    reason = "a native function on QuickJS's C API; every value is freed or handed on"
)]

use std::ptr::NonNull;
use std::rc::Rc;

use rquickjs::{Ctx, Function, Value, qjs};

use crate::bridge::Bridge;

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
pub(crate) fn tools_call<'js>(
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
            [name, input] if qjs::JS_IsUndefined(*input) || qjs::JS_IsNull(*input) => (*name, None),
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
