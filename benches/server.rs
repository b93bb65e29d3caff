//! Server benchmarks (issue: `cordon serve` / `cordon mcp`). Run with
//! `cargo bench -p cordon-benches --bench server`; numbers go to docs/benchmarks.md.
//!
//! 1. HTTP: create an execution of `print(1)` and read its stream to the end.
//! 2. MCP: one `execute_code` round trip over the stdio transport's framing (newline
//!    JSON-RPC over an in-process byte pipe, so process start-up is not measured).
//! 3. Suspend → post result → resume: from sending `POST /tool_results` to the stream
//!    delivering the call's `tool.result`.
//! 4. 200 concurrent executions over HTTP: throughput, p99, lost results.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_core::ToolRegistry;
use cordon_protocol::execution::{Language, Limits};
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::{HttpApi, HttpOptions, McpServer, Store};
use serde_json::{Value, json};

async fn start_http(sandbox: Sandbox) -> String {
    let store = Store::in_memory().expect("in-memory store");
    let api = HttpApi::new(sandbox, store, HttpOptions::default()).expect("api");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(api.serve(listener, std::future::pending()));
    url
}

async fn sandbox_id(http: &reqwest::Client, url: &str, body: Value) -> String {
    let created: Value = http
        .post(format!("{url}/v1/sandboxes"))
        .json(&body)
        .send()
        .await
        .expect("create sandbox")
        .json()
        .await
        .expect("json");
    created["id"].as_str().expect("id").to_owned()
}

/// Runs `code` with a streamed create request; returns the whole stream's text.
async fn run_streamed(http: &reqwest::Client, url: &str, sandbox: &str, code: &str) -> String {
    let response = http
        .post(format!("{url}/v1/sandboxes/{sandbox}/executions"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code}))
        .send()
        .await
        .expect("create execution");
    let body = response.text().await.expect("stream");
    assert!(body.contains("event: execution.completed"), "{body}");
    body
}

async fn http_print(http: &reqwest::Client, url: &str) {
    let sandbox = sandbox_id(http, url, json!({"language": "python"})).await;
    for _ in 0..100 {
        run_streamed(http, url, &sandbox, "print(1)").await;
    }
    let mut samples = Vec::new();
    for _ in 0..1000 {
        let started = Instant::now();
        let body = run_streamed(http, url, &sandbox, "print(1)").await;
        samples.push(started.elapsed());
        assert!(body.contains(r#""stdout":"1\n""#), "{body}");
    }
    let s = summarize(&mut samples);
    println!(
        "HTTP create + stream `print(1)` to completion: p50 {}  p99 {}  mean {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.mean),
        s.count
    );
}

async fn suspend_resume(http: &reqwest::Client, url: &str) {
    let tools = json!([{"name": "lookup", "handler": {"kind": "client"}}]);
    let sandbox = sandbox_id(
        http,
        url,
        json!({"language": "python", "tools": tools, "stateful": true}),
    )
    .await;
    let mut samples = Vec::new();
    for round in 0..600 {
        let mut response = http
            .post(format!("{url}/v1/sandboxes/{sandbox}/executions"))
            .header("accept", "text/event-stream")
            .json(&json!({"code": "await lookup()"}))
            .send()
            .await
            .expect("create");
        let mut seen = String::new();
        while !seen.contains("event: execution.awaiting") {
            let chunk = response.chunk().await.expect("chunk").expect("more");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        let call = quoted_after(&seen, r#""pending":[""#).expect("pending call id");
        let execution = quoted_after(&seen, r#""execution_id":""#).expect("execution id");
        let started = Instant::now();
        let posted = http
            .post(format!("{url}/v1/executions/{execution}/tool_results"))
            .json(&json!({"results": [{"call_id": call, "output": 1}]}))
            .send()
            .await
            .expect("post");
        assert!(posted.status().is_success());
        let mut rest = String::new();
        while !rest.contains("event: tool.result") {
            let chunk = response.chunk().await.expect("chunk").expect("more");
            rest.push_str(&String::from_utf8_lossy(&chunk));
        }
        if round >= 100 {
            samples.push(started.elapsed());
        }
        while response.chunk().await.expect("chunk").is_some() {}
    }
    let s = summarize(&mut samples);
    println!(
        "suspend → POST tool_results → resumed (tool.result on the stream): p50 {}  p99 {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        s.count
    );
}

async fn concurrent(http: &reqwest::Client, url: &str) {
    const N: usize = 200;
    let sandbox = sandbox_id(http, url, json!({"language": "python"})).await;
    let started = Instant::now();
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let http = http.clone();
            let url = url.to_owned();
            let sandbox = sandbox.clone();
            tokio::spawn(async move {
                let began = Instant::now();
                let body = run_streamed(&http, &url, &sandbox, &format!("print({i})")).await;
                (i, began.elapsed(), body)
            })
        })
        .collect();
    let mut samples = Vec::new();
    let mut lost = 0;
    for task in tasks {
        let (i, elapsed, body) = task.await.expect("task");
        if !body.contains(&format!(r#""stdout":"{i}\n""#)) {
            lost += 1;
        }
        samples.push(elapsed);
    }
    let total = started.elapsed();
    let s = summarize(&mut samples);
    println!(
        "{N} concurrent executions over HTTP: {:.0} executions/s, p50 {}  p99 {}, lost results: {lost}",
        N as f64 / total.as_secs_f64(),
        fmt(s.p50),
        fmt(s.p99)
    );
}

async fn mcp_round_trip(sandbox: Sandbox) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let server = McpServer::new(sandbox, ToolRegistry::empty(), Limits::default()).expect("mcp");
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.expect("client");
    let arguments = json!({"code": "print(1)"});
    let Value::Object(arguments) = arguments else {
        return;
    };
    let call = || {
        client
            .call_tool(CallToolRequestParams::new("execute_code").with_arguments(arguments.clone()))
    };
    for _ in 0..100 {
        call().await.expect("call");
    }
    let mut samples = Vec::new();
    for _ in 0..1000 {
        let started = Instant::now();
        let result = call().await.expect("call");
        samples.push(started.elapsed());
        assert_eq!(result.is_error, Some(false));
    }
    let s = summarize(&mut samples);
    println!(
        "MCP execute_code `print(1)` round trip (stdio framing, in-process pipe): p50 {}  p99 {}  (n={})",
        fmt(s.p50),
        fmt(s.p99),
        s.count
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sandbox = Sandbox::new(
            SandboxConfig::default()
                .preload(vec![Language::Python])
                .max_instances(512),
        )
        .await
        .expect("sandbox");
        let url = start_http(sandbox.clone()).await;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build()
            .expect("client");
        http_print(&http, &url).await;
        suspend_resume(&http, &url).await;
        concurrent(&http, &url).await;
        mcp_round_trip(sandbox).await;
    });
}

/// The text after `marker` up to the next `"` (a JSON string value in raw event text).
fn quoted_after(text: &str, marker: &str) -> Option<String> {
    text.split(marker)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(str::to_owned)
}
