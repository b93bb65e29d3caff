//! Pairing errors before anything runs; upstream errors in the client's format.

use std::time::Duration;

use cordon_gateway::{Api, Gateway, GatewayOptions, HttpUpstream};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{Answer, StandIn, gateway, request, send, weather_tools};

fn with_call(results: serde_json::Value) -> serde_json::Value {
    request(
        json!([
            {"role": "user", "content": "Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": results}
        ]),
        weather_tools(),
    )
}

#[tokio::test]
async fn unknown_and_missing_tool_use_ids_are_400_and_the_upstream_sees_nothing() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let unknown = send(
        &gw,
        with_call(json!([
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
            {"type": "tool_result", "tool_use_id": "toolu_zzz", "content": "x"}
        ])),
    )
    .await;
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.body["type"], "error");
    assert_eq!(unknown.body["error"]["type"], "invalid_request_error");
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolu_zzz")
    );
    let missing = send(&gw, with_call(json!([{"type": "text", "text": "hm"}]))).await;
    assert_eq!(missing.status, 400);
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("toolu_a")
    );
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn upstream_errors_keep_their_status_in_anthropic_shape() {
    let standin = StandIn::start().await;
    standin.push(Answer::Error(
        429,
        json!({"error": {"message": "slow down", "type": "rate_limit_exceeded"}}),
    ));
    standin.push(Answer::Error(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad model"}})));
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let body = request(json!([{"role": "user", "content": "hi"}]), json!([]));
    let reply = send(&gw, body.clone()).await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.body["error"]["type"], "rate_limit_error");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("slow down")
    );
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bad model")
    );
}

#[tokio::test]
async fn unreachable_is_502_and_timeout_is_504() {
    // A port nothing listens on: bind, note it, close.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let upstream = HttpUpstream::new(Api::Anthropic, &dead, Duration::from_secs(5)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let body = request(json!([{"role": "user", "content": "hi"}]), json!([]));
    let reply = send(&gw, body.clone()).await;
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "api_error");

    let standin = StandIn::start().await;
    standin.push(Answer::Slow(Duration::from_secs(3), json!({"content": []})));
    let upstream =
        HttpUpstream::new(Api::Anthropic, &standin.url, Duration::from_millis(300)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 504, "{}", reply.body);
}

#[tokio::test]
async fn https_upstreams_speak_tls_and_a_failed_handshake_is_502() {
    // A loopback listener that records the first bytes of what arrives, then hangs up: an
    // `https://` upstream must open with a TLS handshake record (0x16, version 3.x).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let first_bytes = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 2];
        socket.read_exact(&mut head).await.unwrap();
        head
    });
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(5)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = send(
        &gw,
        request(json!([{"role": "user", "content": "hi"}]), json!([])),
    )
    .await;
    assert_eq!(
        first_bytes.await.unwrap(),
        [0x16, 0x03],
        "a TLS ClientHello"
    );
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "api_error");
}

/// A loopback server answering every request with `status` and `headers`, counting them and
/// keeping the `x-api-key` each carried.
async fn fixed_answer(
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keys = seen.clone();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let keys = keys.clone();
        let headers = headers.clone();
        let body = body.clone();
        async move {
            let key = request
                .headers()
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            keys.lock().unwrap().push(key);
            let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

#[tokio::test]
async fn redirects_are_not_followed_so_the_key_stays_with_the_upstream() {
    let (elsewhere, elsewhere_keys) = fixed_answer(200, vec![], b"{}".to_vec()).await;
    let (url, keys) = fixed_answer(
        307,
        vec![("location", format!("{elsewhere}/v1/messages"))],
        Vec::new(),
    )
    .await;
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(5))
        .unwrap()
        .with_key(Some(cordon_gateway::Credential("sk-operator".into())));
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = send(
        &gw,
        request(json!([{"role": "user", "content": "hi"}]), json!([])),
    )
    .await;
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("redirect"),
        "{}",
        reply.body
    );
    assert_eq!(*keys.lock().unwrap(), [Some("sk-operator".to_owned())]);
    assert!(
        elsewhere_keys.lock().unwrap().is_empty(),
        "nothing reached the redirect's target"
    );
}

#[tokio::test]
async fn a_refused_operator_key_is_the_servers_fault_not_the_clients() {
    let body = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
    let (url, _) = fixed_answer(
        401,
        vec![("content-type", "application/json".to_owned())],
        body.to_string().into_bytes(),
    )
    .await;
    let hi = request(json!([{"role": "user", "content": "hi"}]), json!([]));
    // The operator's key: 502, telling the operator what to check.
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(5))
        .unwrap()
        .with_key(Some(cordon_gateway::Credential("sk-operator".into())));
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = send(&gw, hi.clone()).await;
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "api_error");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--upstream-key-env")
    );
    // The client's own key: its 401 to fix.
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(5)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = gw
        .messages(
            cordon_gateway::MessagesCall::new(hi)
                .credential(Some(cordon_gateway::Credential("sk-client".into()))),
        )
        .await;
    assert_eq!(reply.status, 401, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "authentication_error");
}

#[tokio::test]
async fn an_answer_past_the_size_cap_is_refused_not_held() {
    let huge = vec![b' '; cordon_gateway::upstream::MAX_ANSWER_BYTES + 1];
    let (url, _) = fixed_answer(
        200,
        vec![("content-type", "application/json".to_owned())],
        huge,
    )
    .await;
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(30)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let reply = send(
        &gw,
        request(json!([{"role": "user", "content": "hi"}]), json!([])),
    )
    .await;
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than")
    );
}

#[test]
fn upstream_urls_are_shown_without_their_secrets() {
    let upstream = HttpUpstream::new(
        Api::OpenaiChat,
        "https://user:hunter2@models.example/v1?key=sk-secret#frag",
        Duration::from_secs(5),
    )
    .unwrap();
    let shown = cordon_gateway::Upstream::describe(&upstream);
    assert!(
        !shown.contains("hunter2") && !shown.contains("sk-secret"),
        "{shown}"
    );
    assert!(
        shown.starts_with("openai-chat=https://models.example/v1"),
        "{shown}"
    );
    assert_eq!(
        cordon_gateway::upstream::redacted("http://127.0.0.1:9/v1"),
        "http://127.0.0.1:9/v1"
    );
}

/// A loopback upstream answering each request, whatever its path, with the next of
/// `answers` (content type, body).
async fn scripted_answers(answers: Vec<(&'static str, String)>) -> String {
    use axum::response::IntoResponse;
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        answers,
    )));
    let app = axum::Router::new().fallback(move || {
        let next = queue.lock().unwrap().pop_front();
        async move {
            let (content_type, body) = next.expect("an answer queued for every request");
            ([("content-type", content_type)], body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// Stream events as an SSE body (Chat chunks have no `event:` line).
fn sse(events: &[(String, serde_json::Value)]) -> String {
    let mut text = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            text.push_str(&format!("event: {name}\n"));
        }
        match data {
            serde_json::Value::String(s) => text.push_str(&format!("data: {s}\n\n")),
            other => text.push_str(&format!("data: {other}\n\n")),
        }
    }
    text
}

/// Each API's stream naming a block at index 2e9: the accumulators once grew a vector to
/// that size, and the allocation failure aborted the whole process.
fn hostile_stream(api: Api) -> Vec<(String, serde_json::Value)> {
    let huge = 2_000_000_000u64;
    let event = |name: &str, data: serde_json::Value| (name.to_owned(), data);
    match api {
        Api::Anthropic => vec![
            event(
                "message_start",
                json!({"type": "message_start", "message": {
                "id": "msg_h", "type": "message", "role": "assistant", "model": "m",
                "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}}),
            ),
            event(
                "content_block_start",
                json!({"type": "content_block_start",
                "index": huge, "content_block": {"type": "text", "text": ""}}),
            ),
            event("message_stop", json!({"type": "message_stop"})),
        ],
        Api::OpenaiChat => vec![
            event(
                "",
                json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
                "model": "m", "choices": [{"index": 0, "finish_reason": null, "delta": {
                    "tool_calls": [{"index": huge, "id": "call_h", "type": "function",
                                    "function": {"name": "get_weather", "arguments": "{}"}}]}}]}),
            ),
            event("", json!("[DONE]")),
        ],
        _ => vec![
            event(
                "response.function_call_arguments.delta",
                json!({
                "type": "response.function_call_arguments.delta", "sequence_number": 0,
                "item_id": "fc_h", "output_index": huge, "delta": "{}"}),
            ),
            event(
                "response.completed",
                json!({"type": "response.completed",
                "response": {"id": "r", "object": "response", "status": "completed", "output": []}}),
            ),
        ],
    }
}

#[tokio::test]
async fn a_hostile_stream_index_fails_its_request_and_the_gateway_keeps_serving() {
    use cordon_protocol::conversation::{anthropic, stream};
    let fine = anthropic::decode_response(&json!({
        "id": "msg_ok", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "still serving"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 2}
    }))
    .unwrap();
    for api in [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses] {
        let normal = match api {
            Api::Anthropic => stream::anthropic_events(&fine),
            Api::OpenaiChat => stream::chat_events(&fine),
            _ => stream::responses_events(&fine),
        };
        let url = scripted_answers(vec![
            ("text/event-stream", sse(&hostile_stream(api))),
            ("text/event-stream", sse(&normal)),
        ])
        .await;
        let upstream = HttpUpstream::new(api, &url, Duration::from_secs(10)).unwrap();
        let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
        let mut body = request(json!([{"role": "user", "content": "hi"}]), weather_tools());
        body["stream"] = json!(true);

        let reply = send(&gw, body.clone()).await;
        assert_eq!(reply.status, 502, "{api:?}: {}", reply.body);
        assert_eq!(reply.body["error"]["type"], "api_error");
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not valid") && message.contains("2000000000"),
            "{api:?}: {message}"
        );

        let reply = send(&gw, body).await;
        assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
        assert_eq!(reply.body["content"][0]["text"], "still serving");
    }
}

#[tokio::test]
async fn a_stream_to_a_request_that_asked_for_none_is_refused() {
    use cordon_protocol::conversation::{anthropic, stream};
    let turn = anthropic::decode_response(&json!({
        "id": "msg_s", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "streamed anyway"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 2}
    }))
    .unwrap();
    let url = scripted_answers(vec![
        ("text/event-stream", sse(&stream::anthropic_events(&turn))),
        (
            "application/json",
            anthropic::encode_response(&turn).to_string(),
        ),
    ])
    .await;
    let upstream = HttpUpstream::new(Api::Anthropic, &url, Duration::from_secs(10)).unwrap();
    let gw = Gateway::new(std::sync::Arc::new(upstream), GatewayOptions::default());
    let body = request(json!([{"role": "user", "content": "hi"}]), json!([]));
    let reply = send(&gw, body.clone()).await;
    assert_eq!(reply.status, 502, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("asked for none"),
        "{}",
        reply.body
    );
    // The JSON it should have sent is taken as usual.
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "streamed anyway");
}
