//! Shared helpers for Cordon's benchmark binaries: percentiles, resident memory, and the
//! tool set the sandbox benchmarks call.

use std::sync::Arc;
use std::time::Duration;

use cordon_core::{Dispatcher, ToolRegistry};

/// One schema-checked static tool, `lookup({"key": <integer>})` → `{"value": 1}`: what the
/// sandbox benchmarks call from a loop.
pub fn lookup_tools() -> Dispatcher {
    let registry = ToolRegistry::from_json(
        r#"{"tools": [{"name": "lookup", "input_schema": {"type": "object",
            "properties": {"key": {"type": "integer"}}, "required": ["key"]},
            "handler": {"kind": "static", "result": {"value": 1}}}]}"#,
        "<bench>",
    );
    #[allow(clippy::expect_used, reason = "the declaration above is a constant")]
    Dispatcher::new(Arc::new(registry.expect("valid tools")))
}

/// p50, p99 and mean of a set of samples.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Mean.
    pub mean: Duration,
    /// Number of samples.
    pub count: usize,
}

/// Summarizes samples (sorted in place).
pub fn summarize(samples: &mut [Duration]) -> Summary {
    samples.sort_unstable();
    let count = samples.len();
    let at = |q: f64| samples[((count as f64 - 1.0) * q).round() as usize];
    let total: Duration = samples.iter().sum();
    Summary {
        p50: at(0.50),
        p99: at(0.99),
        mean: total / count.max(1) as u32,
        count,
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/statm`).
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Proportional set size of this process in bytes (Linux `/proc/self/smaps_rollup`'s
/// `Pss`): like the resident set, but a page mapped N times counts 1/N each time. Guest
/// instances map the same read-only image pages, which the resident set counts once per
/// instance and this counts once in all: it is what the instances cost the machine.
pub fn proportional_bytes() -> u64 {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    rollup
        .lines()
        .find_map(|line| line.strip_prefix("Pss:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Minor page faults this process has taken so far (Linux `/proc/self/stat`, field 10):
/// what a fresh instance costs the kernel, since every page a run touches for the first
/// time is one.
pub fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces; fields are counted after its `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|faults| faults.parse().ok())
        .unwrap_or(0)
}

/// Formats a duration in the most readable unit.
pub fn fmt(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    // Per-call costs are a few microseconds: a tenth is too coarse to see a change.
    if micros < 10.0 {
        format!("{micros:.2} µs")
    } else if micros < 1000.0 {
        format!("{micros:.1} µs")
    } else {
        format!("{:.2} ms", micros / 1000.0)
    }
}
