//! Two replicas on one PostgreSQL database: what forwarding costs. Replicas A and B are
//! two in-process `HttpApi`s on 127.0.0.1 with `--replica-address` set, sharing a
//! throwaway PostgreSQL cluster (`synchronous_commit = off`). A stateful JavaScript
//! sandbox lives in A; the same execution (`1 + 1`, answered as its SSE stream, read to
//! the end) is sent to A (local) and to B (forwarded to A: one owner read in the store,
//! one more HTTP hop, the stream passed through), alternately. Also a sandbox read
//! (`GET /v1/sandboxes/{id}`), local and forwarded. Run with `cargo bench -p
//! cordon-benches --bench replicas`; numbers go to docs/benchmarks.md ("Replicas").

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a benchmark that cannot set up should stop"
)]

#[path = "../harness/server/tests/all/postgres_cluster.rs"]
mod postgres_cluster;

use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::{HttpApi, HttpOptions, Store};
use serde_json::json;

const RUNS: usize = 300;

/// Starts a replica on `db`; returns its URL.
async fn replica(db: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let store = Store::connect(db).await.unwrap();
    let sandbox = Sandbox::new(
        SandboxConfig::default()
            .preload(vec![Language::Javascript])
            .max_instances(16),
    )
    .await
    .unwrap();
    let options = HttpOptions::default()
        .pause_after(None)
        .replica_address(Some(url.clone()));
    let api = HttpApi::new(sandbox, store, options).await.unwrap();
    tokio::spawn(api.serve(listener, std::future::pending()));
    url
}

/// One execution of `1 + 1` in `sandbox` through `url`, its stream read to the end.
async fn execute(http: &reqwest::Client, url: &str, sandbox: &str) -> Duration {
    let started = Instant::now();
    let text = http
        .post(format!("{url}/v1/sandboxes/{sandbox}/executions"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": "1 + 1"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(text.contains(r#""result":2"#), "{text}");
    elapsed
}

async fn describe(http: &reqwest::Client, url: &str, sandbox: &str) -> Duration {
    let started = Instant::now();
    let response = http
        .get(format!("{url}/v1/sandboxes/{sandbox}"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    response.bytes().await.unwrap();
    started.elapsed()
}

async fn bench() {
    let cluster = postgres_cluster::PgCluster::start();
    let db = cluster.create_database("replicas");
    let a = replica(&db).await;
    let b = replica(&db).await;
    let http = reqwest::Client::new();
    let created: serde_json::Value = http
        .post(format!("{a}/v1/sandboxes"))
        .json(&json!({"language": "javascript", "stateful": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sandbox = created["id"].as_str().unwrap().to_owned();
    // Warm up both paths (connections, prepared statements, the instance).
    for _ in 0..20 {
        execute(&http, &a, &sandbox).await;
        execute(&http, &b, &sandbox).await;
    }
    let (mut local, mut forwarded) = (Vec::new(), Vec::new());
    let (mut read_local, mut read_forwarded) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        local.push(execute(&http, &a, &sandbox).await);
        forwarded.push(execute(&http, &b, &sandbox).await);
        read_local.push(describe(&http, &a, &sandbox).await);
        read_forwarded.push(describe(&http, &b, &sandbox).await);
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
    line("execution `1 + 1` streamed, sent to its owner", &mut local);
    line(
        "execution `1 + 1` streamed, forwarded by another replica",
        &mut forwarded,
    );
    line("GET /v1/sandboxes/{id}, sent to its owner", &mut read_local);
    line("GET /v1/sandboxes/{id}, forwarded", &mut read_forwarded);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}
