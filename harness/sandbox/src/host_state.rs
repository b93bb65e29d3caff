//! Everything a guest instance's store holds ([`HostState`]): WASI (stdout and stderr into
//! the output meter, nothing else), the files, the memory cap, and the execution running.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use cordon_core::dispatch::{CallContext, Dispatcher};
use cordon_guest::abi::Outcome;
use cordon_protocol::execution::{Limits, Stream, ToolCallRecord};
use wasmtime::{Memory, ResourceLimiter, TypedFunc};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{HostMonotonicClock, WasiCtxBuilder};

use crate::meter::{Meter, Stop, stop};
use crate::wasi_fs::{FilesView, FsState};

/// Everything a guest instance's store holds.
pub(crate) struct HostState {
    pub(crate) wasi: WasiP1Ctx,
    pub(crate) memory: MemoryGuard,
    pub(crate) meter: Arc<Meter>,
    /// The guest's file descriptors and its workspace.
    pub(crate) fs: FsState,
    /// The execution currently running on this instance.
    pub(crate) run: Option<RunState>,
    /// The guest's exported memory, found once after instantiation: every bridge call
    /// reads or writes it, and a lookup by name costs a string-pool search each time.
    pub(crate) guest_memory: Option<Memory>,
    /// The CPython guest's allocator export, found on its first door answer (looking it
    /// up and checking its type on every call cost a measurable part of a tool call).
    pub(crate) guest_alloc: Option<TypedFunc<i32, i32>>,
    /// The guest's monotonic clock (kept to read it when a session is paused, and to
    /// carry it on in the instance it resumes in).
    pub(crate) clock: GuestClock,
}

/// Per-execution state of the bridge.
pub(crate) struct RunState {
    /// Frame the guest copies with `inbox_read`.
    pub(crate) inbox: Vec<u8>,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) call_context: Arc<CallContext>,
    pub(crate) limits: Limits,
    pub(crate) tool_calls: Vec<ToolCallRecord>,
    /// Bytes of JSON of the inputs kept in `tool_calls`; past `max_output_bytes` further
    /// inputs are recorded as `null` (they were in their `tool.call` events already).
    pub(crate) recorded_input_bytes: u64,
    /// Whether an input was dropped for that reason.
    pub(crate) inputs_truncated: bool,
    pub(crate) outcome: Option<Outcome>,
}

impl HostState {
    pub(crate) fn new(meter: Arc<Meter>) -> Self {
        let clock = GuestClock::starting_at(0);
        HostState {
            wasi: wasi_context(&meter, clock),
            memory: MemoryGuard::default(),
            meter,
            fs: FsState::default(),
            run: None,
            guest_memory: None,
            guest_alloc: None,
            clock,
        }
    }

    /// Has the guest's monotonic clock go on from `nanos` (a resumed session's clock reads
    /// on from where it was paused, never back). Only before any guest code has run in
    /// the instance: it replaces the WASI context, which holds nothing else of the guest.
    pub(crate) fn restart_clock(&mut self, nanos: u64) {
        self.clock = GuestClock::starting_at(nanos);
        self.wasi = wasi_context(&self.meter, self.clock);
    }

    pub(crate) fn run(&mut self) -> wasmtime::Result<&mut RunState> {
        self.run
            .as_mut()
            .ok_or_else(|| stop(Stop::Bridge("no execution is running".into())))
    }
}

/// A guest's monotonic clock: nanoseconds from `start`, going on from `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GuestClock {
    start: Instant,
    offset: u64,
}

impl GuestClock {
    fn starting_at(offset: u64) -> Self {
        GuestClock {
            start: Instant::now(),
            offset,
        }
    }
}

impl HostMonotonicClock for GuestClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        let elapsed = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.offset.saturating_add(elapsed)
    }
}

/// WASI with stdout and stderr into the meter and `clock` as its monotonic clock.
fn wasi_context(meter: &Arc<Meter>, clock: GuestClock) -> WasiP1Ctx {
    let mut builder = WasiCtxBuilder::new();
    // No args, no env, no preopened directories, no sockets: WASI's defaults, stated.
    builder
        .stdout(GuestStream {
            meter: meter.clone(),
            stream: Stream::Stdout,
        })
        .stderr(GuestStream {
            meter: meter.clone(),
            stream: Stream::Stderr,
        })
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .monotonic_clock(clock);
    builder.build_p1()
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

/// Caps linear memory growth and remembers that the cap was hit: a guest that runs out
/// may abort instead of raising, and the result must still say `memory`.
#[derive(Debug, Default)]
pub(crate) struct MemoryGuard {
    pub(crate) limit: usize,
    pub(crate) hit: bool,
    pub(crate) peak: usize,
}

impl ResourceLimiter for MemoryGuard {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// WASI stdout/stderr (for output that bypasses the runtime's own streams, e.g. `os.write`).
struct GuestStream {
    meter: Arc<Meter>,
    stream: Stream,
}

impl IsTerminal for GuestStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStream {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(GuestStream {
            meter: self.meter.clone(),
            stream: self.stream,
        })
    }
}

impl tokio::io::AsyncWrite for GuestStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Err(reason) = self.meter.output().write(self.stream, buf) {
            // Can't trap from here: record it, and the next epoch tick stops the guest.
            self.meter.record_stop(reason);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
/// The filesystem calls reach the store's files, meter and memory through this.
impl FilesView for HostState {
    fn files(&self) -> &FsState {
        &self.fs
    }

    fn files_mut(&mut self) -> &mut FsState {
        &mut self.fs
    }

    fn meter(&self) -> &Arc<Meter> {
        &self.meter
    }

    fn guest_memory(&self) -> Option<Memory> {
        self.guest_memory
    }
}
