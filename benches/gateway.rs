//! Gateway benchmarks. Run with `cargo bench -p cordon-benches --bench gateway`; numbers go
//! to docs/benchmarks.md.
//!
//! A stand-in model (an axum server in this process, on 127.0.0.1, answering
//! `POST /v1/messages` with a fixed turn, JSON or SSE) is the upstream; the gateway is
//! `cordon serve`'s HTTP API with `--upstream anthropic=<stand-in>`, in this process too,
//! so both hops are real loopback HTTP and nothing else runs.
//!
//! 1. Overhead per turn: `POST /v1/messages` through the gateway minus the same request
//!    sent to the stand-in directly (p50 and p99 of each), JSON and streamed.
//! 2. Client tool round trip: the model's `tool_use` back to the client, then the
//!    `tool_result` request to the final answer — one upstream call each.
//! 3. Programmatic tool calling: the model's `code_execution` runs in the sandbox and
//!    suspends on a client tool (response 1), the client's result resumes it and the
//!    program's output goes to the model (response 2). Against a direct model call each.
//! 4. Streaming, per client API × upstream API: the time to the first text piece through
//!    the gateway minus the same straight from the upstream (whose stream holds its rest a
//!    few milliseconds, so the first piece is what is timed), and the cost per event of a
//!    long stream (2,000 text pieces) through the gateway over the same stream direct.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::time::{Duration, Instant};

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt as _;
use cordon_benches::{Summary, fmt, summarize};
use cordon_gateway::{Api, HttpUpstream};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use cordon_server::http::GatewaySetup;
use cordon_server::{HttpApi, HttpOptions, Store};
use serde_json::{Value, json};

#[path = "gateway_streaming.rs"]
mod gateway_streaming;

const WARMUP: usize = 100;
const SAMPLES: usize = 1000;

/// The stand-in's turn for a request: a final text when the last user message carries a
/// tool result, else a call of `code_execution` (when offered) or of the client tool
/// `lookup` (when offered), else a text.
fn turn_for(request: &Value) -> Value {
    let last_has_result = request["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .and_then(|message| message["content"].as_array())
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    let offers = |name: &str| {
        request["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == name))
    };
    let (content, stop) = if last_has_result {
        (json!([{"type": "text", "text": "done"}]), "end_turn")
    } else if offers("code_execution") {
        (
            json!([{"type": "tool_use", "id": "toolu_bench_code", "name": "code_execution",
                    "input": {"code": "r = await lookup(k=1)\nprint(r)"}}]),
            "tool_use",
        )
    } else if offers("lookup") {
        (
            json!([{"type": "tool_use", "id": "toolu_bench_lookup", "name": "lookup",
                    "input": {"k": 1}}]),
            "tool_use",
        )
    } else {
        (
            json!([{"type": "text", "text": "Paris is the capital of France."}]),
            "end_turn",
        )
    };
    json!({
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "standin",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 8}
    })
}

/// The same turn as Anthropic's SSE sequence (text in two deltas, tool input in three).
fn sse_for(turn: &Value) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut start = turn.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    for (index, block) in turn["content"].as_array().into_iter().flatten().enumerate() {
        if block["type"] == "text" {
            let text = block["text"].as_str().unwrap_or_default();
            let half = text.len() / 2;
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "text", "text": ""}}),
            );
            for piece in [&text[..half], &text[half..]] {
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": piece}}),
                );
            }
        } else {
            let mut head = block.clone();
            head["input"] = json!({});
            event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": head}),
            );
            let input = block["input"].to_string();
            let third = input.len() / 3;
            for piece in [
                &input[..third],
                &input[third..2 * third],
                &input[2 * third..],
            ] {
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}),
                );
            }
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta",
               "delta": {"stop_reason": turn["stop_reason"], "stop_sequence": null},
               "usage": {"output_tokens": 8}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

async fn messages(Json(request): Json<Value>) -> Response {
    let turn = turn_for(&request);
    if request["stream"] == true {
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            Body::from(sse_for(&turn)),
        )
            .into_response()
    } else {
        Json(turn).into_response()
    }
}

/// Starts the stand-in model; returns its base URL.
async fn standin() -> String {
    let app = axum::Router::new().route("/v1/messages", axum::routing::post(messages));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    // Without TCP_NODELAY a small response can wait for the client's delayed ACK.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service()).await;
    });
    url
}

struct Reply {
    body: Value,
    container: Option<String>,
}

/// One `POST /v1/messages`; a streamed request is read to its end and its final
/// `message_delta` checked.
async fn post(http: &reqwest::Client, base: &str, body: &Value) -> Reply {
    let response = http
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", "bench")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .expect("send");
    assert!(
        response.status().is_success(),
        "{} {}",
        response.status(),
        response.text().await.unwrap_or_default()
    );
    if body["stream"] == true {
        let text = response.text().await.expect("stream");
        assert!(text.contains("event: message_stop"), "{text}");
        return Reply {
            body: Value::Null,
            container: None,
        };
    }
    let body: Value = response.json().await.expect("json");
    let container = body["container"]["id"].as_str().map(str::to_owned);
    Reply { body, container }
}

async fn measure<F, Fut>(mut one: F) -> Summary
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Duration>,
{
    for _ in 0..WARMUP {
        one().await;
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        samples.push(one().await);
    }
    summarize(&mut samples)
}

async fn timed(http: &reqwest::Client, base: &str, body: &Value) -> Duration {
    let started = Instant::now();
    post(http, base, body).await;
    started.elapsed()
}

fn line(what: &str, direct: &Summary, gateway: &Summary) {
    let added = |a: Duration, b: Duration| {
        if a >= b {
            fmt(a - b)
        } else {
            format!("-{}", fmt(b - a))
        }
    };
    println!(
        "{what}: direct p50 {} p99 {} | gateway p50 {} p99 {} | added p50 {} p99 {} (n={})",
        fmt(direct.p50),
        fmt(direct.p99),
        fmt(gateway.p50),
        fmt(gateway.p99),
        added(gateway.p50, direct.p50),
        added(gateway.p99, direct.p99),
        gateway.count
    );
}

async fn per_turn(http: &reqwest::Client, upstream: &str, gateway: &str) {
    for stream in [false, true] {
        let body = json!({"model": "standin", "max_tokens": 64, "stream": stream,
                          "messages": [{"role": "user", "content": "Capital of France?"}]});
        let direct = measure(|| timed(http, upstream, &body)).await;
        let through = measure(|| timed(http, gateway, &body)).await;
        let what = if stream {
            "one turn, streamed (SSE both hops)"
        } else {
            "one turn, JSON"
        };
        line(what, &direct, &through);
    }
}

fn lookup_tool(callers: Option<&str>) -> Value {
    let mut tool = json!({"name": "lookup", "input_schema": {"type": "object",
                          "properties": {"k": {"type": "integer"}}}});
    if let Some(caller) = callers {
        tool["allowed_callers"] = json!([caller]);
    }
    tool
}

/// A client tool round trip and a PTC round trip, each as two requests.
async fn round_trips(http: &reqwest::Client, upstream: &str, gateway: &str) {
    let question = json!({"role": "user", "content": "Look it up."});
    let plain = json!({"model": "standin", "max_tokens": 64, "messages": [question]});
    let direct = measure(|| timed(http, upstream, &plain)).await;

    // Client tool: request 1 → tool_use; request 2 (tool_result) → final text.
    let tools = json!([lookup_tool(None)]);
    let first =
        json!({"model": "standin", "max_tokens": 64, "tools": tools, "messages": [question]});
    let call = post(http, gateway, &first).await.body;
    let second = json!({"model": "standin", "max_tokens": 64, "tools": tools, "messages": [
        question,
        {"role": "assistant", "content": call["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_bench_lookup", "content": "1"}]}
    ]});
    let ask = measure(|| timed(http, gateway, &first)).await;
    let answer = measure(|| timed(http, gateway, &second)).await;
    line("client tool, request 1 (→ tool_use)", &direct, &ask);
    line(
        "client tool, request 2 (tool_result → answer)",
        &direct,
        &answer,
    );

    // PTC: request 1 runs the program to its suspension; request 2 resumes it.
    let tools = json!([
        {"type": "code_execution_20250825", "name": "code_execution"},
        lookup_tool(Some("code_execution_20250825"))
    ]);
    // Every round after the first names the same container (one interpreter kept warm, as
    // a client continuing its work would): each container holds a sandbox instance until
    // it expires.
    let mut first =
        json!({"model": "standin", "max_tokens": 64, "tools": tools, "messages": [question]});
    let mut suspend = Vec::with_capacity(SAMPLES);
    let mut resume = Vec::with_capacity(SAMPLES);
    for round in 0..WARMUP + SAMPLES {
        let started = Instant::now();
        let reply = post(http, gateway, &first).await;
        let suspended = started.elapsed();
        let container = reply
            .container
            .expect("the program suspended in a container");
        first["container"] = json!(container);
        let content = reply.body["content"].clone();
        let results: Vec<Value> = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "tool_use")
            .map(|block| json!({"type": "tool_result", "tool_use_id": block["id"], "content": "7"}))
            .collect();
        assert_eq!(results.len(), 1, "{}", reply.body);
        let second = json!({"model": "standin", "max_tokens": 64, "tools": tools,
                            "container": container, "messages": [
            question,
            {"role": "assistant", "content": content},
            {"role": "user", "content": results}
        ]});
        let started = Instant::now();
        let done = post(http, gateway, &second).await;
        let resumed = started.elapsed();
        assert_eq!(done.body["stop_reason"], "end_turn", "{}", done.body);
        if round >= WARMUP {
            suspend.push(suspended);
            resume.push(resumed);
        }
    }
    line(
        "PTC, request 1 (model → code runs → suspends on the client tool)",
        &direct,
        &summarize(&mut suspend),
    );
    line(
        "PTC, request 2 (tool_result → resume → output to the model → answer)",
        &direct,
        &summarize(&mut resume),
    );
}

/// `cordon serve --upstream anthropic=<upstream>` in this process (in-memory store);
/// returns its base URL.
async fn start_gateway(sandbox: Sandbox, api: Api, upstream: &str) -> String {
    let model = HttpUpstream::new(api, upstream, Duration::from_secs(60)).expect("upstream client");
    let options = HttpOptions::default().gateway(Some(GatewaySetup::new(Arc::new(model))));
    let store = Store::in_memory().expect("in-memory store");
    let api = HttpApi::new(sandbox, store, options).await.expect("api");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(api.serve(listener, std::future::pending()));
    url
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
                .max_instances(64),
        )
        .await
        .expect("sandbox");
        let upstream = standin().await;
        let gateway = start_gateway(sandbox.clone(), Api::Anthropic, &upstream).await;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .expect("client");
        if std::env::args().all(|a| a != "--streaming-only") {
            per_turn(&http, &upstream, &gateway).await;
            round_trips(&http, &upstream, &gateway).await;
        }
        gateway_streaming::streaming(&http, |api, url| {
            let sandbox = sandbox.clone();
            async move { start_gateway(sandbox, api, &url).await }
        })
        .await;
    });
}
