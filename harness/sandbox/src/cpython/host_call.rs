//! The host side of the CPython module's one non-WASI import, `host.call`: a byte door
//! that carries Cordon's bridge frames (`cordon-guest`'s `abi`) with an op byte in front.
//!
//! `host.call(req_ptr, req_len, out_ptr_ptr, out_len_ptr) -> i32`: the guest passes a
//! request; the host answers by calling the guest's `host_alloc(n)` export from inside the
//! import (a re-entrant call on the same fiber), writing the answer there and storing its
//! pointer and length as little-endian `u32`s at the two out-pointers. `0` is success.
//! The guest never sees a protocol error as a return code it could swallow: a malformed
//! frame, an unknown op, a second `begin` or `finish` stop the execution with
//! `BridgeViolation`.
//!
//! | op | request body | answer |
//! |---|---|---|
//! | 1 `begin` | — | the execute request frame (tool names, code) |
//! | 2 `call` | `string name`, `string input` | a response frame |
//! | 3 `batch` | a batch request frame | a batch response frame |
//! | 4 `finish` | an outcome frame | empty |

use cordon_guest::abi;
use wasmtime::{Caller, Extern, Linker};

use crate::bridge;
use crate::host_state::HostState;
use crate::meter::{Stop, stop};

/// The import's module and name.
pub(crate) const MODULE: &str = "host";
pub(crate) const NAME: &str = "call";
/// The guest's allocator export (its `malloc`).
pub(crate) const EXPORT_ALLOC: &str = "host_alloc";

/// The ops, as the guest runtime sends them.
pub(crate) const OP_BEGIN: u8 = 1;
pub(crate) const OP_CALL: u8 = 2;
pub(crate) const OP_BATCH: u8 = 3;
pub(crate) const OP_FINISH: u8 = 4;

fn violation(why: impl Into<String>) -> wasmtime::Error {
    stop(Stop::Bridge(why.into()))
}

/// `string name, string input` of a `call` request.
fn decode_call(body: &[u8]) -> Result<(String, String), &'static str> {
    let mut rest = body;
    let mut string = || -> Result<String, &'static str> {
        if rest.len() < 4 {
            return Err("truncated length");
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let text = rest
            .get(4..4usize.saturating_add(len))
            .ok_or("length runs past the end")?;
        let text = std::str::from_utf8(text).map_err(|_| "string is not UTF-8")?;
        rest = &rest[4 + len..];
        Ok(text.to_owned())
    };
    let name = string()?;
    let input = string()?;
    if !rest.is_empty() {
        return Err("trailing bytes");
    }
    Ok((name, input))
}

/// Answers one request: the bytes to hand back.
async fn answer(caller: &mut Caller<'_, HostState>, request: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
    let (&op, body) = request
        .split_first()
        .ok_or_else(|| violation("empty door request"))?;
    match op {
        OP_BEGIN => {
            let run = caller.data_mut().run()?;
            if run.inbox.is_empty() {
                return Err(violation("the execute request was already taken"));
            }
            Ok(std::mem::take(&mut run.inbox))
        }
        OP_CALL => {
            let (name, input) = decode_call(body).map_err(violation)?;
            let mut results = bridge::dispatch(caller, vec![(name, input)]).await?;
            let result = results.pop().unwrap_or_else(bridge::missing_result);
            Ok(abi::encode_response(&result))
        }
        OP_BATCH => {
            let calls: Vec<(String, String)> = abi::decode_batch_request(body)
                .map_err(|error| violation(error.to_string()))?
                .into_iter()
                .map(|(name, input)| (name.to_owned(), input.to_owned()))
                .collect();
            let count = calls.len();
            let mut results = bridge::dispatch(caller, calls).await?;
            results.resize_with(count, bridge::missing_result);
            Ok(abi::encode_batch_response(&results))
        }
        OP_FINISH => {
            let outcome =
                abi::decode_outcome(body).map_err(|error| violation(error.to_string()))?;
            let run = caller.data_mut().run()?;
            if run.outcome.is_some() {
                return Err(violation("the outcome was reported twice"));
            }
            run.outcome = Some(outcome);
            Ok(Vec::new())
        }
        other => Err(violation(format!("unknown door op {other}"))),
    }
}

/// Copies `answer` into a buffer from the guest's allocator and stores its pointer and
/// length at the out-pointers.
async fn hand_back(
    caller: &mut Caller<'_, HostState>,
    answer: &[u8],
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> wasmtime::Result<()> {
    let len = i32::try_from(answer.len()).map_err(|_| {
        stop(Stop::limit(
            cordon_protocol::execution::LimitKind::Payload,
            "response larger than 2 GiB",
        ))
    })?;
    let ptr = if answer.is_empty() {
        0
    } else {
        let alloc = match caller.data().guest_alloc.clone() {
            Some(alloc) => alloc,
            None => {
                let Some(Extern::Func(alloc)) = caller.get_export(EXPORT_ALLOC) else {
                    return Err(violation("the guest exports no host_alloc"));
                };
                let alloc = alloc.typed::<i32, i32>(&*caller)?;
                caller.data_mut().guest_alloc = Some(alloc.clone());
                alloc
            }
        };
        let ptr = alloc.call_async(&mut *caller, len).await?;
        if ptr == 0 {
            return Err(violation("host_alloc returned no buffer"));
        }
        ptr
    };
    let memory = bridge::memory(caller)?;
    let data = memory.data_mut(&mut *caller);
    for (at, bytes) in [
        (ptr, answer),
        (out_ptr_ptr, &ptr.to_le_bytes()[..]),
        (out_len_ptr, &len.to_le_bytes()[..]),
    ] {
        let Ok(bytes_len) = i32::try_from(bytes.len()) else {
            return Err(violation("response larger than 2 GiB"));
        };
        let range = bridge::guest_range(at, bytes_len, data.len()).map_err(violation)?;
        data[range].copy_from_slice(bytes);
    }
    Ok(())
}

/// Defines `host.call` on a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        MODULE,
        NAME,
        |mut caller: Caller<'_, HostState>,
         (req_ptr, req_len, out_ptr_ptr, out_len_ptr): (i32, i32, i32, i32)| {
            Box::new(async move {
                let request = bridge::read_guest(&mut caller, req_ptr, req_len)?;
                let answer = answer(&mut caller, request).await?;
                hand_back(&mut caller, &answer, out_ptr_ptr, out_len_ptr).await?;
                Ok(0i32)
            })
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::decode_call;
    use proptest::prelude::*;

    #[test]
    fn a_call_request_is_two_strings() {
        let mut body = Vec::new();
        for text in ["get_weather", "{\"city\":\"Paris\"}"] {
            body.extend_from_slice(&(text.len() as u32).to_le_bytes());
            body.extend_from_slice(text.as_bytes());
        }
        assert_eq!(
            decode_call(&body),
            Ok(("get_weather".into(), "{\"city\":\"Paris\"}".into()))
        );
        body.push(0);
        assert_eq!(decode_call(&body), Err("trailing bytes"));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Whatever bytes the guest sends, decoding gives a value or a typed refusal.
        #[test]
        fn call_requests_never_panic_the_host(body in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_call(&body);
        }
    }
}
