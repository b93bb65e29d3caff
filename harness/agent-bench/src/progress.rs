//! The run's progress on stderr.

use std::io::Write;
use std::time::Instant;

use crate::results::EpisodeResult;

/// Progress on stderr: a bar with ETA on a terminal, one line per episode otherwise.
pub(crate) struct Progress {
    pub(crate) total: usize,
    pub(crate) done: usize,
    pub(crate) ok: usize,
    pub(crate) started: Instant,
    pub(crate) bar: bool,
}

impl Progress {
    /// An empty bar, so a terminal shows the run has started before the first episode ends.
    pub(crate) fn start(&self) {
        if self.bar && self.total > 0 {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2K[{}] 0/{} · starting",
                "-".repeat(30),
                self.total
            );
        }
    }

    pub(crate) fn finished(&mut self, result: &EpisodeResult) {
        self.done += 1;
        if result.success {
            self.ok += 1;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let eta = if self.done == 0 {
            0.0
        } else {
            elapsed / self.done as f64 * (self.total - self.done) as f64
        };
        let mut err = std::io::stderr().lock();
        if self.bar {
            let width = 30;
            let filled = width * self.done / self.total.max(1);
            let _ = write!(
                err,
                "\r\x1b[2K[{}{}] {}/{} ok {} · {:.0}s · ETA {:.0}s · {}",
                "#".repeat(filled),
                "-".repeat(width - filled),
                self.done,
                self.total,
                self.ok,
                elapsed,
                eta,
                result.id
            );
            if self.done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let verdict = match (&result.error, result.success) {
                (Some(e), _) => format!("error: {e}"),
                (None, true) => "ok".into(),
                (None, false) => "failed".into(),
            };
            let on = result
                .server
                .as_deref()
                .map(|s| format!(" on {s}"))
                .unwrap_or_default();
            let _ = writeln!(
                err,
                "bench: [{}/{}] {}{on} reward {} in {} steps, {:.0} ms: {verdict} (ETA {:.0}s)",
                self.done,
                self.total,
                result.id,
                result.reward,
                result.steps,
                result.duration_ms,
                eta
            );
        }
    }
}
