//! Server benchmarks (issue: `cordon serve` / `cordon mcp`). Run with
//! `cargo bench -p cordon-benches --bench server`; numbers go to docs/benchmarks.md.
//!
//! 1. HTTP: create an execution of `print(1)` and read its stream to the end.
//! 2. MCP: one `execute_code` round trip over the stdio transport's framing (newline
//!    JSON-RPC over an in-process byte pipe, so process start-up is not measured).
//! 3. Suspend → post result → resume: from sending `POST /tool_results` to the stream
//!    delivering the call's `tool.result`.
//! 4. 200 concurrent executions over HTTP: throughput, p99, lost results.
//! 5. Computer use over HTTP: `POST /v1/computers/{id}/actions` with a left_click →
//!    the step's JSON (screenshot included), on a local page; and opening a session.
//!    Needs Chromium (skipped without it). `BENCH_COMPUTER_ONLY=1` runs only this part.

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

async fn start_http(
    sandbox: Sandbox,
    trajectories: &std::path::Path,
) -> (String, cordon_server::http::ShutdownHandle) {
    let store = Store::in_memory().expect("in-memory store");
    let mut options = HttpOptions::default().trajectories(Some(trajectories.to_owned()));
    // The bench's page is on loopback (a private network), and the bench may run as root
    // (CI), where Chromium's sandbox cannot run: both are lifted explicitly.
    options.browser.allow_private_network = true;
    options.browser.no_sandbox = true;
    let api = HttpApi::new(sandbox, store, options).await.expect("api");
    let handle = api.shutdown_handle();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(api.serve(listener, std::future::pending()));
    (url, handle)
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
    let sandbox = sandbox_id(http, url, json!({"language": "python-lite"})).await;
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
        json!({"language": "python-lite", "tools": tools, "stateful": true}),
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
    let sandbox = sandbox_id(http, url, json!({"language": "python-lite"})).await;
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

/// A page with one 280×200 button that changes text and colour on every click.
const PAGE: &str = "<!doctype html><html><head><style>body{margin:0}#b{position:absolute;\
left:100px;top:100px;width:280px;height:200px;font-size:32px;background:#ddd}\
#b.on{background:#3a7}</style></head><body><button id=b onclick=\"this.classList.toggle('on');\
this.textContent=this.classList.contains('on')?'on':'off'\">off</button></body></html>";

async fn page_server() -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}

async fn computer_steps(http: &reqwest::Client, url: &str) {
    let page = page_server().await;
    for format in ["png", "jpeg"] {
        let mut opens = Vec::new();
        let mut computer = String::new();
        for round in 0..6 {
            let started = Instant::now();
            let response = http
                .post(format!("{url}/v1/computers"))
                .json(&json!({"url": page, "display": "1024x640", "rules": [], "image_format": format}))
                .send()
                .await
                .expect("open");
            if response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE {
                println!(
                    "computer steps: skipped ({})",
                    response.text().await.unwrap_or_default()
                );
                return;
            }
            assert_eq!(response.status(), reqwest::StatusCode::CREATED);
            let created: Value = response.json().await.expect("json");
            if round > 0 {
                // The first open starts Chromium.
                opens.push(started.elapsed());
            }
            if !computer.is_empty() {
                let _ = http
                    .delete(format!("{url}/v1/computers/{computer}"))
                    .send()
                    .await;
            }
            computer = created["id"].as_str().expect("id").to_owned();
        }
        // The button's centre, (240, 200) CSS px, in the 1024x640 display: (192, 160).
        let click = json!({"actions": [{"action": "left_click", "coordinate": [192, 160]}]});
        let mut samples = Vec::new();
        let mut engine_ms = Vec::new();
        for round in 0..220 {
            let started = Instant::now();
            let step: Value = http
                .post(format!("{url}/v1/computers/{computer}/actions"))
                .json(&click)
                .send()
                .await
                .expect("step")
                .json()
                .await
                .expect("json");
            let elapsed = started.elapsed();
            assert_eq!(step["status"], "ok", "{step}");
            assert!(
                step["screenshot"]["data"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty())
            );
            if round >= 20 {
                samples.push(elapsed);
                engine_ms.push(Duration::from_secs_f64(
                    step["timings_ms"]["total"].as_f64().unwrap_or(0.0) / 1000.0,
                ));
            }
        }
        let _ = http
            .delete(format!("{url}/v1/computers/{computer}"))
            .send()
            .await;
        let s = summarize(&mut samples);
        let engine = summarize(&mut engine_ms);
        let open = summarize(&mut opens);
        println!(
            "computer step over HTTP ({format}): POST actions left_click → step JSON: p50 {}  p99 {}  \
             (engine's own total p50 {}; n={}); POST /v1/computers → 201 p50 {} (n={})",
            fmt(s.p50),
            fmt(s.p99),
            fmt(engine.p50),
            s.count,
            fmt(open.p50),
            open.count
        );
    }
}

/// Steps per second of one session stepping alone, then of 8 sessions stepping at once
/// (each its own HTTP client loop), over HTTP with JPEG screenshots. Target: 8 sessions
/// ≥ 1.7× one session's rate on 2 cores.
async fn computer_concurrency(http: &reqwest::Client, url: &str) {
    const SESSIONS: usize = 8;
    const STEPS: usize = 60;
    let page = page_server().await;
    let mut ids = Vec::new();
    for _ in 0..SESSIONS {
        let response = http
            .post(format!("{url}/v1/computers"))
            .json(&json!({"url": page, "display": "1024x640", "rules": [], "image_format": "jpeg"}))
            .send()
            .await
            .expect("open");
        if response.status() != reqwest::StatusCode::CREATED {
            println!("computer concurrency: skipped ({})", response.status());
            return;
        }
        let created: Value = response.json().await.expect("json");
        ids.push(created["id"].as_str().expect("id").to_owned());
    }
    let click = json!({"actions": [{"action": "left_click", "coordinate": [192, 160]}]});
    let run = |id: String, steps: usize| {
        let http = http.clone();
        let url = url.to_owned();
        let click = click.clone();
        async move {
            for _ in 0..steps {
                let step: Value = http
                    .post(format!("{url}/v1/computers/{id}/actions"))
                    .json(&click)
                    .send()
                    .await
                    .expect("step")
                    .json()
                    .await
                    .expect("json");
                assert_eq!(step["status"], "ok", "{step}");
            }
        }
    };
    // Warm every session up.
    let warm: Vec<_> = ids
        .iter()
        .map(|id| tokio::spawn(run(id.clone(), 5)))
        .collect();
    for task in warm {
        task.await.expect("warm-up");
    }
    let started = Instant::now();
    run(ids[0].clone(), STEPS * 2).await;
    let one = (STEPS * 2) as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| tokio::spawn(run(id.clone(), STEPS)))
        .collect();
    for task in tasks {
        task.await.expect("session");
    }
    let many = (SESSIONS * STEPS) as f64 / started.elapsed().as_secs_f64();
    println!(
        "computer sessions stepping at once (jpeg, click + settle + capture over HTTP): 1 session \
         {one:.1} steps/s; {SESSIONS} sessions {many:.1} steps/s in all = {:.2}x (target >= 1.7 on 2 cores)",
        many / one
    );
    for id in ids {
        let _ = http.delete(format!("{url}/v1/computers/{id}")).send().await;
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sandbox = Sandbox::new(
            SandboxConfig::default()
                .preload(vec![Language::PythonLite])
                .max_instances(512),
        )
        .await
        .expect("sandbox");
        let trajectories = tempfile::tempdir().expect("tempdir");
        let (url, stop) = start_http(sandbox.clone(), trajectories.path()).await;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build()
            .expect("client");
        computer_steps(&http, &url).await;
        computer_concurrency(&http, &url).await;
        // Chromium stops now, not when the process exits (it would outlive it).
        stop.shutdown().await;
        if std::env::var_os("BENCH_COMPUTER_ONLY").is_some() {
            return;
        }
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
