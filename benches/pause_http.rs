//! Pausing and resuming a sandbox over HTTP: an idle CPython sandbox that imported pandas
//! and holds a 1,000-row DataFrame, paused with `POST /v1/sandboxes/{id}/pause`, resumed
//! with `POST /resume`, and paused again then resumed by its next execution. A real
//! server on 127.0.0.1 over a SQLite file and an objects folder (what `cordon serve`
//! runs), `reqwest` as the client. Run with `cargo bench -p cordon-benches --bench
//! pause_http`; numbers go to docs/benchmarks.md ("Pausing and resuming sessions").

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::objects::Objects;
use cordon_server::{HttpApi, HttpOptions, Store};
use serde_json::{Value, json};

const SETUP: &str = "import pandas as pd, numpy as np\n\
    frame = pd.DataFrame({'x': range(1000), 'y': np.arange(1000) * 0.5, \
    'name': [f'row {i}' for i in range(1000)]})\nint(frame.x.sum())";

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Value {
    let response = http.post(url).json(&body).send().await.expect("request");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.json().await.expect("json")
}

/// Runs `code` streamed to its end; returns the stream's text.
async fn run(http: &reqwest::Client, url: &str, sandbox: &str, code: &str) -> String {
    let text = http
        .post(format!("{url}/v1/sandboxes/{sandbox}/executions"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code}))
        .send()
        .await
        .expect("execution")
        .text()
        .await
        .expect("stream");
    assert!(text.contains(r#""status":"completed""#), "{text}");
    text
}

async fn bench() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(&dir.path().join("cordon.db")).expect("store");
    let objects =
        Objects::open(dir.path().join("objects").to_str().expect("utf-8")).expect("objects folder");
    let sandbox = Sandbox::new(
        SandboxConfig::default()
            .preload(vec![Language::Python])
            .max_instances(32),
    )
    .await
    .expect("sandbox");
    let options = HttpOptions::default()
        .objects(Some(objects))
        .pause_after(None)
        .trajectories(Some(dir.path().join("trajectories")));
    let api = HttpApi::new(sandbox, store, options).await.expect("api");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(api.serve(listener, std::future::pending()));
    let http = reqwest::Client::new();

    let (mut pauses, mut resumes, mut transparent) = (Vec::new(), Vec::new(), Vec::new());
    let mut stored = 0;
    for _ in 0..20 {
        let created = post(
            &http,
            &format!("{url}/v1/sandboxes"),
            json!({"language": "python", "stateful": true}),
        )
        .await;
        let id = created["id"].as_str().expect("id").to_owned();
        run(&http, &url, &id, SETUP).await;

        let started = Instant::now();
        let paused = post(&http, &format!("{url}/v1/sandboxes/{id}/pause"), json!({})).await;
        pauses.push(started.elapsed());
        assert_eq!(paused["state"], "paused");
        stored = paused["paused_bytes"].as_u64().expect("paused_bytes");

        let started = Instant::now();
        let live = post(&http, &format!("{url}/v1/sandboxes/{id}/resume"), json!({})).await;
        resumes.push(started.elapsed());
        assert_eq!(live["state"], "live");

        post(&http, &format!("{url}/v1/sandboxes/{id}/pause"), json!({})).await;
        let started = Instant::now();
        let text = run(&http, &url, &id, "print(len(frame))").await;
        transparent.push(started.elapsed());
        assert!(text.contains(r#""stdout":"1000\n""#), "{text}");
        let response = http
            .delete(format!("{url}/v1/sandboxes/{id}"))
            .send()
            .await
            .expect("delete");
        assert!(response.status().is_success());
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
    line("HTTP POST /pause of an idle pandas sandbox", &mut pauses);
    line("HTTP POST /resume of it", &mut resumes);
    line(
        "HTTP execution `print(len(frame))` on it paused (resume + run + stream)",
        &mut transparent,
    );
    println!(
        "paused_bytes: {:.2} MiB",
        stored as f64 / f64::from(1 << 20)
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench());
}
