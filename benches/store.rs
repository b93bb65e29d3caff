//! Store benchmarks: what PostgreSQL (`cordon serve --db postgres://…`) costs over the
//! embedded SQLite store. Run with `cargo bench -p cordon-benches --bench store`; numbers
//! go to docs/benchmarks.md. The PostgreSQL half starts a throwaway cluster (Debian's
//! `postgresql` package; as root it runs as `nobody`) on loopback TCP, with
//! `synchronous_commit = off` — a commit is not flushed at once, the durability SQLite's
//! WAL with `synchronous = NORMAL` gives.
//!
//! 1. A finished execution recorded: its row, `execution.started`, one `output.delta`,
//!    `execution.completed` (each event its own transaction, as the server writes them),
//!    then read back (row and log, as `GET /v1/executions/{id}` does).
//! 2. One `spawn_blocking` round trip: what each SQLite call would pay on a blocking
//!    thread instead of inline.
//! 3. Over HTTP: create an execution of `print(1)` and read its stream to the end, the
//!    server on SQLite (file) and on PostgreSQL.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark that cannot set up should stop"
)]

#[path = "../harness/server/tests/all/postgres_cluster.rs"]
mod postgres_cluster;

use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_protocol::execution::{
    ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Stream, Usage,
};
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::{HttpApi, HttpOptions, Store};
use serde_json::{Value, json};

const STORE_RUNS: usize = 2000;
const HTTP_RUNS: usize = 500;

fn events(id: &str) -> [ExecutionEvent; 3] {
    [
        ExecutionEvent::Started {
            execution_id: id.to_owned(),
            language: Language::PythonLite,
        },
        ExecutionEvent::OutputDelta {
            stream: Stream::Stdout,
            text: "1\n".to_owned(),
        },
        ExecutionEvent::Completed(ExecutionResult {
            status: ExecutionStatus::Completed,
            limit: None,
            stdout: "1\n".to_owned(),
            stderr: String::new(),
            result: Value::Null,
            result_encoding: None,
            error: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            truncated: false,
        }),
    ]
}

async fn record_executions(name: &str, store: &Store) -> Duration {
    let mut samples = Vec::with_capacity(STORE_RUNS);
    for n in 0..STORE_RUNS + 200 {
        let id = format!("exec_{n}");
        let started = Instant::now();
        store
            .insert_execution(&id, "sbx_bench", Language::PythonLite, "print(1)")
            .await
            .unwrap();
        for (seq, event) in (1..).zip(events(&id).iter()) {
            store.append_event(&id, seq, event).await.unwrap();
        }
        let row = store.execution(&id).await.unwrap().unwrap();
        let log = store.events_after(&id, 0, usize::MAX).await.unwrap();
        let elapsed = started.elapsed();
        assert_eq!((row.status.as_str(), log.len()), ("completed", 3));
        // The first ones warm caches and connections.
        if n >= 200 {
            samples.push(elapsed);
        }
    }
    let s = summarize(&mut samples);
    println!(
        "store, finished execution recorded + read back, {name}: p50 {}  p99 {}  mean {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.mean),
        s.count
    );
    s.p50
}

async fn http_print(name: &str, sandbox: Sandbox, store: Store) -> Duration {
    let trajectories = tempfile::tempdir().unwrap();
    let options = HttpOptions::default().trajectories(Some(trajectories.path().to_owned()));
    let api = HttpApi::new(sandbox, store, options).await.expect("api");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(api.serve(listener, std::future::pending()));
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("{url}/v1/sandboxes"))
        .json(&json!({"language": "python-lite"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sandbox = created["id"].as_str().unwrap().to_owned();
    let mut samples = Vec::with_capacity(HTTP_RUNS);
    for n in 0..HTTP_RUNS + 50 {
        let started = Instant::now();
        let body = http
            .post(format!("{url}/v1/sandboxes/{sandbox}/executions"))
            .header("accept", "text/event-stream")
            .json(&json!({"code": "print(1)"}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert!(body.contains(r#""stdout":"1\n""#), "{body}");
        if n >= 50 {
            samples.push(elapsed);
        }
    }
    server.abort();
    let s = summarize(&mut samples);
    println!(
        "HTTP create + stream `print(1)` to completion, {name}: p50 {}  p99 {}  mean {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.mean),
        s.count
    );
    s.p50
}

/// What moving each SQLite call to a blocking thread would add: one `spawn_blocking`
/// round trip (a finished execution is six store calls).
async fn blocking_hop() {
    let mut samples = Vec::with_capacity(STORE_RUNS);
    for n in 0..STORE_RUNS + 200 {
        let started = Instant::now();
        tokio::task::spawn_blocking(|| ()).await.unwrap();
        if n >= 200 {
            samples.push(started.elapsed());
        }
    }
    let s = summarize(&mut samples);
    println!(
        "one spawn_blocking round trip (per store call, were SQLite moved off the task): \
         p50 {}  p99 {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        s.count
    );
}

#[tokio::main]
async fn main() {
    blocking_hop().await;
    let cluster = postgres_cluster::PgCluster::start();
    let dir = tempfile::tempdir().unwrap();

    let sqlite = Store::open(&dir.path().join("store.db")).unwrap();
    let postgres = Store::connect(&cluster.create_database("bench"))
        .await
        .unwrap();
    let on_sqlite = record_executions("SQLite file", &sqlite).await;
    let on_postgres = record_executions("PostgreSQL", &postgres).await;
    println!(
        "store: PostgreSQL adds {} at p50",
        fmt(on_postgres.saturating_sub(on_sqlite))
    );
    drop((sqlite, postgres));

    let sandbox = Sandbox::new(SandboxConfig::default())
        .await
        .expect("sandbox");
    let sqlite = Store::open(&dir.path().join("http.db")).unwrap();
    let postgres = Store::connect(&cluster.create_database("bench_http"))
        .await
        .unwrap();
    let on_sqlite = http_print("SQLite file", sandbox.clone(), sqlite).await;
    let on_postgres = http_print("PostgreSQL", sandbox, postgres).await;
    println!(
        "HTTP: PostgreSQL adds {} at p50",
        fmt(on_postgres.saturating_sub(on_sqlite))
    );
}
