//! Computer use as a server tool, against a stand-in computer: inline actions, gates,
//! actions a declaration disables refused to the model (the engine itself is
//! tested in cordon-computer and end to end with Chromium).

use std::sync::{Arc, Mutex};

use cordon_gateway::{Api, ComputerOutcome, Computers, GatewayOptions, MessagesCall};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{StandIn, gateway};

/// Screenshots are a fixed tiny PNG; clicks ask for approval until approved.
#[derive(Debug, Default)]
struct FakeComputers {
    actions: Mutex<Vec<(Value, bool)>>,
}

impl Computers for FakeComputers {
    fn open<'a>(
        &'a self,
        url: &'a str,
        display: Option<(u64, u64)>,
    ) -> BoxFuture<'a, Result<String, String>> {
        assert_eq!(display, Some((1024, 640)));
        Box::pin(async move { Ok(format!("cmp_for_{}", url.len())) })
    }

    fn exists<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move { id == "cmp_open" })
    }

    fn act<'a>(
        &'a self,
        _id: &'a str,
        input: &'a Value,
        approved: bool,
    ) -> BoxFuture<'a, Result<ComputerOutcome, String>> {
        self.actions.lock().unwrap().push((input.clone(), approved));
        Box::pin(async move {
            if input["action"] == "left_click" && !approved {
                return Ok(ComputerOutcome::NeedsApproval {
                    reason: "submit-like button".into(),
                });
            }
            Ok(ComputerOutcome::Done {
                screenshot: Some(("image/png".into(), "iVBORw0KGgo=".into())),
                text: None,
                is_error: false,
            })
        })
    }
}

fn tools() -> Value {
    json!([{"type": "computer_20251124", "name": "computer", "display_width_px": 1024, "display_height_px": 640}])
}

#[tokio::test]
async fn a_bound_computer_runs_actions_inline_and_a_gate_waits_for_cordon_approval() {
    let standin = StandIn::start().await;
    let fake = Arc::new(FakeComputers::default());
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(fake.clone());
    standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "computer", "input": {"action": "screenshot"}}]));
    standin.turn(json!([{"type": "tool_use", "id": "toolu_c", "name": "computer", "input": {"action": "left_click", "coordinate": [10, 20]}}]));
    let question = json!({"role": "user", "content": "Buy it"});
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools(), "messages": [question]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("http://127.0.0.1:9/shop".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.computer.as_deref(), Some("cmp_for_23"));
    // The screenshot ran inline; the gated click comes back to the client.
    assert_eq!(reply.body["stop_reason"], "tool_use");
    assert_eq!(
        reply.body["content"],
        json!([{"type": "tool_use", "id": "toolu_c", "name": "computer", "input": {"action": "left_click", "coordinate": [10, 20]}}])
    );
    let second = &standin.bodies()[1];
    let result = &second["messages"][2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_s");
    assert_eq!(result["content"][0]["type"], "image");
    // The Anthropic upstream gets the built-in tool as declared.
    assert_eq!(standin.bodies()[0]["tools"], tools());

    standin.turn(json!([{"type": "text", "text": "Bought."}]));
    let approval = json!({"role": "user", "content": [{"type": "cordon_approval", "tool_use_id": "toolu_c", "granted": true}]});
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools(),
                      "messages": [question, {"role": "assistant", "content": reply.body["content"]}, approval]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_open".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Bought.");
    let actions = fake.actions.lock().unwrap().clone();
    assert_eq!(actions.len(), 3);
    assert_eq!(
        actions[2],
        (
            json!({"action": "left_click", "coordinate": [10, 20]}),
            true
        )
    );
    let last = standin.bodies().last().unwrap().clone();
    assert_eq!(
        last["messages"][2]["content"][0]["content"][0]["type"],
        "image"
    );

    // An unknown computer id is a 400 before the model is asked.
    let before = standin.bodies().len();
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools(), "messages": [question]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_gone".into())))
        .await;
    assert_eq!(reply.status, 400);
    assert_eq!(standin.bodies().len(), before);
}

#[tokio::test]
async fn an_openai_upstream_gets_the_computer_as_a_function_tool() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let gw = gw.with_computers(Arc::new(FakeComputers::default()));
    standin.turn(json!([{"type": "text", "text": "ok"}]));
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools(), "messages": [{"role": "user", "content": "hi"}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_open".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let tool = &standin.bodies()[0]["tools"][0];
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["name"], "computer");
    assert!(
        tool["function"]["parameters"]["properties"]["action"]["enum"]
            .as_array()
            .unwrap()
            .len()
            > 5
    );
}

#[tokio::test]
async fn openais_computer_tool_bound_for_a_responses_client_runs_in_cordon() {
    let standin = StandIn::start().await;
    let fake = Arc::new(FakeComputers::default());
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(fake.clone());
    standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "computer", "input": {"action": "screenshot"}}]));
    standin.turn(json!([{"type": "text", "text": "I see the shop."}]));
    let body = json!({"model": "m", "input": "What is on the page?", "tools": [
        {"type": "computer_use_preview", "display_width": 1024, "display_height": 640,
         "environment": "browser"}
    ]});
    let reply = gw
        .messages(
            MessagesCall::new(body)
                .api(Api::OpenaiResponses)
                .computer(Some("http://127.0.0.1:9/shop".into())),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["object"], "response");
    let output = reply.body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{output:?}");
    assert_eq!(output[0]["content"][0]["text"], "I see the shop.");
    // The Anthropic model got a computer tool it can call; the action ran in Cordon.
    let offered = &standin.bodies()[0]["tools"][0];
    assert_eq!(offered["name"], "computer", "{offered}");
    assert!(
        offered.get("input_schema").is_some(),
        "a function tool: {offered}"
    );
    assert_eq!(
        fake.actions.lock().unwrap().clone(),
        vec![(json!({"action": "screenshot"}), false)]
    );
    let seen = &standin.bodies()[1]["messages"][2]["content"][0];
    assert_eq!(seen["tool_use_id"], "toolu_s");
    assert_eq!(seen["content"][0]["type"], "image");
}

#[tokio::test]
async fn an_unbound_openai_computer_tool_passes_computer_calls_through_untouched() {
    use cordon_protocol::conversation::{ContentBlock, Vendor, responses};
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::OpenaiResponses, GatewayOptions::default());
    let computer_call = json!({
        "type": "computer_call", "id": "cu_1", "call_id": "call_cu_1", "status": "completed",
        "action": {"type": "click", "button": "left", "x": 10, "y": 20},
        "pending_safety_checks": [{"id": "sc_1", "code": "malicious_instructions",
                                   "message": "check the page"}]
    });
    let mut turn = responses::decode_response(&json!({
        "id": "resp_up", "object": "response", "model": "m", "status": "completed",
        "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}
    }))
    .unwrap();
    turn.content = vec![ContentBlock::Opaque {
        vendor: Vendor::OpenaiResponses,
        data: computer_call.clone(),
    }];
    standin.push(crate::common::Answer::Native(Box::new(turn)));
    standin.turn(json!([{"type": "text", "text": "Clicked."}]));
    let tool = json!({"type": "computer_use_preview", "display_width": 1024,
                      "display_height": 640, "environment": "browser"});
    let first = gw
        .messages(
            MessagesCall::new(json!({"model": "m", "input": "Click it", "tools": [tool]}))
                .api(Api::OpenaiResponses),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["output"], json!([computer_call]));
    assert_eq!(standin.bodies()[0]["tools"], json!([tool]));
    let output = json!({"type": "computer_call_output", "call_id": "call_cu_1",
                        "acknowledged_safety_checks": [{"id": "sc_1", "code": "malicious_instructions",
                                                        "message": "check the page"}],
                        "output": {"type": "computer_screenshot",
                                   "image_url": "data:image/png;base64,iVBORw0KGgo="}});
    let input = json!([{"role": "user", "content": "Click it"}, computer_call, output]);
    let second = gw
        .messages(
            MessagesCall::new(json!({"model": "m", "input": input, "tools": [tool]}))
                .api(Api::OpenaiResponses),
        )
        .await;
    assert_eq!(second.status, 200, "{}", second.body);
    let sent = standin.bodies()[1]["input"].clone();
    assert_eq!(sent[1], computer_call);
    assert_eq!(sent[2], output);
}

/// The tool results the model read in its second round, in call order.
fn results_of(body: &Value) -> Vec<Value> {
    body["messages"][2]["content"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_toolset_refuses_its_disabled_actions_to_the_model_and_runs_the_rest() {
    let standin = StandIn::start().await;
    let fake = Arc::new(FakeComputers::default());
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(fake.clone());
    let tools = json!([{"type": "computer_toolset_20260801", "name": "computer",
                        "configs": {"left_click": {"enabled": false}, "type": {"enabled": true}}}]);
    standin.turn(json!([
        {"type": "tool_use", "id": "toolu_s", "name": "computer", "input": {"action": "screenshot"}},
        {"type": "tool_use", "id": "toolu_c", "name": "computer", "input": {"action": "left_click", "coordinate": [10, 20]}},
        {"type": "tool_use", "id": "toolu_t", "name": "computer", "input": {"action": "type", "text": "shoes"}}
    ]));
    standin.turn(json!([{"type": "text", "text": "Typed, could not click."}]));
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools,
                      "messages": [{"role": "user", "content": "Search shoes"}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_open".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Typed, could not click.");
    // The Anthropic upstream gets the toolset as declared.
    assert_eq!(standin.bodies()[0]["tools"], tools);
    // The disabled click never reached the computer; the enabled actions ran.
    assert_eq!(
        fake.actions.lock().unwrap().clone(),
        vec![
            (json!({"action": "screenshot"}), false),
            (json!({"action": "type", "text": "shoes"}), false)
        ]
    );
    let results = results_of(&standin.bodies()[1]);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0]["tool_use_id"], "toolu_s");
    assert_eq!(results[0]["content"][0]["type"], "image");
    assert_eq!(results[1]["tool_use_id"], "toolu_c");
    assert_eq!(results[1]["is_error"], true);
    let refusal = results[1]["content"].to_string();
    assert!(
        refusal.contains("`left_click` is disabled for this tool"),
        "{refusal}"
    );
    assert_eq!(results[2]["tool_use_id"], "toolu_t");
    assert_eq!(results[2]["content"][0]["type"], "image");
}

#[tokio::test]
async fn computer_20251124_runs_zoom_only_with_enable_zoom() {
    let zoom = json!({"action": "zoom", "region": [0, 0, 100, 100]});
    for enable_zoom in [None, Some(false), Some(true)] {
        let standin = StandIn::start().await;
        let fake = Arc::new(FakeComputers::default());
        let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
        let gw = gw.with_computers(fake.clone());
        let mut tool = tools()[0].clone();
        if let Some(on) = enable_zoom {
            tool["enable_zoom"] = json!(on);
        }
        standin.turn(
            json!([{"type": "tool_use", "id": "toolu_z", "name": "computer", "input": zoom}]),
        );
        standin.turn(json!([{"type": "text", "text": "Zoomed."}]));
        let body = json!({"model": "m", "max_tokens": 100, "tools": [tool],
                          "messages": [{"role": "user", "content": "Read the fine print"}]});
        let reply = gw
            .messages(MessagesCall::new(body).computer(Some("cmp_open".into())))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let result = &results_of(&standin.bodies()[1])[0];
        let ran = fake.actions.lock().unwrap().clone();
        if enable_zoom == Some(true) {
            assert_eq!(ran, vec![(zoom.clone(), false)]);
            assert_eq!(result["content"][0]["type"], "image");
        } else {
            assert_eq!(ran, vec![], "enable_zoom {enable_zoom:?}");
            assert_eq!(result["is_error"], true);
            let refusal = result["content"].to_string();
            assert!(
                refusal.contains("`zoom` is disabled for this tool"),
                "{refusal}"
            );
            assert!(refusal.contains("enable_zoom"), "{refusal}");
        }
    }
}

#[tokio::test]
async fn an_openai_upstream_is_offered_only_the_enabled_actions() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let gw = gw.with_computers(Arc::new(FakeComputers::default()));
    standin.turn(json!([{"type": "text", "text": "ok"}]));
    let tools = json!([{"type": "computer_toolset_20260801", "name": "computer",
                        "configs": {"left_click": {"enabled": false}}}]);
    let body = json!({"model": "m", "max_tokens": 100, "tools": tools,
                      "messages": [{"role": "user", "content": "hi"}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_open".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let actions = standin.bodies()[0]["tools"][0]["function"]["parameters"]["properties"]["action"]
        ["enum"]
        .clone();
    let actions: Vec<String> = serde_json::from_value(actions).unwrap();
    assert!(actions.contains(&"type".to_owned()), "{actions:?}");
    assert!(!actions.contains(&"left_click".to_owned()), "{actions:?}");
}
