//! Entering the CPython guest: source code run as one `turn` of its interpreter, and each
//! execution as the turn that calls the runtime's entry point.

use wasmtime::Store;

use crate::host_state::HostState;

use super::host_call;

/// What each execution's `turn` runs: the runtime's entry point.
const ENTRY: &str = "__import__(\"sys\").modules[\"_cordon_runtime\"]._execute()";

/// Runs `source` as one `turn` and returns its status (0: ran to the end, 256 added when
/// the code called `exit()`).
pub(super) async fn turn(
    store: &mut Store<HostState>,
    instance: wasmtime::Instance,
    source: &str,
) -> wasmtime::Result<i32> {
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, host_call::EXPORT_ALLOC)?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
    let len = i32::try_from(source.len())?;
    let ptr = alloc.call_async(&mut *store, len).await?;
    if ptr == 0 {
        wasmtime::bail!("the guest could not allocate {len} bytes for its code");
    }
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
    memory.write(&mut *store, usize::try_from(ptr)?, source.as_bytes())?;
    turn.call_async(&mut *store, (ptr, len)).await
}

/// Runs one execution: the runtime's entry point as a `turn`. The request waits in the
/// inbox for the runtime's `begin`; its outcome arrives through `finish`.
pub(crate) async fn enter(
    store: &mut Store<HostState>,
    instance: wasmtime::Instance,
) -> wasmtime::Result<()> {
    match turn(store, instance, ENTRY).await? {
        0 => Ok(()),
        status => Err(wasmtime::format_err!(
            "the CPython runtime's turn ended with status {status}"
        )),
    }
}
