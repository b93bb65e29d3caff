//! The streaming part of the gateway benchmark: a stand-in streaming in each API, one
//! gateway per upstream API, each client API through each.

use std::convert::Infallible;
use std::future::Future;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use cordon_benches::{Summary, fmt, summarize};
use cordon_gateway::Api;
use cordon_protocol::conversation::stream::{
    Event, anthropic_events, chat_events, responses_events,
};
use cordon_protocol::conversation::{ContentBlock, Extra, StopReason, Turn, Usage, Vendor};
use serde_json::{Value, json};

const WARMUP: usize = 30;
const SAMPLES: usize = 300;
/// How long the stand-in holds the rest of its stream after the first text piece.
const REST_DELAY: Duration = Duration::from_millis(3);
/// Text pieces of the long stream (per-event cost).
const PIECES: usize = 2000;
/// What the first text piece holds, found in the client's bytes.
const MARKER: &str = "Paris";

const APIS: [Api; 3] = [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses];

fn turn() -> Turn {
    Turn {
        origin: Some(Vendor::Anthropic),
        id: "msg_bench".into(),
        model: "standin".into(),
        content: vec![ContentBlock::text("Paris is the capital of France.")],
        stop_reason: Some(StopReason::EndTurn),
        stop_sequence: None,
        usage: Usage {
            input_tokens: 12,
            output_tokens: 8,
            ..Usage::default()
        },
        container: None,
        extra: Extra::new(),
    }
}

fn sse(events: &[Event]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str(&format!("event: {name}\n"));
        }
        match data {
            Value::String(raw) => out.push_str(&format!("data: {raw}\n\n")),
            other => out.push_str(&format!("data: {other}\n\n")),
        }
    }
    out
}

/// The stream of `api`: up to the first text piece now, the rest after [`REST_DELAY`].
fn short_stream(api: Api) -> (String, String) {
    let turn = turn();
    let events = match api {
        Api::Anthropic => anthropic_events(&turn),
        Api::OpenaiChat => chat_events(&turn),
        _ => responses_events(&turn),
    };
    let first = events
        .iter()
        .position(|(_, data)| data.to_string().contains(MARKER))
        .expect("a text piece");
    (sse(&events[..=first]), sse(&events[first + 1..]))
}

/// An Anthropic stream of [`PIECES`] text pieces, sent at once.
fn long_stream() -> String {
    let mut events: Vec<Event> = vec![
        (
            "message_start".into(),
            json!({"type": "message_start", "message": {
            "id": "msg_long", "type": "message", "role": "assistant", "model": "standin",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        (
            "content_block_start".into(),
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for n in 0..PIECES {
        events.push((
            "content_block_delta".into(),
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": format!("word{n} ")}}),
        ));
    }
    events.push((
        "content_block_stop".into(),
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta".into(),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
               "stop_sequence": null}, "usage": {"output_tokens": PIECES}}),
    ));
    events.push(("message_stop".into(), json!({"type": "message_stop"})));
    sse(&events)
}

async fn answer(api: Api, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let body = if request["model"] == "long" {
        Body::from(long_stream())
    } else {
        let (first, rest) = short_stream(api);
        // The first piece now; the rest after a pause.
        let chunks = futures::stream::iter([(first, false), (rest, true)]);
        let paced = futures::StreamExt::then(chunks, |(text, wait)| async move {
            if wait {
                tokio::time::sleep(REST_DELAY).await;
            }
            Ok::<_, Infallible>(Bytes::from(text))
        });
        Body::from_stream(paced)
    };
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// The streaming stand-in: `/v1/messages`, `/chat/completions`, `/responses`.
async fn standin() -> String {
    let route = |api: Api| axum::routing::post(move |body: Bytes| answer(api, body));
    let app = axum::Router::new()
        .route("/v1/messages", route(Api::Anthropic))
        .route("/chat/completions", route(Api::OpenaiChat))
        .route("/responses", route(Api::OpenaiResponses));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app.into_make_service()).await;
    });
    url
}

/// Where a client of `api` posts (`base` the server's root) and what it sends.
fn client_request(api: Api, base: &str, direct: bool, model: &str) -> (String, Value) {
    let question = "Capital of France?";
    match api {
        Api::Anthropic => (
            format!("{base}/v1/messages"),
            json!({"model": model, "max_tokens": 64, "stream": true,
                   "messages": [{"role": "user", "content": question}]}),
        ),
        Api::OpenaiChat => (
            format!("{base}{}/chat/completions", if direct { "" } else { "/v1" }),
            json!({"model": model, "stream": true,
                   "messages": [{"role": "user", "content": question}]}),
        ),
        _ => (
            format!("{base}{}/responses", if direct { "" } else { "/v1" }),
            json!({"model": model, "stream": true, "input": question}),
        ),
    }
}

/// Time to the first text piece, and to the end of the stream.
async fn first_piece(http: &reqwest::Client, url: &str, body: &Value) -> (Duration, Duration) {
    let started = Instant::now();
    let mut response = http
        .post(url)
        .header("x-api-key", "bench")
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .expect("send");
    assert!(response.status().is_success(), "{}", response.status());
    let mut seen = Vec::new();
    let mut first = None;
    while let Some(chunk) = response.chunk().await.expect("chunk") {
        // Only the new bytes (and a marker's length before them) are searched: searching
        // all that came would make a stream of many small chunks quadratic to read.
        let from = seen.len().saturating_sub(MARKER.len());
        seen.extend_from_slice(&chunk);
        if first.is_none()
            && seen[from..]
                .windows(MARKER.len())
                .any(|w| w == MARKER.as_bytes())
        {
            first = Some(started.elapsed());
        }
    }
    (
        first.unwrap_or_else(|| started.elapsed()),
        started.elapsed(),
    )
}

async fn sample<F, Fut>(mut one: F) -> Summary
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Duration>,
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

fn added(gateway: Duration, direct: Duration) -> String {
    if gateway >= direct {
        fmt(gateway - direct)
    } else {
        format!("-{}", fmt(direct - gateway))
    }
}

/// Time to first text piece per client × upstream pair, and cost per event.
pub async fn streaming<F, Fut>(http: &reqwest::Client, start_gateway: F)
where
    F: Fn(Api, String) -> Fut,
    Fut: Future<Output = String>,
{
    let upstream = standin().await;
    for upstream_api in APIS {
        let gateway = start_gateway(upstream_api, upstream.clone()).await;
        let (url, body) = client_request(upstream_api, &upstream, true, "standin");
        let direct = sample(|| async { first_piece(http, &url, &body).await.0 }).await;
        for client_api in APIS {
            let (url, body) = client_request(client_api, &gateway, false, "standin");
            let through = sample(|| async { first_piece(http, &url, &body).await.0 }).await;
            println!(
                "first text piece, {} client ← {} upstream: direct p50 {} p99 {} | gateway p50 \
                 {} p99 {} | added p50 {} p99 {} (n={})",
                client_api.as_str(),
                upstream_api.as_str(),
                fmt(direct.p50),
                fmt(direct.p99),
                fmt(through.p50),
                fmt(through.p99),
                added(through.p50, direct.p50),
                added(through.p99, direct.p99),
                through.count
            );
        }
        if upstream_api == Api::Anthropic {
            let (url, body) = client_request(Api::Anthropic, &upstream, true, "long");
            let direct = sample(|| async { first_piece(http, &url, &body).await.1 }).await;
            for client_api in APIS {
                let (url, body) = client_request(client_api, &gateway, false, "long");
                let through = sample(|| async { first_piece(http, &url, &body).await.1 }).await;
                let per_event = |g: Duration, d: Duration| {
                    g.saturating_sub(d) / u32::try_from(PIECES).unwrap_or(u32::MAX)
                };
                println!(
                    "{PIECES} text pieces, {} client ← anthropic upstream: direct p50 {} | \
                     gateway p50 {} | per event p50 {} p99 {} (n={})",
                    client_api.as_str(),
                    fmt(direct.p50),
                    fmt(through.p50),
                    fmt(per_event(through.p50, direct.p50)),
                    fmt(per_event(through.p99, direct.p99)),
                    through.count
                );
            }
        }
    }
}
