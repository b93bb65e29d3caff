//! The CPython guest's benchmarks (docs/cpython.md). Run with
//! `cargo bench -p cordon-benches --bench cpython`; numbers go to docs/benchmarks.md.
//! `CORDON_BENCH_CASES=fresh,speed,calls,sessions,pause,first` picks a part (`first` builds the
//! image from scratch in a temporary cache: minutes; it is not in the default set).

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::time::{Duration, Instant};

use cordon_benches::{fmt, lookup_tools, proportional_bytes, resident_bytes, summarize};
use cordon_protocol::execution::{ExecutionResult, ExecutionStatus, Language, Limits};
use cordon_sandbox::{ExecutionRequest, Sandbox, SandboxConfig, SessionSpec};

async fn execute(sandbox: &Sandbox, code: &str) -> (Duration, ExecutionResult) {
    let request = ExecutionRequest::new(Language::Python, code, lookup_tools()).limits(Limits {
        cpu_ms: 600_000,
        wall_ms: 600_000,
        ..Limits::default()
    });
    let started = Instant::now();
    let result = sandbox.execute(request).wait().await;
    let elapsed = started.elapsed();
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    (elapsed, result)
}

async fn fresh_instance(sandbox: &Sandbox, code: &str, runs: usize) {
    for _ in 0..runs / 10 {
        execute(sandbox, code).await;
    }
    let mut samples = Vec::new();
    for _ in 0..runs {
        samples.push(execute(sandbox, code).await.0);
    }
    let s = summarize(&mut samples);
    println!(
        "fresh instance `{}` (cpython): p50 {}  p99 {}  mean {}  (n={})",
        code.replace('\n', "; "),
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.mean),
        s.count
    );
}

/// Programs that time their own work with `time.perf_counter()` and print the seconds, so
/// that the guest's and native CPython's start-up are both left out.
const SPEED: [(&str, &str); 3] = [
    (
        "loop (3M additions)",
        "s = 0\nfor i in range(3_000_000):\n    s += i",
    ),
    (
        "recursive fib(27)",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(27)",
    ),
    (
        "json round trip (2,000 × 50-record document)",
        "import json\ndoc = [{'id': i, 'name': f'n{i}', 'tags': ['a', 'b'], 'score': i / 3} for i in range(50)]\nfor _ in range(2000):\n    json.loads(json.dumps(doc))",
    ),
];

fn timed(body: &str) -> String {
    let indented: String = body.lines().map(|line| format!("    {line}\n")).collect();
    format!(
        "import time\ndef _work():\n{indented}_start = time.perf_counter()\n_work()\nprint(time.perf_counter() - _start)"
    )
}

fn seconds(stdout: &str) -> f64 {
    stdout
        .trim()
        .parse()
        .expect("the program prints its seconds")
}

async fn speed(sandbox: &Sandbox) {
    for (name, body) in SPEED {
        let program = timed(body);
        let mut guest = Vec::new();
        let mut native = Vec::new();
        for _ in 0..5 {
            let (_, result) = execute(sandbox, &program).await;
            guest.push(seconds(&result.stdout));
            let output = std::process::Command::new("python3")
                .arg("-c")
                .arg(&program)
                .output()
                .expect("python3 runs");
            native.push(seconds(&String::from_utf8_lossy(&output.stdout)));
        }
        guest.sort_by(f64::total_cmp);
        native.sort_by(f64::total_cmp);
        let (guest, native) = (guest[2], native[2]);
        println!(
            "{name}: cpython guest {:.3} s, native python3 {:.3} s: {:.0}% of native (median of 5, side by side)",
            guest,
            native,
            native / guest * 100.0
        );
    }
}

async fn tool_calls(sandbox: &Sandbox) {
    let with_calls = "for i in range(1000):\n    tools.call('lookup', {'key': i})";
    let without = "for i in range(1000):\n    pass";
    let mut per_call = Vec::new();
    for _ in 0..20 {
        let a = execute(sandbox, with_calls).await.0;
        let b = execute(sandbox, without).await.0;
        per_call.push(a.saturating_sub(b) / 1000);
    }
    let s = summarize(&mut per_call);
    println!(
        "1000 schema-checked static tool calls (cpython, tools.call in a loop): {} per call (median of 20 runs)",
        fmt(s.p50)
    );
}

async fn idle_sessions(sandbox: &Sandbox) {
    let before = (resident_bytes(), proportional_bytes());
    let mut sessions = Vec::new();
    for _ in 0..50 {
        let session = sandbox.session(SessionSpec::new(Language::Python, lookup_tools()));
        let result = session
            .execute(
                "import pandas as pd\nframe = pd.DataFrame({'x': range(1000)})\nint(frame.x.sum())",
            )
            .wait()
            .await;
        assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
        sessions.push(session);
    }
    let after = (resident_bytes(), proportional_bytes());
    let each =
        |before: u64, after: u64| after.saturating_sub(before) as f64 / 50.0 / f64::from(1 << 20);
    println!(
        "50 idle cpython sessions with pandas imported and a DataFrame each: {:.1} MiB resident each \
         ({:.0} MiB in all); proportional (image pages the sessions share counted once): {:.1} MiB each",
        each(before.0, after.0),
        (after.0.saturating_sub(before.0)) as f64 / f64::from(1 << 20),
        each(before.1, after.1),
    );
    drop(sessions);
}

/// Pausing an idle session that imported pandas and holds a 1,000-row DataFrame, resuming
/// it up to its first `print`, and the bytes a store keeps for it.
async fn pause_resume(sandbox: &Sandbox) {
    let setup = "import pandas as pd, numpy as np\n\
                 frame = pd.DataFrame({'x': range(1000), 'y': np.arange(1000) * 0.5, \
                 'name': [f'row {i}' for i in range(1000)]})\nint(frame.x.sum())";
    let spec = || SessionSpec::new(Language::Python, lookup_tools());
    let (mut pauses, mut encodes, mut decodes, mut resumes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut stored, mut changed, mut memory) = (0, 0, 0);
    for _ in 0..20 {
        let session = sandbox.session(spec());
        let result = session.execute(setup).wait().await;
        assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
        let started = Instant::now();
        let paused = session.pause().await.expect("the session pauses");
        pauses.push(started.elapsed());
        let started = Instant::now();
        let bytes = paused.to_bytes();
        encodes.push(started.elapsed());
        (stored, changed, memory) = (bytes.len(), paused.changed_bytes(), paused.memory_bytes());

        let started = Instant::now();
        let paused = cordon_sandbox::PausedSession::from_bytes(&bytes).expect("reads back");
        decodes.push(started.elapsed());
        let resumed = sandbox.resume(&paused, spec()).await.expect("resumes");
        let result = resumed.execute("print(len(frame))").wait().await;
        resumes.push(started.elapsed());
        assert_eq!(result.stdout, "1000\n", "{result:?}");
    }
    let line = |name: &str, samples: &mut Vec<Duration>| {
        let s = summarize(samples);
        println!(
            "{name}: p50 {}  p99 {}  (n={})",
            fmt(s.p50),
            fmt(s.p99),
            s.count
        );
    };
    line("pause an idle pandas session (cpython)", &mut pauses);
    line("  its state to bytes (zstd, sha-256)", &mut encodes);
    line("  bytes back to a paused session", &mut decodes);
    line(
        "resume from bytes to the first print (cpython)",
        &mut resumes,
    );
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!(
        "stored per paused pandas session: {:.2} MiB ({:.1} MiB of memory changed of {:.0} MiB)",
        mib(stored as u64),
        mib(changed),
        mib(memory)
    );
}

async fn first_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let fetched = cordon_sandbox::cpython::fetch(dir.path(), &|line| eprintln!("  {line}"))
        .await
        .expect("the artifacts install");
    let fetch_time = started.elapsed();
    drop(fetched);
    let config = SandboxConfig::default()
        .preload(vec![Language::Python])
        .cache_dir(Some(dir.path().to_owned()))
        .max_instances(8)
        .progress(|line| eprintln!("  {line}"));
    let sandbox = Sandbox::new(config).await.expect("the sandbox starts");
    let build_time = started.elapsed() - fetch_time;
    let (first, _) = execute(&sandbox, "print(1)").await;
    println!(
        "first-ever run (empty cache): fetch + verify + extract {}, snapshot + compile {}, then print(1) {}",
        fmt(fetch_time),
        fmt(build_time),
        fmt(first)
    );
}

fn main() {
    let cases = std::env::var("CORDON_BENCH_CASES")
        .unwrap_or_else(|_| "fresh,speed,calls,sessions,pause".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        if cases.contains("first") {
            first_run().await;
        }
        let started = Instant::now();
        let config = SandboxConfig::default()
            .preload(vec![Language::Python])
            .max_instances(200)
            .progress(|line| eprintln!("  {line}"));
        let sandbox = Sandbox::new(config).await.expect("the sandbox starts");
        println!(
            "loading the cached CPython image: {}",
            fmt(started.elapsed())
        );
        if let Ok(code) = std::env::var("CORDON_BENCH_CODE") {
            // A program of one's own, e.g. to time parts of the guest runtime.
            let (elapsed, result) = execute(&sandbox, &code).await;
            println!("{}{}({})", result.stdout, result.stderr, fmt(elapsed));
            return;
        }
        if cases.contains("fresh") {
            fresh_instance(&sandbox, "print(1)", 300).await;
            fresh_instance(&sandbox, "import pandas\nprint(1)", 300).await;
            fresh_instance(
                &sandbox,
                "import pandas as pd\npd.DataFrame({'x': [1, 2, 3]}).x.sum()",
                300,
            )
            .await;
        }
        if cases.contains("speed") {
            speed(&sandbox).await;
        }
        if cases.contains("calls") {
            tool_calls(&sandbox).await;
        }
        if cases.contains("sessions") {
            idle_sessions(&sandbox).await;
        }
        if cases.contains("pause") {
            pause_resume(&sandbox).await;
        }
    });
}
