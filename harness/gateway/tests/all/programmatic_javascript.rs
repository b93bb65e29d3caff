//! Responses' `programmatic_tool_calling`: JavaScript programs in Cordon's QuickJS guest
//! call the client's function tools opted in with `allowed_callers: ["programmatic"]`; the
//! calls reach the client as `function_call`s with `caller: {type: "program", caller_id}`,
//! the program suspends, the client's `function_call_output`s resume it.

use std::time::Duration;

use cordon_gateway::{Api, Gateway, GatewayOptions, MessagesCall};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::common::{StandIn, gateway};

static SANDBOX: OnceCell<Sandbox> = OnceCell::const_new();

async fn sandbox() -> Sandbox {
    SANDBOX
        .get_or_init(|| async {
            let config = SandboxConfig::default()
                .preload(vec![Language::Javascript])
                .max_instances(20);
            Sandbox::new(config).await.expect("the sandbox starts")
        })
        .await
        .clone()
}

fn tools() -> Value {
    json!([
        {"type": "programmatic_tool_calling"},
        {"type": "function", "name": "get_weather", "description": "Weather in a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
         "allowed_callers": ["programmatic"]}
    ])
}

const PROGRAM: &str = "const [a, b] = await Promise.all([get_weather({city: 'Paris'}), get_weather({city: 'Oslo'})]);\nconsole.log('got', a.temp, b);";

async fn js_gateway(standin: &StandIn, upstream: Api) -> Gateway {
    let (gw, _) = gateway(
        standin,
        upstream,
        GatewayOptions::default().container_ttl(Duration::from_secs(600)),
    );
    gw.with_sandbox(sandbox().await)
}

async fn respond(gw: &Gateway, body: Value) -> cordon_gateway::MessagesReply {
    gw.messages(MessagesCall::new(body).api(Api::OpenaiResponses))
        .await
}

/// The program's first batch: the `program` item and its two calls.
async fn first_batch(gw: &Gateway, standin: &StandIn) -> (Value, Vec<Value>) {
    standin.turn(json!([
        {"type": "tool_use", "id": "toolu_p", "name": "programmatic_tool_calling", "input": {"code": PROGRAM}}
    ]));
    let reply = respond(
        gw,
        json!({"model": "m", "input": "Compare Paris and Oslo", "tools": tools()}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let output = reply.body["output"].as_array().unwrap().clone();
    // The model is offered the program tool only (get_weather is programmatic only).
    let bodies = standin.bodies();
    let offered: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["function"]["name"].as_str())
                .unwrap()
        })
        .collect();
    assert_eq!(offered, ["programmatic_tool_calling"]);
    assert!(bodies[0]["tools"][0].to_string().contains("JavaScript"));
    assert_eq!(output[0]["type"], "program");
    assert_eq!(output[0]["code"], PROGRAM);
    assert!(
        output[0]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("container_")
    );
    let program_id = output[0]["call_id"].as_str().unwrap().to_owned();
    let calls: Vec<Value> = output
        .iter()
        .filter(|i| i["type"] == "function_call")
        .cloned()
        .collect();
    assert_eq!(calls.len(), 2, "{output:?}");
    for call in &calls {
        assert_eq!(
            call["caller"],
            json!({"type": "program", "caller_id": program_id})
        );
        assert_eq!(call["name"], "get_weather");
    }
    (output[0].clone(), calls)
}

fn answers(calls: &[Value]) -> Vec<Value> {
    vec![
        json!({"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "{\"temp\": 21}"}),
        json!({"type": "function_call_output", "call_id": calls[1]["call_id"], "output": "cold"}),
    ]
}

#[tokio::test]
async fn a_javascript_program_suspends_on_client_calls_and_resumes_for_every_upstream() {
    for upstream in [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses] {
        let standin = StandIn::start().await;
        let gw = js_gateway(&standin, upstream).await;
        let (program, calls) = first_batch(&gw, &standin).await;
        standin.turn(json!([{"type": "text", "text": "Paris is warmer."}]));
        let mut input = vec![
            json!({"role": "user", "content": "Compare Paris and Oslo"}),
            program.clone(),
        ];
        input.extend(calls.iter().cloned());
        input.extend(answers(&calls));
        let reply = respond(&gw, json!({"model": "m", "input": input, "tools": tools()})).await;
        assert_eq!(reply.status, 200, "{upstream:?}: {}", reply.body);
        let output = reply.body["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "program_output", "{output:?}");
        assert_eq!(output[0]["call_id"], program["call_id"]);
        assert_eq!(output[0]["result"], "got 21 cold\n");
        assert_eq!(output[0]["status"], "completed");
        assert_eq!(output[1]["type"], "message");
        // The model read its program's output, never the intermediate results.
        let sent = standin.bodies()[1].to_string();
        assert!(sent.contains("got 21 cold"), "{upstream:?}: {sent}");
        assert!(!sent.contains("\\\"temp\\\": 21"), "{upstream:?}: {sent}");
    }
}

#[tokio::test]
async fn a_program_resumes_after_previous_response_id_without_naming_its_container() {
    let standin = StandIn::start().await;
    let gw = js_gateway(&standin, Api::Anthropic).await;
    standin.turn(json!([
        {"type": "tool_use", "id": "toolu_p", "name": "programmatic_tool_calling", "input": {"code": PROGRAM}}
    ]));
    let first = respond(
        &gw,
        json!({"model": "m", "input": "Compare Paris and Oslo", "tools": tools()}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let calls: Vec<Value> = first.body["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .cloned()
        .collect();
    standin.turn(json!([{"type": "text", "text": "Done."}]));
    let reply = respond(
        &gw,
        json!({"model": "m", "previous_response_id": first.body["id"], "input": answers(&calls), "tools": tools()}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["output"][0]["result"], "got 21 cold\n");
}

#[tokio::test]
async fn two_code_tools_in_one_request_are_a_400() {
    let standin = StandIn::start().await;
    let gw = js_gateway(&standin, Api::Anthropic).await;
    let mut tools = tools();
    tools
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "code_interpreter", "container": {"type": "auto"}}));
    let reply = respond(&gw, json!({"model": "m", "input": "hi", "tools": tools})).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("second code tool"), "{message}");
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn a_chat_completions_client_cannot_declare_it() {
    let standin = StandIn::start().await;
    let gw = js_gateway(&standin, Api::Anthropic).await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                      "tools": [{"type": "programmatic_tool_calling"}]});
    let reply = gw
        .messages(MessagesCall::new(body).api(Api::OpenaiChat))
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("needs a Responses"), "{message}");
    assert!(standin.bodies().is_empty());
}
