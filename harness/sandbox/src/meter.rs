//! What an execution has used so far, readable from outside the store: output, CPU time,
//! suspension time, and the first reason the host stopped the guest.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use cordon_core::dispatch::EventSink;
use cordon_protocol::execution::{ExecutionEvent, LimitKind, Stream};

/// Why the host stopped a guest. Travels through wasmtime as the error of a trap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Stop {
    /// A limit was hit.
    #[error("{message}")]
    Limit { kind: LimitKind, message: String },
    /// The caller cancelled the execution.
    #[error("the execution was cancelled")]
    Cancelled,
    /// The guest broke the bridge ABI (bad pointers, malformed frames).
    #[error("bridge violation: {0}")]
    Bridge(String),
}

impl Stop {
    pub(crate) fn limit(kind: LimitKind, message: impl Into<String>) -> Self {
        Stop::Limit {
            kind,
            message: message.into(),
        }
    }
}

/// Turns a stop reason into the error that unwinds the guest.
pub(crate) fn stop(reason: Stop) -> wasmtime::Error {
    wasmtime::Error::new(reason)
}

/// Reads this thread's CPU clock. Executions move between tokio worker threads, so the
/// clock is read at the start and end of every poll and the difference accumulated.
#[allow(
    unsafe_code,
    reason = "clock_gettime on a stack value; no invariants beyond the call"
)]
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap_or(0)
}

/// Buffers output and turns it into `output.delta` events a line at a time.
#[derive(Debug)]
pub(crate) struct OutputSink {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// Bytes not yet sent as an event, per stream.
    unsent: [Vec<u8>; 2],
    total: u64,
    max: u64,
    events: EventSink,
}

impl OutputSink {
    fn new(max: u64, events: EventSink) -> Self {
        OutputSink {
            stdout: Vec::new(),
            stderr: Vec::new(),
            unsent: [Vec::new(), Vec::new()],
            total: 0,
            max,
            events,
        }
    }

    /// Appends output; returns `Err` once the output limit is passed (the excess is dropped).
    pub(crate) fn write(&mut self, stream: Stream, bytes: &[u8]) -> Result<(), Stop> {
        let room = self.max.saturating_sub(self.total);
        let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
        let kept = &bytes[..take];
        self.total += bytes.len() as u64;
        let (buffer, index) = match stream {
            Stream::Stdout => (&mut self.stdout, 0),
            Stream::Stderr => (&mut self.stderr, 1),
        };
        buffer.extend_from_slice(kept);
        self.unsent[index].extend_from_slice(kept);
        if kept.contains(&b'\n') || self.unsent[index].len() >= 8192 {
            self.flush_stream(index);
        }
        if self.total > self.max {
            self.flush();
            return Err(Stop::limit(
                LimitKind::Output,
                format!("output exceeded {} bytes (stdout + stderr)", self.max),
            ));
        }
        Ok(())
    }

    fn flush_stream(&mut self, index: usize) {
        if self.unsent[index].is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.unsent[index]);
        // Keep an incomplete UTF-8 sequence for the next delta instead of mangling it.
        let cut = utf8_prefix_len(&bytes);
        let (complete, rest) = bytes.split_at(cut);
        self.unsent[index] = rest.to_vec();
        if complete.is_empty() {
            return;
        }
        let stream = if index == 0 {
            Stream::Stdout
        } else {
            Stream::Stderr
        };
        let text = String::from_utf8_lossy(complete).into_owned();
        self.events
            .emit(ExecutionEvent::OutputDelta { stream, text });
    }

    /// Sends every complete character not yet sent (before tool calls, at a limit).
    pub(crate) fn flush(&mut self) {
        self.flush_stream(0);
        self.flush_stream(1);
    }

    /// Sends everything not yet sent; a dangling partial UTF-8 sequence goes out lossily,
    /// since no more bytes will complete it.
    pub(crate) fn finish(&mut self) {
        self.flush();
        for (index, stream) in [(0, Stream::Stdout), (1, Stream::Stderr)] {
            if !self.unsent[index].is_empty() {
                let text =
                    String::from_utf8_lossy(&std::mem::take(&mut self.unsent[index])).into_owned();
                self.events
                    .emit(ExecutionEvent::OutputDelta { stream, text });
            }
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn take(&mut self) -> (String, String) {
        (
            String::from_utf8_lossy(&std::mem::take(&mut self.stdout)).into_owned(),
            String::from_utf8_lossy(&std::mem::take(&mut self.stderr)).into_owned(),
        )
    }
}

/// Length of the longest prefix that does not end inside a UTF-8 sequence.
fn utf8_prefix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let byte = bytes[len - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let needed = match byte {
            b if b & 0b1110_0000 == 0b1100_0000 => 2,
            b if b & 0b1111_0000 == 0b1110_0000 => 3,
            b if b & 0b1111_1000 == 0b1111_0000 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// State shared between the store, the epoch callback and the task driving the execution.
#[derive(Debug)]
pub(crate) struct Meter {
    output: Mutex<OutputSink>,
    cpu_accumulated_ns: AtomicU64,
    /// Thread CPU clock at the start of the current poll; 0 outside polls.
    cpu_poll_start_ns: AtomicU64,
    cpu_limit_ns: AtomicU64,
    stop: Mutex<Option<Stop>>,
    timing: Mutex<Timing>,
}

#[derive(Debug)]
struct Timing {
    started: Instant,
    wall_limit: Duration,
    suspended: Duration,
    suspended_since: Option<Instant>,
}

impl Meter {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Meter {
            output: Mutex::new(OutputSink::new(0, EventSink::discard())),
            cpu_accumulated_ns: AtomicU64::new(0),
            cpu_poll_start_ns: AtomicU64::new(0),
            cpu_limit_ns: AtomicU64::new(u64::MAX),
            stop: Mutex::new(None),
            timing: Mutex::new(Timing {
                started: Instant::now(),
                wall_limit: Duration::MAX,
                suspended: Duration::ZERO,
                suspended_since: None,
            }),
        })
    }

    /// Starts a new execution on this meter (sessions reuse theirs).
    pub(crate) fn reset(&self, limits: &cordon_protocol::execution::Limits, events: EventSink) {
        *lock(&self.output) = OutputSink::new(limits.max_output_bytes, events);
        self.cpu_accumulated_ns.store(0, Ordering::Relaxed);
        self.cpu_poll_start_ns.store(0, Ordering::Relaxed);
        self.cpu_limit_ns
            .store(limits.cpu_ms.saturating_mul(1_000_000), Ordering::Relaxed);
        *lock(&self.stop) = None;
        *lock(&self.timing) = Timing {
            started: Instant::now(),
            wall_limit: Duration::from_millis(limits.wall_ms),
            suspended: Duration::ZERO,
            suspended_since: None,
        };
    }

    pub(crate) fn output(&self) -> MutexGuard<'_, OutputSink> {
        lock(&self.output)
    }

    /// Records the first stop reason; later ones are consequences of the first.
    pub(crate) fn record_stop(&self, stop: Stop) -> Stop {
        let mut slot = lock(&self.stop);
        slot.get_or_insert(stop).clone()
    }

    pub(crate) fn stop_reason(&self) -> Option<Stop> {
        lock(&self.stop).clone()
    }

    pub(crate) fn cpu_used(&self) -> Duration {
        let start = self.cpu_poll_start_ns.load(Ordering::Relaxed);
        let mut used = self.cpu_accumulated_ns.load(Ordering::Relaxed);
        if start != 0 {
            used += thread_cpu_ns().saturating_sub(start);
        }
        Duration::from_nanos(used)
    }

    pub(crate) fn started(&self) -> Instant {
        lock(&self.timing).started
    }

    /// Marks the start of a wait that does not count against the wall limit.
    pub(crate) fn suspend(&self) {
        lock(&self.timing).suspended_since = Some(Instant::now());
    }

    pub(crate) fn resume(&self) {
        let mut timing = lock(&self.timing);
        if let Some(since) = timing.suspended_since.take() {
            timing.suspended += since.elapsed();
        }
    }

    /// Time left before the wall limit; `None` while suspended (the wait has its own deadline).
    pub(crate) fn wall_remaining(&self) -> Option<Duration> {
        let timing = lock(&self.timing);
        if timing.suspended_since.is_some() {
            return None;
        }
        let counted = timing.started.elapsed().saturating_sub(timing.suspended);
        Some(timing.wall_limit.saturating_sub(counted))
    }

    /// Checked on every epoch tick while the guest runs.
    pub(crate) fn check(&self) -> Result<(), Stop> {
        if let Some(stop) = self.stop_reason() {
            return Err(stop);
        }
        let limit = self.cpu_limit_ns.load(Ordering::Relaxed);
        if self.cpu_used().as_nanos() > u128::from(limit) {
            let ms = limit / 1_000_000;
            return Err(self.record_stop(Stop::limit(
                LimitKind::Cpu,
                format!("CPU time exceeded {ms} ms"),
            )));
        }
        if self.wall_remaining() == Some(Duration::ZERO) {
            return Err(self.wall_stop());
        }
        Ok(())
    }

    pub(crate) fn wall_stop(&self) -> Stop {
        let ms = lock(&self.timing).wall_limit.as_millis();
        self.record_stop(Stop::limit(
            LimitKind::Wall,
            format!("wall time exceeded {ms} ms"),
        ))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks leaves plain data behind; keep serving.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wraps the future driving an execution to charge each poll's CPU time to its meter.
pub(crate) struct CpuMetered<F> {
    inner: Pin<Box<F>>,
    meter: Arc<Meter>,
}

impl<F> CpuMetered<F> {
    pub(crate) fn new(inner: F, meter: Arc<Meter>) -> Self {
        CpuMetered {
            inner: Box::pin(inner),
            meter,
        }
    }
}

impl<F: Future> Future for CpuMetered<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let start = thread_cpu_ns().max(1);
        self.meter.cpu_poll_start_ns.store(start, Ordering::Relaxed);
        let result = self.inner.as_mut().poll(cx);
        let spent = thread_cpu_ns().saturating_sub(start);
        self.meter.cpu_poll_start_ns.store(0, Ordering::Relaxed);
        self.meter
            .cpu_accumulated_ns
            .fetch_add(spent, Ordering::Relaxed);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_prefix_keeps_split_sequences_back() {
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(utf8_prefix_len(b"abc"), 3);
        assert_eq!(utf8_prefix_len(&euro[..2]), 0);
        let mut text = b"a".to_vec();
        text.extend_from_slice(&euro[..1]);
        assert_eq!(utf8_prefix_len(&text), 1);
        text.extend_from_slice(&euro[1..]);
        assert_eq!(utf8_prefix_len(&text), 4);
    }

    #[test]
    fn output_limit_stops_and_keeps_only_what_fits() {
        let mut sink = OutputSink::new(5, EventSink::discard());
        assert!(sink.write(Stream::Stdout, b"abc").is_ok());
        let stop = sink.write(Stream::Stderr, b"defg").unwrap_err();
        assert!(matches!(
            stop,
            Stop::Limit {
                kind: LimitKind::Output,
                ..
            }
        ));
        assert_eq!(sink.take(), ("abc".to_owned(), "de".to_owned()));
    }
}
