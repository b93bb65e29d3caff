//! The wasmtime engines and linkers every guest runs on: the instance pool's settings,
//! limits by epoch, copy-on-write images, slots reset in place, and the epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, Linker, PoolingAllocationConfig,
    ProfilingStrategy,
};

use crate::bridge;
use crate::config::SandboxConfig;
use crate::error::{SandboxError, engine_error};
use crate::host_state::HostState;
use crate::wasi_fs;
use crate::write_tracking;

/// Native stack for guest code. Python frames are deep; 16 MiB lets RustPython's own
/// recursion limit (a clean `RecursionError`) trigger before the stack runs out.
const WASM_STACK: usize = 16 << 20;
/// Bytes of a returned JavaScript memory slot reset in place (its written pages, found
/// with Linux's `PAGEMAP_SCAN` where the kernel has it, copied back from the image) rather
/// than unmapped: the next fresh instance finds them mapped instead of faulting each one
/// in (fewer faults and a faster fresh run: figures in `docs/benchmarks.md`). The
/// QuickJS image and a small run fit in it.
pub(crate) const KEEP_RESIDENT_JAVASCRIPT: usize = 4 << 20;
/// The same for RustPython, only where the kernel tracks written pages exactly
/// ([`write_tracking`]). Without that, every page of a touched page table counts as
/// written and the copy costs more than the faults it saves (figures in
/// `docs/benchmarks.md`); its slots are then unmapped and a spare is faulted in ahead.
pub(crate) const KEEP_RESIDENT_PYTHON_LITE: usize = 8 << 20;
/// The same for tables, in both guests' engine (the function tables are a few hundred
/// KiB; RustPython's lazily filled table faulted ~30 pages per fresh run when unmapped).
const KEEP_RESIDENT_TABLE: usize = 1 << 20;
/// Unused slots that keep their resident pages (and image mapping): bounds what idle slots
/// hold to `MAX_WARM_SLOTS × (KEEP_RESIDENT_PYTHON_LITE + KEEP_RESIDENT_TABLE)`.
const MAX_WARM_SLOTS: u32 = 32;
/// Epoch tick: the granularity of CPU/wall limits and of yielding to other executions.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The instance pool's settings every engine shares: `max_instances` of everything, and
/// instances up to `instance_size` bytes.
pub(crate) fn pool_config(config: &SandboxConfig, instance_size: usize) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    let count = config.max_instances.max(1);
    pool.total_core_instances(count)
        .total_memories(count)
        .total_tables(count)
        .total_stacks(count)
        .max_memory_size(max_memory(config))
        .table_elements(200_000)
        .max_core_instance_size(instance_size);
    pool
}

/// The largest memory an instance may have: every pool slot holds this much.
fn max_memory(config: &SandboxConfig) -> usize {
    usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX)
}

/// Has `pool` reset `bytes` of each returned memory slot in place (its written pages
/// copied back from the image) instead of unmapping them; 0 unmaps them all.
pub(crate) fn keep_resident(pool: &mut PoolingAllocationConfig, bytes: usize) {
    if bytes > 0 {
        pool.pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident(bytes);
    }
}

/// How far an image's instances are armed for exact write tracking ([`write_tracking`]):
/// the largest memory, which every slot holds; none where the kernel cannot track.
pub(crate) fn tracked_max(config: &SandboxConfig) -> Option<usize> {
    write_tracking::available().then(|| max_memory(config))
}

/// The engine settings every guest shares (epoch limits, deep stacks, copy-on-write
/// images), over `pool`.
pub(crate) fn engine_config(pool: PoolingAllocationConfig) -> Config {
    let mut wasm = Config::new();
    wasm.epoch_interruption(true)
        .max_wasm_stack(WASM_STACK)
        .async_stack_size(WASM_STACK + (1 << 20))
        .memory_init_cow(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // `perf record` shows guest functions by name only with a map of the compiled code
    // (`/tmp/perf-<pid>.map`); written when asked for, since it costs at every image load.
    if std::env::var_os("CORDON_PERF_MAP").is_some() {
        wasm.profiler(ProfilingStrategy::PerfMap);
    }
    wasm
}

/// An engine for the RustPython and JavaScript guests. `keep_resident` bytes of each
/// returned memory slot are reset in place instead of unmapped (0: all unmapped); tables
/// always keep theirs.
pub(crate) fn engine(config: &SandboxConfig, keep_resident: usize) -> Result<Engine, SandboxError> {
    let mut pool = pool_config(config, 4 << 20);
    pool.table_keep_resident(KEEP_RESIDENT_TABLE)
        .max_unused_warm_slots(MAX_WARM_SLOTS);
    self::keep_resident(&mut pool, keep_resident);
    let mut wasm = engine_config(pool);
    // The build has GC support for the CPython guest's exceptions (its own engine); these
    // guests need neither.
    wasm.wasm_gc(false).wasm_exceptions(false);
    Engine::new(&wasm).map_err(|error| SandboxError::Engine(format!("{error:#}")))
}

/// A linker with WASI, its file calls shadowed by Cordon's in-memory filesystem; each
/// guest adds its own way out (the bridge, or CPython's door).
pub(crate) fn wasi_linker(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state: &mut HostState| &mut state.wasi)
        .map_err(engine_error)?;
    wasi_fs::add_to_linker(&mut linker).map_err(engine_error)?;
    Ok(linker)
}

/// The linker of the RustPython and JavaScript guests: WASI and the bridge.
pub(crate) fn linker(engine: &Engine) -> Result<Linker<HostState>, SandboxError> {
    let mut linker = wasi_linker(engine)?;
    bridge::add_bridge(&mut linker).map_err(engine_error)?;
    Ok(linker)
}

pub(crate) fn spawn_epoch_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    // A plain thread: it must tick even when every runtime worker is busy running guests.
    let spawned = std::thread::Builder::new()
        .name("cordon-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
    if let Err(error) = spawned {
        // Without a ticker, CPU and wall limits only trigger at host calls; say so loudly.
        eprintln!("cordon-sandbox: could not start the epoch thread: {error}");
    }
}
