//! Sandbox benchmarks (issue: programmatic tool calling). Run with
//! `cargo bench -p cordon-benches --bench sandbox`; numbers go to docs/benchmarks.md.
//! `CORDON_BENCH_LANG=python-lite|javascript` (RustPython and QuickJS; the CPython guest has
//! `benches/cpython.rs`) and `CORDON_BENCH_CASES=fresh,calls,…` pick a part;
//! `CORDON_BENCH_CODE=…` runs a program of one's own instead.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::time::{Duration, Instant};

use cordon_benches::{fmt, lookup_tools, minor_faults, resident_bytes, summarize};
use cordon_protocol::execution::{ExecutionStatus, Language, Limits};
use cordon_sandbox::{Execution, ExecutionRequest, Sandbox, SandboxConfig, Session, SessionSpec};

/// How long the execution `start` begins takes to complete (it must complete).
async fn timed(start: impl FnOnce() -> Execution) -> Duration {
    let started = Instant::now();
    let result = start().wait().await;
    let elapsed = started.elapsed();
    assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
    elapsed
}

async fn run(sandbox: &Sandbox, language: Language, code: &str) -> Duration {
    // The dispatcher (tool registry, compiled schemas) is built before the clock starts: a
    // server builds it once per tool set, not once per execution.
    let request = ExecutionRequest::new(language, code, lookup_tools());
    timed(|| sandbox.execute(request)).await
}

async fn fresh_instance(sandbox: &Sandbox, language: Language, code: &str) {
    for _ in 0..200 {
        run(sandbox, language, code).await;
    }
    // Back to back, as a batch of executions would come; then with a pause before each,
    // as a model loop leaves one (its turn takes far longer), which lets the sandbox have
    // the next instance ready.
    for (label, pause, runs) in [
        ("back to back", Duration::ZERO, 2000),
        ("after a 5 ms pause", Duration::from_millis(5), 500),
    ] {
        let mut samples = Vec::new();
        let faults_before = minor_faults();
        for _ in 0..runs {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            samples.push(run(sandbox, language, code).await);
        }
        // Counted for the whole process: the faults of making the next instance too.
        let faults = (minor_faults() - faults_before) as f64 / f64::from(runs);
        let s = summarize(&mut samples);
        println!(
            "fresh instance `{code}` ({}), {label}: p50 {}  p99 {}  mean {}  (n={}), {faults:.0} page faults per run",
            language.as_str(),
            fmt(s.p50),
            fmt(s.p99),
            fmt(s.mean),
            s.count
        );
    }
}

async fn in_session(session: &Session, code: &str) -> Duration {
    timed(|| session.execute(code)).await
}

/// An execution in a live session (no instance to make): what a session's step costs,
/// and the floor under a fresh instance's run of the same code.
async fn session_step(sandbox: &Sandbox, language: Language, code: &str) {
    let session = sandbox.session(SessionSpec::new(language, lookup_tools()));
    for _ in 0..200 {
        in_session(&session, code).await;
    }
    // With a pause too: what an idle process pays to pick work up again, with no
    // instance to make (the floor under a fresh instance's run after a pause).
    for (label, pause, runs) in [
        ("back to back", Duration::ZERO, 2000),
        ("after a 5 ms pause", Duration::from_millis(5), 500),
    ] {
        let mut samples = Vec::new();
        for _ in 0..runs {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            samples.push(in_session(&session, code).await);
        }
        let s = summarize(&mut samples);
        println!(
            "execution in a live session `{code}` ({}), {label}: p50 {}  p99 {}  (n={})",
            language.as_str(),
            fmt(s.p50),
            fmt(s.p99),
            s.count
        );
    }
}

async fn tool_calls(sandbox: &Sandbox, language: Language, with_calls: &str, without: &str) {
    // Both loops run in one live session: a fresh instance's making (and whether the one
    // made ahead was ready) would otherwise differ between the two runs of a pair and
    // land in the difference.
    let session = sandbox.session(SessionSpec::new(language, lookup_tools()));
    // Warm up first: the first runs grow the instance's memory and the allocator's caches.
    for _ in 0..10 {
        in_session(&session, with_calls).await;
    }
    // A run takes a few milliseconds, so many of them are needed for a steady median.
    let runs = 200;
    let mut per_call = Vec::new();
    for _ in 0..runs {
        let a = in_session(&session, with_calls).await;
        let b = in_session(&session, without).await;
        per_call.push(a.saturating_sub(b) / 1000);
    }
    let s = summarize(&mut per_call);
    println!(
        "1000 schema-checked static tool calls ({}): {} per call (median of {runs} runs, one session)",
        language.as_str(),
        fmt(s.p50)
    );
}

/// The host's share of a tool call: one schema-checked static call through the dispatcher,
/// with nothing listening to events (as in the sandbox when no one streams them).
async fn host_dispatch() {
    let dispatcher = lookup_tools();
    let context = cordon_core::dispatch::CallContext::new("bench");
    let call = || vec![("lookup".to_owned(), r#"{"key": 7}"#.to_owned())];
    for _ in 0..10_000 {
        dispatcher.call_batch(&context, call()).await;
    }
    let mut samples = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        for _ in 0..10_000 {
            let done = dispatcher.call_batch(&context, call()).await;
            assert!(done[0].result.is_ok());
        }
        samples.push(started.elapsed() / 10_000);
    }
    let s = summarize(&mut samples);
    println!("host dispatch of one static call: {} per call", fmt(s.p50));
}

async fn cold_and_warm_start(language: Language, hello: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    for label in ["empty cache", "warm cache"] {
        let started = Instant::now();
        let config = SandboxConfig::default()
            .preload(vec![])
            .cache_dir(Some(dir.path().to_owned()))
            .max_instances(4);
        let sandbox = Sandbox::new(config).await.expect("sandbox");
        let result = sandbox
            .execute(ExecutionRequest::new(language, hello, lookup_tools()))
            .wait()
            .await;
        assert_eq!(result.stdout.trim(), "1", "{result:?}");
        println!(
            "engine start → first output ({}, {label}): {}",
            language.as_str(),
            fmt(started.elapsed())
        );
    }
}

async fn idle_sessions(sandbox: &Sandbox, language: Language, code: &str) {
    let before = resident_bytes();
    let mut sessions = Vec::new();
    for _ in 0..200 {
        let session = sandbox.session(SessionSpec::new(language, lookup_tools()));
        let result = session.execute(code).wait().await;
        assert_eq!(result.status, ExecutionStatus::Completed, "{result:?}");
        sessions.push(session);
    }
    let after = resident_bytes();
    let per = (after.saturating_sub(before)) as f64 / 200.0 / (1 << 20) as f64;
    println!(
        "resident memory per idle session ({}, 200 live): {per:.2} MiB",
        language.as_str()
    );
    drop(sessions);
}

async fn concurrent(sandbox: &Sandbox, language: Language, code: &'static str) {
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..100 {
        let sandbox = sandbox.clone();
        handles.push(tokio::spawn(async move {
            let begun = Instant::now();
            let result = sandbox
                .execute(
                    ExecutionRequest::new(language, code, lookup_tools()).limits(Limits::default()),
                )
                .wait()
                .await;
            (begun.elapsed(), result.status)
        }));
    }
    let mut latencies = Vec::new();
    for handle in handles {
        let (latency, status) = handle.await.expect("task");
        assert_eq!(status, ExecutionStatus::Completed);
        latencies.push(latency);
    }
    let total = started.elapsed();
    let s = summarize(&mut latencies);
    println!(
        "100 executions at once ({}, `{}`): {:.0} executions/s, p50 {}  p99 {}",
        language.as_str(),
        code.replace('\n', "; "),
        100.0 / total.as_secs_f64(),
        fmt(s.p50),
        fmt(s.p99)
    );
}

/// Whether a case runs: all of them unless `CORDON_BENCH_CASES` lists some (comma-separated:
/// dispatch, fresh, session, calls, sessions, concurrent, start).
fn wanted(case: &str) -> bool {
    std::env::var("CORDON_BENCH_CASES")
        .map(|cases| cases.split(',').any(|wanted| wanted.trim() == case))
        .unwrap_or(true)
}

fn main() {
    let languages: Vec<Language> = match std::env::var("CORDON_BENCH_LANG").as_deref() {
        Ok("python-lite" | "python") => vec![Language::PythonLite],
        Ok("javascript") => vec![Language::Javascript],
        _ => vec![Language::PythonLite, Language::Javascript],
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sandbox = Sandbox::new(SandboxConfig::default().preload(vec![]).max_instances(400))
            .await
            .expect("sandbox");
        if wanted("dispatch") {
            host_dispatch().await;
        }
        for language in languages {
            if sandbox.prepare(language).await.is_err() {
                println!("({} image not built; skipped)", language.as_str());
                continue;
            }
            let (hello, loop_calls, loop_empty, compute) = match language {
                Language::PythonLite => (
                    "print(1)",
                    "for i in range(1000):\n    tools.call('lookup', {'key': i})",
                    "for i in range(1000):\n    pass",
                    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nfib(15)",
                ),
                _ => (
                    "console.log(1)",
                    "for (let i = 0; i < 1000; i++) tools.call('lookup', {key: i})",
                    "for (let i = 0; i < 1000; i++) {}",
                    "function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) }\nfib(15)",
                ),
            };
            if let Ok(code) = std::env::var("CORDON_BENCH_CODE") {
                // A program of one's own (with the `lookup` tool), e.g. to time parts of
                // the guest runtime from inside.
                let request = ExecutionRequest::new(language, code, lookup_tools());
                let result = sandbox.execute(request).wait().await;
                let ended = match &result.error {
                    Some(error) => format!("{}: {}", error.error_type, error.message),
                    None => result.result.to_string(),
                };
                println!("{}{}{ended}", result.stdout, result.stderr);
                continue;
            }
            if wanted("fresh") {
                fresh_instance(&sandbox, language, hello).await;
            }
            if wanted("session") {
                session_step(&sandbox, language, hello).await;
            }
            if wanted("calls") {
                tool_calls(&sandbox, language, loop_calls, loop_empty).await;
            }
            if wanted("sessions") {
                let assignment = if language == Language::PythonLite {
                    "x = 1"
                } else {
                    "var x = 1"
                };
                idle_sessions(&sandbox, language, assignment).await;
            }
            if wanted("concurrent") {
                concurrent(&sandbox, language, hello).await;
                concurrent(&sandbox, language, compute).await;
            }
            if wanted("start") {
                cold_and_warm_start(language, hello).await;
            }
        }
    });
}
