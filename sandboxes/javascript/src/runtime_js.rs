//! `runtime.js`, the JavaScript half of the runtime: evaluating it with its native helpers,
//! and the hooks into it kept for the driver.

use std::collections::HashSet;

use cordon_guest::abi::{STREAM_STDERR, STREAM_STDOUT};
use rquickjs::{
    Ctx, Function, Object, Persistent, Value, context::EvalOptions, promise::PromiseState,
};

use crate::exception::caught;
use crate::random::random_u64;
use crate::saved::Saved;

/// The JavaScript half of the runtime: console, ToolError, result and error formatting.
const RUNTIME: &str = include_str!("runtime.js");

/// Handles into `runtime.js`, captured at initialization so guest code that replaces
/// globals cannot reach them.
pub(crate) struct Hooks {
    pub(crate) encode_result: Saved<Function<'static>>,
    pub(crate) describe: Saved<Function<'static>>,
    pub(crate) make_tool_error: Saved<Function<'static>>,
    pub(crate) call_site: Saved<Function<'static>>,
    pub(crate) tool_error: Saved<Function<'static>>,
    pub(crate) tools: Saved<Object<'static>>,
    /// The realm's plain objects and arrays, for writing tool arguments directly.
    pub(crate) ordinary: crate::json::Ordinary,
    /// Globals that exist before any code runs; a tool never replaces one of them.
    pub(crate) intrinsics: HashSet<String>,
}

/// Evaluates `runtime.js` and keeps its hooks.
pub(crate) fn load_runtime<'js>(ctx: &Ctx<'js>) -> rquickjs::Result<Hooks> {
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
