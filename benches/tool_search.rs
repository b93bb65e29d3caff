//! Tool search benchmarks. Run with `cargo bench -p cordon-benches --bench tool_search`;
//! numbers go to docs/benchmarks.md ("Tool search").
//!
//! One client request through the gateway (in process, a recorded script as the model, no
//! HTTP) in which the model searches once and then answers: two model rounds. The request
//! declares a search (regex or BM25) and N deferred tools with a description and three
//! described parameters each; the baseline is the same request with no deferred tool, so
//! the difference is what reading, searching and loading N tools costs.

#![allow(
    clippy::expect_used,
    reason = "a benchmark that cannot set up should stop"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cordon_benches::{Summary, fmt, summarize};
use cordon_gateway::script::ScriptUpstream;
use cordon_gateway::{Gateway, GatewayOptions, MessagesCall};
use serde_json::{Value, json};

const WARMUP: usize = 20;
const SAMPLES: usize = 200;

fn deferred_tools(count: usize) -> Vec<Value> {
    (0..count)
        .map(|n| {
            json!({"name": format!("tool_{n}_service_action"),
                   "description": format!("Does action number {n} of the service: reads records, updates them and reports back"),
                   "input_schema": {"type": "object", "properties": {
                       "record_id": {"type": "string", "description": "The record to act on"},
                       "limit": {"type": "integer", "description": "How many at most"},
                       "filter": {"type": "string", "description": "Which records match"}}},
                   "defer_loading": true})
        })
        .collect()
}

fn measure(runtime: &tokio::runtime::Runtime, kind: &str, query: &str, count: usize) -> Summary {
    let (search_type, name) = if kind == "regex" {
        ("tool_search_tool_regex_20251119", "tool_search_tool_regex")
    } else {
        ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25")
    };
    let script = format!(
        "{}\n{}\n",
        json!({"content": [{"type": "tool_use", "id": "toolu_s", "name": name, "input": {"query": query}}]}),
        json!({"content": [{"type": "text", "text": "done"}]})
    );
    let upstream = ScriptUpstream::parse(&script, "bench").expect("a valid script");
    let gateway = Gateway::new(Arc::new(upstream), GatewayOptions::default());
    let mut tools = vec![json!({"type": search_type, "name": name})];
    tools.extend(deferred_tools(count));
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools,
                      "messages": [{"role": "user", "content": "Act on record 7"}]});
    let mut samples: Vec<Duration> = Vec::with_capacity(SAMPLES);
    for n in 0..WARMUP + SAMPLES {
        let started = Instant::now();
        let reply = runtime.block_on(gateway.messages(MessagesCall::new(body.clone())));
        let took = started.elapsed();
        assert_eq!(reply.status, 200, "{}", reply.body);
        if n >= WARMUP {
            samples.push(took);
        }
    }
    summarize(&mut samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!("| search | deferred tools | request p50 / p99 |");
    println!("|---|---|---|");
    for (kind, query) in [
        ("regex", "(?i)tool_12[0-9]_service"),
        ("bm25", "update the records of action 123"),
    ] {
        for count in [0, 100, 1000] {
            let s = measure(&runtime, kind, query, count);
            println!(
                "| {kind} `{query}` | {count} | {} / {} |",
                fmt(s.p50),
                fmt(s.p99)
            );
        }
    }
}
