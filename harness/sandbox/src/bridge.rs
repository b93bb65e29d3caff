//! The host side of the bridge ABI (`cordon-guest`'s `abi` module): the `cordon.*`
//! imports, and the guest-memory reads and tool dispatch CPython's `host.call` shares.

use cordon_guest::abi::{self, CallResult, ToolErrorKind, ToolFailure};
use cordon_protocol::execution::{LimitKind, Stream};
use cordon_protocol::tool::Locus;
use wasmtime::{Caller, Extern, Linker, Memory};

use crate::host_state::HostState;
use crate::meter::{Stop, stop};

pub(crate) fn memory(caller: &mut Caller<'_, HostState>) -> wasmtime::Result<Memory> {
    if let Some(memory) = caller.data().guest_memory {
        return Ok(memory);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(stop(Stop::Bridge("the guest exports no memory".into()))),
    }
}

/// The bytes `[ptr, ptr + len)` of a guest memory of `size` bytes, if all are inside it.
/// The guest chooses `ptr` and `len`: anything else is a bridge violation, never a panic.
pub(crate) fn guest_range(
    ptr: i32,
    len: i32,
    size: usize,
) -> Result<std::ops::Range<usize>, &'static str> {
    let (ptr, len) = match (usize::try_from(ptr), usize::try_from(len)) {
        (Ok(ptr), Ok(len)) => (ptr, len),
        _ => return Err("negative pointer or length"),
    };
    match ptr.checked_add(len).filter(|end| *end <= size) {
        Some(end) => Ok(ptr..end),
        None => Err("pointer outside guest memory"),
    }
}

pub(crate) fn read_guest(
    caller: &mut Caller<'_, HostState>,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<u8>> {
    let memory = memory(caller)?;
    let data = memory.data(&caller);
    match guest_range(ptr, len, data.len()) {
        Ok(range) => Ok(data[range].to_vec()),
        Err(why) => Err(stop(Stop::Bridge(why.into()))),
    }
}

/// Puts a response in the inbox and returns its length for the guest.
fn deliver(caller: &mut Caller<'_, HostState>, frame: Vec<u8>) -> wasmtime::Result<i32> {
    let len = i32::try_from(frame.len()).map_err(|_| {
        stop(Stop::limit(
            LimitKind::Payload,
            "response larger than 2 GiB",
        ))
    })?;
    caller.data_mut().run()?.inbox = frame;
    Ok(len)
}

/// Counts calls and checks input sizes before anything is dispatched.
fn admit(state: &mut HostState, calls: &[(String, String)]) -> wasmtime::Result<()> {
    let meter = state.meter.clone();
    let run = state.run()?;
    let made = run.tool_calls.len() as u64 + calls.len() as u64;
    if made > run.limits.max_tool_calls {
        let max = run.limits.max_tool_calls;
        return Err(stop(meter.record_stop(Stop::limit(
            LimitKind::ToolCalls,
            format!("more than {max} tool calls"),
        ))));
    }
    for (name, input) in calls {
        if input.len() as u64 > run.limits.max_payload_bytes {
            let max = run.limits.max_payload_bytes;
            return Err(stop(meter.record_stop(Stop::limit(
                LimitKind::Payload,
                format!(
                    "input to {name} is {} bytes, over the {max}-byte payload limit",
                    input.len()
                ),
            ))));
        }
    }
    Ok(())
}

/// Dispatches a batch through `cordon-core` (which enforces the payload limit on results:
/// an oversized one fails that call with `payload_too_large`).
pub(crate) async fn dispatch(
    caller: &mut Caller<'_, HostState>,
    calls: Vec<(String, String)>,
) -> wasmtime::Result<Vec<CallResult>> {
    admit(caller.data_mut(), &calls)?;
    let meter = caller.data().meter.clone();
    meter.output().flush();
    let (dispatcher, context) = {
        let run = caller.data_mut().run()?;
        (run.dispatcher.clone(), run.call_context.clone())
    };
    let waits = calls.iter().any(|(name, _)| {
        dispatcher.registry().get(name).is_some_and(|tool| {
            tool.declaration.handler.locus() == Locus::Client
                || tool.declaration.policy == cordon_protocol::tool::Policy::Ask
        })
    });
    if waits {
        meter.suspend();
    }
    let dispatched = dispatcher.call_batch(&context, calls).await;
    if waits {
        meter.resume();
    }
    let mut results = Vec::with_capacity(dispatched.len());
    let run = caller.data_mut().run()?;
    for mut call in dispatched {
        // Up to max_tool_calls inputs of max_payload_bytes each would otherwise be held
        // until the end, only to be cut from the result there. Measured as sent (the
        // result is fitted to the output limit exactly at the end).
        let size = call.input_bytes as u64;
        if run.recorded_input_bytes.saturating_add(size) > run.limits.max_output_bytes {
            call.record.input = serde_json::Value::Null;
            run.inputs_truncated = true;
        } else {
            run.recorded_input_bytes += size;
        }
        run.tool_calls.push(call.record);
        results.push(call.result);
    }
    Ok(results)
}

pub(crate) fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}

pub(crate) fn missing_result() -> CallResult {
    Err(ToolFailure {
        kind: ToolErrorKind::Failed,
        message: "no result".into(),
    })
}

/// Defines the `cordon.*` imports on a linker.
pub(crate) fn add_bridge(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_INBOX_READ,
        |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<i32> {
            let memory = memory(&mut caller)?;
            let inbox = std::mem::take(&mut caller.data_mut().run()?.inbox);
            let want = usize::try_from(len).unwrap_or(0).min(inbox.len());
            let offset =
                usize::try_from(ptr).map_err(|_| stop(Stop::Bridge("negative pointer".into())))?;
            memory
                .write(&mut caller, offset, &inbox[..want])
                .map_err(|_| stop(Stop::Bridge("inbox_read outside guest memory".into())))?;
            Ok(i32::try_from(want).unwrap_or(i32::MAX))
        },
    )?;

    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_CALL_TOOL,
        |mut caller: Caller<'_, HostState>,
         (name_ptr, name_len, input_ptr, input_len): (i32, i32, i32, i32)| {
            Box::new(async move {
                let name = lossy(read_guest(&mut caller, name_ptr, name_len)?);
                let input = lossy(read_guest(&mut caller, input_ptr, input_len)?);
                let mut results = dispatch(&mut caller, vec![(name, input)]).await?;
                let result = results.pop().unwrap_or_else(missing_result);
                deliver(&mut caller, abi::encode_response(&result))
            })
        },
    )?;

    linker.func_wrap_async(
        abi::IMPORT_MODULE,
        abi::IMPORT_CALL_BATCH,
        |mut caller: Caller<'_, HostState>, (ptr, len): (i32, i32)| {
            Box::new(async move {
                let frame = read_guest(&mut caller, ptr, len)?;
                let calls: Vec<(String, String)> = abi::decode_batch_request(&frame)
                    .map_err(|error| stop(Stop::Bridge(error.to_string())))?
                    .into_iter()
                    .map(|(name, input)| (name.to_owned(), input.to_owned()))
                    .collect();
                let count = calls.len();
                let mut results = dispatch(&mut caller, calls).await?;
                results.resize_with(count, missing_result);
                deliver(&mut caller, abi::encode_batch_response(&results))
            })
        },
    )?;

    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_OUTPUT,
        |mut caller: Caller<'_, HostState>,
         stream: i32,
         ptr: i32,
         len: i32|
         -> wasmtime::Result<()> {
            let bytes = read_guest(&mut caller, ptr, len)?;
            let stream = if stream == abi::STREAM_STDERR {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            let meter = caller.data().meter.clone();
            let written = meter.output().write(stream, &bytes);
            written.map_err(|reason| stop(meter.record_stop(reason)))
        },
    )?;

    linker.func_wrap(
        abi::IMPORT_MODULE,
        abi::IMPORT_FINISH,
        |mut caller: Caller<'_, HostState>, ptr: i32, len: i32| -> wasmtime::Result<()> {
            let frame = read_guest(&mut caller, ptr, len)?;
            let outcome = abi::decode_outcome(&frame)
                .map_err(|error| stop(Stop::Bridge(error.to_string())))?;
            caller.data_mut().run()?.outcome = Some(outcome);
            Ok(())
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::guest_range;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever pointer and length a guest passes, the host either gets a range inside
        /// its memory of exactly that length or refuses; it never panics or wraps.
        #[test]
        fn guest_ranges_stay_inside_memory(ptr in any::<i32>(), len in any::<i32>(), size in 0usize..(1 << 33)) {
            match guest_range(ptr, len, size) {
                Ok(range) => {
                    prop_assert!(range.end <= size);
                    prop_assert_eq!(range.start as i64, i64::from(ptr));
                    prop_assert_eq!(range.len() as i64, i64::from(len));
                }
                Err(_) => prop_assert!(ptr < 0 || len < 0 || i64::from(ptr) + i64::from(len) > size as i64),
            }
        }

        /// Frames read from guest memory decode to a typed error or a value.
        #[test]
        fn guest_frames_never_panic_the_host(frame in prop::collection::vec(any::<u8>(), 0..128)) {
            let _ = cordon_guest::abi::decode_batch_request(&frame);
            let _ = cordon_guest::abi::decode_outcome(&frame);
        }
    }

    #[test]
    fn the_edges_of_guest_memory() {
        assert_eq!(guest_range(0, 0, 0), Ok(0..0));
        assert_eq!(guest_range(10, 6, 16), Ok(10..16));
        assert!(guest_range(10, 7, 16).is_err());
        assert!(guest_range(i32::MAX, i32::MAX, usize::MAX).is_ok());
        assert!(guest_range(-1, 0, 16).is_err());
        assert!(guest_range(0, -1, 16).is_err());
    }
}
