//! An Anthropic client reaches every upstream API, streamed and not.

use cordon_gateway::{Api, GatewayOptions};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{StandIn, gateway, request, send, weather_tools};

async fn round_trip(api: Api, stream: bool) {
    let standin = StandIn::start().await;
    standin.turn(json!([
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Rome"}},
        {"type": "tool_use", "id": "call_2", "name": "get_time", "input": {"city": "Rome"}}
    ]));
    standin.turn(json!([{"type": "text", "text": "Sunny."}]));
    let (gw, _) = gateway(&standin, api, GatewayOptions::default());
    let question = json!({"role": "user", "content": "Rome?"});
    let mut body = request(json!([question]), weather_tools());
    body["stream"] = json!(stream);
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{api:?} stream={stream}: {}", reply.body);
    assert_eq!(reply.body["stop_reason"], "tool_use");
    let content = reply.body["content"].as_array().unwrap().clone();
    let calls: Vec<_> = content.iter().filter(|b| b["type"] == "tool_use").collect();
    assert_eq!(calls.len(), 2, "{api:?} stream={stream}: {content:?}");
    assert_eq!(calls[0]["input"], json!({"city": "Rome"}));
    assert_eq!(calls[1]["id"], "call_2");

    let answer = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "sun"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "noon", "is_error": true}
    ]});
    let mut body = request(
        json!([question, {"role": "assistant", "content": content}, answer]),
        weather_tools(),
    );
    body["stream"] = json!(stream);
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Sunny.");
    let sent = standin.bodies()[1].to_string();
    assert!(sent.contains("call_1") && sent.contains("sun"), "{sent}");
    assert_eq!(
        standin.bodies()[1]["stream"],
        json!(if stream { Some(true) } else { None })
    );
}

#[tokio::test]
async fn anthropic_upstream() {
    round_trip(Api::Anthropic, false).await;
    round_trip(Api::Anthropic, true).await;
}

#[tokio::test]
async fn openai_chat_upstream() {
    round_trip(Api::OpenaiChat, false).await;
    round_trip(Api::OpenaiChat, true).await;
}

#[tokio::test]
async fn openai_responses_upstream() {
    round_trip(Api::OpenaiResponses, false).await;
    round_trip(Api::OpenaiResponses, true).await;
}

#[tokio::test]
async fn reasoning_the_client_cannot_carry_goes_back_to_its_upstream_beside_the_calls() {
    use cordon_protocol::conversation::{ContentBlock, Extra, ToolCall, Vendor, responses};
    let standin = StandIn::start().await;
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                           "encrypted_content": "opaque-state"});
    let mut turn = responses::decode_response(&json!({
        "id": "resp_up", "object": "response", "model": "m", "status": "completed",
        "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}
    }))
    .unwrap();
    turn.content = vec![
        ContentBlock::Reasoning {
            vendor: Vendor::OpenaiResponses,
            data: reasoning.clone(),
        },
        ContentBlock::ToolCall(ToolCall {
            id: "call_r".into(),
            name: "get_weather".into(),
            input: json!({"city": "Rome"}),
            caller: None,
            extra: Extra::new(),
        }),
    ];
    standin.push(crate::common::Answer::Native(Box::new(turn)));
    standin.turn(json!([{"type": "text", "text": "Sunny."}]));
    let (gw, _) = gateway(&standin, Api::OpenaiResponses, GatewayOptions::default());
    let question = json!({"role": "user", "content": "Rome?"});
    let reply = send(&gw, request(json!([question]), weather_tools())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The Anthropic client sees the call only: it has no place for OpenAI reasoning.
    let content = reply.body["content"].clone();
    assert_eq!(content.as_array().unwrap().len(), 1, "{content}");
    let answer = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_r", "content": "sunny"}
    ]});
    let reply = send(
        &gw,
        request(
            json!([question, {"role": "assistant", "content": content}, answer]),
            weather_tools(),
        ),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let input = standin.bodies()[1]["input"].as_array().unwrap().clone();
    let kinds: Vec<&str> = input
        .iter()
        .map(|item| item["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "reasoning",
            "function_call",
            "function_call_output"
        ],
        "{input:?}"
    );
    assert_eq!(input[1], reasoning);
}

fn web_search_tools() -> serde_json::Value {
    let mut tools = weather_tools();
    tools
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2}));
    tools
}

#[tokio::test]
async fn a_hosted_tool_the_upstream_cannot_take_is_a_400_naming_it_and_nothing_goes_upstream() {
    for (api, name) in [
        (Api::OpenaiChat, "OpenAI Chat Completions"),
        (Api::OpenaiResponses, "OpenAI Responses"),
    ] {
        let standin = StandIn::start().await;
        let (gw, _) = gateway(&standin, api, GatewayOptions::default());
        let question = json!([{"role": "user", "content": "News about Rome?"}]);
        let mut body = request(question.clone(), web_search_tools());
        for stream in [false, true] {
            body["stream"] = json!(stream);
            let reply = send(&gw, body.clone()).await;
            assert_eq!(reply.status, 400, "{api:?}: {}", reply.body);
            assert_eq!(reply.body["type"], "error");
            assert_eq!(reply.body["error"]["type"], "invalid_request_error");
            let message = reply.body["error"]["message"].as_str().unwrap();
            assert!(message.contains("tools[2]"), "{message}");
            assert!(message.contains("`web_search_20250305`"), "{message}");
            assert!(message.contains(name), "{message}");
            assert!(message.contains("Cordon does not run it"), "{message}");
        }
        assert!(
            standin.bodies().is_empty(),
            "{api:?}: {:?}",
            standin.bodies()
        );
        // The gateway is none the worse: the next request goes through.
        standin.turn(json!([{"type": "text", "text": "No search, but hello."}]));
        let reply = send(&gw, request(question, weather_tools())).await;
        assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
        assert_eq!(reply.body["content"][0]["text"], "No search, but hello.");
        assert_eq!(standin.bodies().len(), 1);
    }
}

#[tokio::test]
async fn a_hosted_tool_refused_to_an_openai_client_comes_in_openai_shape() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let body = json!({"model": "m", "input": "news?", "tools": [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
        {"type": "web_search"}
    ]});
    let call = cordon_gateway::MessagesCall::new(body).api(Api::OpenaiResponses);
    let reply = gw.messages(call).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("tools[1]: tool type `web_search`"),
        "{message}"
    );
    assert!(message.contains("OpenAI Responses"), "{message}");
    assert!(message.contains("Anthropic Messages"), "{message}");
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn a_hosted_tool_reaches_an_upstream_of_its_own_api_as_it_came() {
    let standin = StandIn::start().await;
    standin.turn(json!([{"type": "text", "text": "Searched."}]));
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let body = request(
        json!([{"role": "user", "content": "News about Rome?"}]),
        web_search_tools(),
    );
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Searched.");
    assert_eq!(standin.bodies()[0]["tools"], web_search_tools());
}
