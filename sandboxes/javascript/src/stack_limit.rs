//! QuickJS's stack check, re-armed by hand on WASI: how deep JavaScript may recurse before
//! a catchable `RangeError`.

use rquickjs::{Context, Runtime};

/// How much of the C (shadow) stack JavaScript may use before QuickJS throws `RangeError:
/// Maximum call stack size exceeded`: a plain JS frame costs ~300 bytes of it, so ~10,000
/// frames, about node's depth. Each frame also costs ~820 bytes of *wasm* stack, so this
/// must stay well under `max_wasm_stack` × 300 / 820 (≈ 6 MiB for the host's 16 MiB), or
/// the wasm stack runs out first and the execution traps (see the README).
const JS_STACK_LIMIT: usize = 3 << 20;
/// C stack kept free above the deepest JS frame, for the native code it calls and for
/// building the RangeError (matters when the C stack is small, e.g. the default 1 MiB).
const C_STACK_RESERVE: usize = 256 << 10;

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
pub(crate) fn arm_stack_limit(runtime: &Runtime, context: &Context) -> bool {
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
