//! Workspace benchmarks: what a fresh instance pays for an empty workspace, and how fast a
//! guest reads a 10 MB workspace file. Run with
//! `cargo bench -p cordon-benches --bench workspace`; numbers go to docs/benchmarks.md.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{ExecutionStatus, Language, Limits};
use cordon_sandbox::{ExecutionRequest, Quota, Sandbox, SandboxConfig, Workspace};

const BIG: usize = 10 << 20;

fn empty_workspace() -> Workspace {
    let limits = Limits::default();
    Workspace::new(Quota {
        bytes: limits.workspace_bytes,
        files: limits.workspace_files,
    })
}

async fn run(
    sandbox: &Sandbox,
    language: Language,
    code: &str,
    workspace: Option<Workspace>,
) -> Duration {
    let tools = Dispatcher::new(Arc::new(ToolRegistry::empty()));
    let mut request = ExecutionRequest::new(language, code, tools);
    if let Some(workspace) = workspace {
        request = request.workspace(workspace);
    }
    let started = Instant::now();
    let result = sandbox.execute(request).wait().await;
    let elapsed = started.elapsed();
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    elapsed
}

/// Fresh instances with and without a new empty workspace, interleaved so load drifts hit
/// both alike; the difference of the medians is what the workspace adds.
async fn empty_workspace_cost(sandbox: &Sandbox, language: Language, hello: &str) {
    for _ in 0..200 {
        run(sandbox, language, hello, None).await;
        run(sandbox, language, hello, Some(empty_workspace())).await;
    }
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        without.push(run(sandbox, language, hello, None).await);
        with.push(run(sandbox, language, hello, Some(empty_workspace())).await);
    }
    let (a, b) = (summarize(&mut without), summarize(&mut with));
    let added = b.p50.as_secs_f64() - a.p50.as_secs_f64();
    println!(
        "fresh instance `{hello}` ({}): without workspace p50 {}, with an empty one p50 {}: added {:+.1} µs",
        language.as_str(),
        fmt(a.p50),
        fmt(b.p50),
        added * 1e6
    );
    let started = Instant::now();
    for _ in 0..100_000 {
        std::hint::black_box(empty_workspace());
    }
    println!(
        "Workspace::new (host side, no guest): {:.0} ns",
        started.elapsed().as_secs_f64() * 1e9 / 100_000.0
    );
}

/// A 10 MB file read whole by the guest, minus a run that does not read it.
async fn read_throughput(sandbox: &Sandbox, language: Language, read: &str, baseline: &str) {
    let workspace = empty_workspace();
    workspace
        .write("big.bin", &vec![7u8; BIG])
        .expect("10 MB fits the default quota");
    let mut per_run = Vec::new();
    for _ in 0..30 {
        let with = run(sandbox, language, read, Some(workspace.clone())).await;
        let without = run(sandbox, language, baseline, Some(workspace.clone())).await;
        per_run.push(with.saturating_sub(without));
    }
    let s = summarize(&mut per_run);
    println!(
        "read a 10 MB workspace file ({}): {} ({:.0} MB/s, median of 30)",
        language.as_str(),
        fmt(s.p50),
        BIG as f64 / 1e6 / s.p50.as_secs_f64()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sandbox = Sandbox::new(SandboxConfig::default().preload(vec![]).max_instances(64))
            .await
            .expect("sandbox");
        for language in [Language::PythonLite, Language::Javascript] {
            if sandbox.prepare(language).await.is_err() {
                println!("({} image not built; skipped)", language.as_str());
                continue;
            }
            let (hello, read, baseline) = match language {
                Language::PythonLite => (
                    "print(1)",
                    "with open('big.bin', 'rb') as f:\n    n = len(f.read())\nassert n == 10485760",
                    "n = 10485760\nassert n == 10485760",
                ),
                _ => (
                    "console.log(1)",
                    "const n = fs.readFileSync('big.bin').length; if (n !== 10485760) throw n",
                    "const n = 10485760; if (n !== 10485760) throw n",
                ),
            };
            empty_workspace_cost(&sandbox, language, hello).await;
            read_throughput(&sandbox, language, read, baseline).await;
        }
    });
}
