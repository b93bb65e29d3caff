//! What the JSON writer and reader share: the nesting limit, the text of an engine string,
//! dropping an exception, an object's address.

#![allow(
    unsafe_code,
    reason = "reads and builds QuickJS values through its C API; every value is freed or handed on"
)]

use rquickjs::qjs;

/// Values nested deeper than this go to `JSON.stringify` (which also reports cycles) and
/// `JSON.parse`.
pub(super) const MAX_DEPTH: usize = 32;

/// A string the engine holds: a string value, or a property key.
pub(crate) enum Text {
    Value(qjs::JSValue),
    Atom(qjs::JSAtom),
}

/// Hands `read` the text of `of` as the engine writes it out (its own bytes for ASCII, no
/// copy), then frees it. `None` when the engine cannot (the exception is dropped) or the
/// text is not UTF-8: a lone surrogate, which the engine keeps as its own three bytes
/// (`JSON.stringify` escapes it as `\udXXX`).
///
/// # Safety
/// `ctx` is the live context and `of` alive in it.
pub(crate) unsafe fn with_text<R>(
    ctx: *mut qjs::JSContext,
    of: Text,
    read: impl FnOnce(&str) -> R,
) -> Option<R> {
    let mut len: qjs::size_t = 0;
    // SAFETY: the engine returns `len` bytes at `text`, alive until freed here.
    unsafe {
        let text = match of {
            Text::Value(value) => qjs::JS_ToCStringLen2(ctx, &mut len, value, false),
            Text::Atom(atom) => qjs::JS_AtomToCStringLen(ctx, &mut len, atom),
        };
        if text.is_null() {
            clear_exception(ctx);
            return None;
        }
        let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len as usize);
        let read = std::str::from_utf8(bytes).ok().map(read);
        qjs::JS_FreeCString(ctx, text);
        read
    }
}

/// Drops an exception the engine raised (only running out of memory can raise one here):
/// the caller falls back to `JSON.stringify` or `JSON.parse`, which meet the same condition
/// and report it.
pub(super) unsafe fn clear_exception(ctx: *mut qjs::JSContext) {
    // SAFETY: takes the pending exception (or undefined) and frees it.
    unsafe { qjs::JS_FreeValue(ctx, qjs::JS_GetException(ctx)) }
}

/// The address of an object value: its identity.
pub(super) unsafe fn address(value: qjs::JSValue) -> usize {
    // SAFETY: reading the pointer bits of a value; nothing is dereferenced.
    unsafe { qjs::JS_VALUE_GET_PTR(value) as usize }
}
