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
