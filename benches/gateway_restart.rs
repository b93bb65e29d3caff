//! What keeping the gateway's containers at rest costs. Run with
//! `cargo bench -p cordon-benches --bench gateway_restart`; numbers go to
//! docs/benchmarks.md ("Gateway containers at rest").
//!
//! The gateway runs in this process against a recorded model (`ScriptUpstream`: a code
//! call, then a text), so a request is the gateway's work plus one program in the sandbox
//! (CPython). Each request names the same container, whose session holds a pandas
//! DataFrame of 10,000 rows (the state a data-analysis conversation keeps).
//!
//! 1. Per request, without a store (the container stays live) and with one
//!    (`MemoryGatewayStore`: the container is paused into it when the request ends and
//!    resumed by the next program): the difference is what durability costs a request.
//! 2. The first request after a restart (a new gateway on the same store), which brings
//!    the container back, against a request on a live container.
//! 3. The paused session's size in the store.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_benches::{fmt, summarize};
use cordon_gateway::script::ScriptUpstream;
use cordon_gateway::{Gateway, GatewayOptions, GatewayStore, MemoryGatewayStore, MessagesCall};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

const SAMPLES: usize = 40;
const RESTARTS: usize = 15;

/// Sets the DataFrame up in a new container, then counts the requests.
const CODE: &str = "try:\n    counter += 1\nexcept NameError:\n    import pandas as pd\n    df = pd.DataFrame({'a': range(10000), 'b': [i * 0.5 for i in range(10000)], 'c': [str(i) for i in range(10000)]})\n    counter = 0\nprint(counter, len(df))";

fn script(code: &str) -> Arc<ScriptUpstream> {
    let call = json!({"content": [{"type": "tool_use", "id": "toolu_code", "name": "code_execution", "input": {"code": code}}]});
    let text = json!({"content": [{"type": "text", "text": "done"}]});
    Arc::new(ScriptUpstream::parse(&format!("{call}\n{text}\n"), "bench").expect("a script"))
}

fn gateway(sandbox: &Sandbox, store: Option<&Arc<MemoryGatewayStore>>) -> Gateway {
    let options = GatewayOptions::default().code_language(Language::Python);
    let gateway = Gateway::new(script(CODE), options).with_sandbox(sandbox.clone());
    match store {
        Some(store) => gateway.with_store(store.clone() as Arc<dyn GatewayStore>),
        None => gateway,
    }
}

async fn ask(gateway: &Gateway, container: Option<&str>) -> (Duration, String) {
    let mut body = json!({"model": "m", "max_tokens": 100,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"type": "code_execution_20250825", "name": "code_execution"}]});
    if let Some(id) = container {
        body["container"] = json!(id);
    }
    let started = Instant::now();
    let reply = gateway.messages(MessagesCall::new(body)).await;
    let took = started.elapsed();
    assert_eq!(reply.status, 200, "{}", reply.body);
    let shown = reply.body["content"][1]["content"].clone();
    assert_eq!(shown["return_code"], 0, "{shown}");
    let id = reply.body["container"]["id"]
        .as_str()
        .expect("a container")
        .to_owned();
    (took, id)
}

async fn per_request(sandbox: &Sandbox, store: Option<&Arc<MemoryGatewayStore>>) -> Vec<Duration> {
    let gateway = gateway(sandbox, store);
    let (_, container) = ask(&gateway, None).await;
    let _ = ask(&gateway, Some(&container)).await;
    let mut samples = Vec::new();
    for _ in 0..SAMPLES {
        samples.push(ask(&gateway, Some(&container)).await.0);
    }
    samples
}

fn line(name: &str, samples: &mut [Duration]) {
    let s = summarize(samples);
    println!(
        "{name:<58} p50 {:>9}  p99 {:>9}  mean {:>9}  (n = {})",
        fmt(s.p50),
        fmt(s.p99),
        fmt(s.mean),
        s.count
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let config = SandboxConfig::default()
        .preload(vec![Language::Python])
        .max_instances(8);
    let sandbox = Sandbox::new(config).await.expect("the sandbox starts");

    let mut live = per_request(&sandbox, None).await;
    let store = Arc::new(MemoryGatewayStore::default());
    let mut rested = per_request(&sandbox, Some(&store)).await;
    let p50 = |s: &mut [Duration]| summarize(s).p50;
    println!("Gateway containers at rest (CPython, a 10,000-row pandas DataFrame in the session)");
    line("request on a live container (no store)", &mut live);
    line(
        "request, container paused at its end, resumed by the next",
        &mut rested,
    );
    println!(
        "{:<58} p50 {:>9}",
        "  what keeping it at rest adds per request",
        fmt(p50(&mut rested).saturating_sub(p50(&mut live)))
    );

    // A restart: each sample is the first request of a new gateway on the store.
    let mut first = Vec::new();
    for _ in 0..RESTARTS {
        let store = Arc::new(MemoryGatewayStore::default());
        let (_, container) = ask(&gateway(&sandbox, Some(&store)), None).await;
        let after = gateway(&sandbox, Some(&store));
        first.push(ask(&after, Some(&container)).await.0);
        let bytes: usize = store
            .blob_keys()
            .iter()
            .filter_map(|key| {
                futures::executor::block_on(store.get_blob(key))
                    .ok()
                    .flatten()
            })
            .map(|blob| blob.len())
            .sum();
        if first.len() == 1 {
            println!(
                "{:<58} {:.2} MiB",
                "paused session in the store",
                bytes as f64 / 1048576.0
            );
        }
    }
    line(
        "first request after a restart (container brought back)",
        &mut first,
    );
}
