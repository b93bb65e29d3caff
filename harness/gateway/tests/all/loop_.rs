//! Client tools: handed back, answered, forwarded.

use cordon_gateway::{Api, GatewayOptions};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{StandIn, gateway, request, send, weather_tools};

#[tokio::test]
async fn parallel_client_tools_come_back_and_their_results_reach_the_model() {
    let standin = StandIn::start().await;
    standin.turn(json!([
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {"city": "Paris"}}
    ]));
    let (gw, recorder) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let question = json!({"role": "user", "content": "Weather and time in Paris?"});
    let reply = send(&gw, request(json!([question]), weather_tools())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["stop_reason"], "tool_use");
    let content = reply.body["content"].as_array().unwrap().clone();
    assert_eq!(content.len(), 3);
    assert_eq!(
        content[1],
        json!({"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}})
    );
    assert_eq!(content[2]["id"], "toolu_b");
    assert!(reply.conversation_id.starts_with("conv_"));

    standin.turn(json!([{"type": "text", "text": "21 °C at noon."}]));
    let answer = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "21 °C"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "clock broken"}], "is_error": true}
    ]});
    let body = request(
        json!([question, {"role": "assistant", "content": content}, answer]),
        weather_tools(),
    );
    let reply2 = send(&gw, body).await;
    assert_eq!(reply2.status, 200, "{}", reply2.body);
    assert_eq!(reply2.body["content"][0]["text"], "21 °C at noon.");
    assert_eq!(reply2.body["stop_reason"], "end_turn");
    // The continuation joins the conversation whose tool calls it answers.
    assert_eq!(reply2.conversation_id, reply.conversation_id);
    let sent = &standin.bodies()[1];
    let results = &sent["messages"][2]["content"];
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_a", "content": "21 °C"})
    );
    assert_eq!(results[1]["is_error"], true);
    let kinds: Vec<String> = recorder
        .entries(&reply.conversation_id)
        .iter()
        .map(|e| e.kind.to_owned())
        .collect();
    assert!(kinds.contains(&"model_turn".to_owned()));
    assert!(kinds.contains(&"tool_call".to_owned()));
    assert!(
        kinds.iter().filter(|k| *k == "request").count() == 2,
        "{kinds:?}"
    );
}

#[tokio::test]
async fn a_streamed_request_gets_anthropic_events_and_the_upstream_is_streamed() {
    let standin = StandIn::start().await;
    standin.turn(json!([
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Oslo"}}
    ]));
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let mut body = request(
        json!([{"role": "user", "content": "Oslo?"}]),
        weather_tools(),
    );
    body["stream"] = json!(true);
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200);
    assert!(reply.stream);
    assert_eq!(standin.bodies()[0]["stream"], true);
    let names: Vec<String> = reply.events().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let delta = &reply.events()[2].1;
    assert_eq!(delta["delta"]["type"], "input_json_delta");
}

#[tokio::test]
async fn tool_choice_and_disable_parallel_reach_a_chat_upstream_in_its_terms() {
    let standin = StandIn::start().await;
    standin.turn(json!([{"type": "text", "text": "ok"}]));
    standin.turn(json!([{"type": "text", "text": "ok"}]));
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let mut body = request(json!([{"role": "user", "content": "hi"}]), weather_tools());
    body["tool_choice"] =
        json!({"type": "tool", "name": "get_time", "disable_parallel_tool_use": true});
    assert_eq!(send(&gw, body.clone()).await.status, 200);
    body["tool_choice"] = json!({"type": "any"});
    assert_eq!(send(&gw, body).await.status, 200);
    let bodies = standin.bodies();
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "function", "function": {"name": "get_time"}})
    );
    assert_eq!(bodies[0]["parallel_tool_calls"], false);
    assert_eq!(bodies[1]["tool_choice"], "required");
}
