//! The CPython guest's engine and linker: the sandbox's settings plus exception handling
//! and room for its large instances, and WASI with `host.call` as its way out.

use wasmtime::{Engine, Linker};

use crate::config::SandboxConfig;
use crate::engine::{engine_config, keep_resident, pool_config, wasi_linker};
use crate::error::{SandboxError, engine_error};
use crate::host_state::HostState;
use crate::write_tracking;

use super::host_call;

/// The module's instance state (89,060 functions, a table of 47,157 entries) is far
/// larger than an interpreter built here.
const MAX_INSTANCE_SIZE: usize = 16 << 20;

/// Bytes of a returned CPython memory slot reset in place (its written pages copied back
/// from the image), where the kernel tracks written pages exactly
/// ([`crate::write_tracking`]); else slots are unmapped and the spare's pages faulted in
/// ahead. Fresh executions are faster so (figures under "Slots reset in place" in
/// `docs/benchmarks.md`).
const KEEP_RESIDENT: usize = 16 << 20;
/// Unused slots that keep their resident pages: bounds what idle slots hold to
/// `WARM_SLOTS × KEEP_RESIDENT` (an instance's linear memory and its GC heap take one
/// each; fewer measured slower, `docs/benchmarks.md`: slots were evicted and made again).
const WARM_SLOTS: u32 = 16;

/// The engine of the CPython guest: the sandbox's settings plus exception handling (the
/// module uses the standard proposal, `exnref`). A separate engine keeps the other guests'
/// compiled code and instance pool exactly as they were.
pub(crate) fn engine(config: &SandboxConfig) -> Result<Engine, SandboxError> {
    let mut pool = pool_config(config, MAX_INSTANCE_SIZE);
    // An instance's GC heap (its exceptions live there) takes a memory slot besides its
    // linear memory, and its runtime's calls back into the guest run on a second fiber
    // stack: with one of each per instance, a pool of one could not run CPython at all.
    let count = config.max_instances.max(1);
    pool.total_gc_heaps(count)
        .total_memories(count.saturating_mul(2))
        .total_stacks(count.saturating_mul(2));
    if write_tracking::available() {
        keep_resident(&mut pool, KEEP_RESIDENT);
        pool.max_unused_warm_slots(WARM_SLOTS);
    }
    let mut wasm = engine_config(pool);
    wasm.wasm_exceptions(true);
    Engine::new(&wasm).map_err(engine_error)
}

/// The linker of the CPython guest: WASI and the door.
pub(crate) fn linker(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = wasi_linker(engine)?;
    host_call::add_to_linker(&mut linker).map_err(engine_error)?;
    Ok(linker)
}
