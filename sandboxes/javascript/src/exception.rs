//! JavaScript exceptions seen from Rust: catching one as a value, raising a `TypeError`,
//! reading a message.

use rquickjs::{Ctx, Error, Exception, Value};

/// Turns a pending exception (`Error::Exception`) into its value; other errors into a JS
/// `Error` carrying their message.
pub(crate) fn caught<'js>(ctx: &Ctx<'js>, error: Error) -> Value<'js> {
    if !matches!(error, Error::Exception) {
        let _ = Exception::throw_message(ctx, &error.to_string());
    }
    ctx.catch()
}

pub(crate) fn type_error<'js>(ctx: &Ctx<'js>, message: &str) -> Value<'js> {
    let _ = Exception::throw_type(ctx, message);
    let error = ctx.catch();
    // `tools.call` is a native function (see `native_call`): its own frame tops the stack of
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

pub(crate) fn exception_message(value: &Value<'_>) -> String {
    value
        .as_exception()
        .and_then(Exception::message)
        .or_else(|| value.as_string().and_then(|s| s.to_string().ok()))
        .unwrap_or_else(|| "unknown error".into())
}
