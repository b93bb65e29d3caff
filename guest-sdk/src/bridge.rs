//! The guest's end of the bridge (compiled only for wasm): the raw `cordon` imports, the
//! API over them, and the [`export_guest!`](crate::export_guest) macro that defines the exports.
#![allow(
    unsafe_code,
    reason = "this module is the FFI boundary of the bridge ABI"
)]

use crate::abi::{self, CallResult, ToolErrorKind, ToolFailure};

#[link(wasm_import_module = "cordon")]
unsafe extern "C" {
    fn inbox_read(ptr: *mut u8, len: i32) -> i32;
    fn call_tool(name_ptr: *const u8, name_len: i32, input_ptr: *const u8, input_len: i32) -> i32;
    fn call_batch(req_ptr: *const u8, req_len: i32) -> i32;
    fn output(stream: i32, ptr: *const u8, len: i32);
    fn finish(ptr: *const u8, len: i32);
}

// wasi-libc (linked by Rust's wasm32-wasip1 target): the table of preopened directories
// and the emulated working directory.
unsafe extern "C" {
    fn __wasilibc_reset_preopens();
    fn chdir(path: *const std::ffi::c_char) -> i32;
}

/// Makes the host's workspace (`/workspace`) visible, when it gives one, and the working
/// directory. The image was snapshotted with no preopened directory, and wasi-libc had
/// cached that empty table; forgetting it makes the next path lookup ask the host again.
pub fn enter_workspace() {
    // SAFETY: both are plain libc calls on a single-threaded guest; the path is a valid
    // NUL-terminated string. A failing `chdir` (no workspace) leaves the directory as it was.
    unsafe {
        __wasilibc_reset_preopens();
        chdir(c"/workspace".as_ptr());
    }
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

/// Copies the inbox (of the length the host just announced) into a fresh buffer.
pub fn read_inbox(len: i32) -> Vec<u8> {
    let mut buffer = Vec::new();
    read_inbox_into(len, &mut buffer);
    buffer
}

fn host_fault(what: &str) -> ToolFailure {
    ToolFailure {
        kind: ToolErrorKind::Failed,
        message: format!("bridge fault: {what}"),
    }
}

/// Calls one tool with JSON `input`; returns the JSON result or why it failed.
pub fn call(name: &str, input: &str) -> CallResult {
    call_with(name, input, |answer| answer.map(str::to_owned))
}

/// [`call`], the answer handed to `read` with its JSON text still in the inbox buffer:
/// no allocation and no copy for a call whose result is read at once (a loop of calls).
pub fn call_with<R>(
    name: &str,
    input: &str,
    read: impl FnOnce(Result<&str, ToolFailure>) -> R,
) -> R {
    thread_local! {
        /// Reused between calls. Taken for the call: a `read` that calls again gets a
        /// buffer of its own.
        static INBOX: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    // SAFETY: both slices are valid for reads of their lengths for the whole call.
    let len = unsafe {
        call_tool(
            name.as_ptr(),
            len_i32(name.len()),
            input.as_ptr(),
            len_i32(input.len()),
        )
    };
    let mut frame = INBOX.take();
    read_inbox_into(len, &mut frame);
    let answer = match abi::decode_response_text(&frame) {
        Ok(answer) => read(answer),
        Err(error) => read(Err(host_fault(&error.to_string()))),
    };
    // A buffer grown by one large answer is not kept for the session's life.
    if frame.capacity() <= KEPT_INBOX_BYTES {
        INBOX.set(frame);
    }
    answer
}

/// The largest inbox buffer [`call_with`] keeps for the next call.
const KEPT_INBOX_BYTES: usize = 64 << 10;

/// Replaces `buffer`'s contents with the inbox (of the length the host just announced).
fn read_inbox_into(len: i32, buffer: &mut Vec<u8>) {
    let len = usize::try_from(len).unwrap_or(0);
    buffer.clear();
    buffer.reserve(len);
    // SAFETY: `buffer` has room for `len` bytes; the host writes at most that many and
    // says how many, and only those are counted as initialized.
    unsafe {
        let copied = inbox_read(buffer.as_mut_ptr(), len_i32(len));
        buffer.set_len(usize::try_from(copied).unwrap_or(0).min(len));
    }
}

/// Calls several tools as one batch (the host may run them concurrently); results come
/// back in the order of `calls`.
pub fn call_many(calls: &[(&str, &str)]) -> Vec<CallResult> {
    let request = abi::encode_batch_request(calls);
    // SAFETY: `request` is valid for reads of its length for the whole call.
    let len = unsafe { call_batch(request.as_ptr(), len_i32(request.len())) };
    let frame = read_inbox(len);
    match abi::decode_batch_response(&frame) {
        Ok(results) if results.len() == calls.len() => results,
        Ok(_) => calls
            .iter()
            .map(|_| Err(host_fault("result count mismatch")))
            .collect(),
        Err(error) => calls
            .iter()
            .map(|_| Err(host_fault(&error.to_string())))
            .collect(),
    }
}

/// Appends to the execution's stdout ([`abi::STREAM_STDOUT`]) or stderr.
pub fn write_output(stream: i32, bytes: &[u8]) {
    // SAFETY: `bytes` is valid for reads of its length for the whole call.
    unsafe { output(stream, bytes.as_ptr(), len_i32(bytes.len())) }
}

/// Reports how the execution ended. Call once, at the end of `execute`.
pub fn report_outcome(outcome: &abi::Outcome) {
    let frame = abi::encode_outcome(outcome);
    // SAFETY: `frame` is valid for reads of its length for the whole call.
    unsafe { finish(frame.as_ptr(), len_i32(frame.len())) }
}

/// Reports guest panics on stderr by message only: the default hook prints source paths
/// of the machine that built the image.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        write_output(
            abi::STREAM_STDERR,
            format!("guest runtime panic: {message}\n").as_bytes(),
        );
    }));
}

/// Defines the ABI's exports for a type implementing [`crate::Guest`].
///
/// ```ignore
/// struct Python;
/// impl cordon_guest::Guest for Python { /* … */ }
/// cordon_guest::export_guest!(Python);
/// ```
#[macro_export]
macro_rules! export_guest {
    ($guest:ty) => {
        #[unsafe(export_name = "wizer.initialize")]
        pub extern "C" fn __cordon_initialize() {
            $crate::install_panic_hook();
            <$guest as $crate::Guest>::initialize();
        }

        #[unsafe(export_name = "cordon_execute")]
        pub extern "C" fn __cordon_execute(request_len: i32) {
            let frame = $crate::read_inbox(request_len);
            $crate::enter_workspace();
            let outcome = match $crate::abi::decode_execute_request(&frame) {
                Ok((tools, code)) => <$guest as $crate::Guest>::execute(code, &tools),
                Err(error) => $crate::Outcome::Error {
                    error_type: "CordonInternalError".into(),
                    message: error.to_string(),
                    traceback: String::new(),
                },
            };
            $crate::report_outcome(&outcome);
        }

        #[unsafe(export_name = "cordon_abi_version")]
        pub extern "C" fn __cordon_abi_version() -> i32 {
            $crate::abi::ABI_VERSION as i32
        }
    };
}
