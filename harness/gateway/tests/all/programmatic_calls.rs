//! Programmatic tool calling: programs in the sandbox call client tools, suspend, resume.

use std::time::Duration;

use cordon_gateway::{Api, Gateway, GatewayOptions};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::common::{StandIn, gateway, send};

static SANDBOX: OnceCell<Sandbox> = OnceCell::const_new();

async fn sandbox() -> Sandbox {
    SANDBOX
        .get_or_init(|| async {
            let config = SandboxConfig::default()
                .preload(vec![Language::Python])
                .max_instances(50);
            Sandbox::new(config).await.expect("the sandbox starts")
        })
        .await
        .clone()
}

fn tools() -> Value {
    json!([
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"name": "get_weather", "description": "Weather in a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
         "allowed_callers": ["code_execution_20250825"]}
    ])
}

fn body(messages: Value, container: Option<&str>) -> Value {
    let mut body = json!({"model": "m", "max_tokens": 500, "messages": messages, "tools": tools()});
    if let Some(id) = container {
        body["container"] = json!(id);
    }
    body
}

async fn ptc_gateway(standin: &StandIn, ttl: Duration) -> Gateway {
    let (gw, _) = gateway(
        standin,
        Api::Anthropic,
        GatewayOptions::default().container_ttl(ttl),
    );
    gw.with_sandbox(sandbox().await)
}

const GATHER: &str = "import asyncio\nr = await asyncio.gather(get_weather(city='Paris'), get_weather(city='Oslo'))\nprint('got', r[0]['temp'], r[1])";

#[tokio::test]
async fn a_batch_of_two_client_calls_suspends_and_resumes_in_its_container() {
    let standin = StandIn::start().await;
    let gw = ptc_gateway(&standin, Duration::from_secs(600)).await;
    standin.turn(json!([
        {"type": "text", "text": "Running code."},
        {"type": "tool_use", "id": "toolu_code", "name": "code_execution", "input": {"code": GATHER}}
    ]));
    let question = json!({"role": "user", "content": "Compare Paris and Oslo"});
    let reply = send(&gw, body(json!([question]), None)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The model is offered the code tool only: get_weather is not directly callable.
    let first = standin.bodies()[0].clone();
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["code_execution"]);
    let content = reply.body["content"].as_array().unwrap().clone();
    assert_eq!(reply.body["stop_reason"], "tool_use");
    assert_eq!(content[1]["type"], "server_tool_use");
    let server_id = content[1]["id"].as_str().unwrap().to_owned();
    assert!(server_id.starts_with("srvtoolu_"));
    assert_eq!(content[1]["input"]["code"], GATHER);
    let calls: Vec<&Value> = content.iter().filter(|b| b["type"] == "tool_use").collect();
    assert_eq!(calls.len(), 2, "{content:?}");
    assert_eq!(
        calls[0]["caller"],
        json!({"type": "code_execution_20250825", "tool_id": server_id})
    );
    let cities: Vec<&str> = calls
        .iter()
        .map(|c| c["input"]["city"].as_str().unwrap())
        .collect();
    assert_eq!(cities, ["Paris", "Oslo"]);
    let container = reply.body["container"]["id"].as_str().unwrap().to_owned();
    assert!(container.starts_with("container_"));
    assert!(
        reply.body["container"]["expires_at"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    standin.turn(json!([{"type": "text", "text": "Paris is warmer."}]));
    let answers = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "{\"temp\": 21}"},
        {"type": "tool_result", "tool_use_id": calls[1]["id"], "content": "cold"}
    ]});
    let history = json!([question, {"role": "assistant", "content": content}, answers]);
    let reply = send(&gw, body(history.clone(), Some(&container))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content2 = reply.body["content"].as_array().unwrap().clone();
    assert_eq!(content2[0]["type"], "code_execution_tool_result");
    assert_eq!(content2[0]["tool_use_id"], server_id);
    assert_eq!(content2[0]["content"]["type"], "code_execution_result");
    assert_eq!(content2[0]["content"]["stdout"], "got 21 cold\n");
    assert_eq!(content2[0]["content"]["return_code"], 0);
    assert_eq!(content2[1]["text"], "Paris is warmer.");
    assert_eq!(reply.body["container"]["id"], container);
    // The model saw its code call and the program's output, not the intermediate results.
    let sent = &standin.bodies()[1];
    let text = sent.to_string();
    assert!(!text.contains(calls[0]["id"].as_str().unwrap()), "{text}");
    let last = sent["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["tool_use_id"], server_id);
    assert!(
        last["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("got 21 cold")
    );

    // REPL state: the next program in the container still has `r`.
    standin.turn(json!([{"type": "tool_use", "id": "toolu_c2", "name": "code_execution", "input": {"code": "print(r[1])"}}]));
    standin.turn(json!([{"type": "text", "text": "Still cold."}]));
    let mut history = history.as_array().unwrap().clone();
    history.push(json!({"role": "assistant", "content": content2}));
    history.push(json!({"role": "user", "content": "And Oslo again?"}));
    let reply = send(&gw, body(Value::Array(history), Some(&container))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content3 = reply.body["content"].as_array().unwrap();
    assert_eq!(content3[0]["type"], "server_tool_use");
    assert_eq!(content3[1]["content"]["stdout"], "cold\n");
    assert_eq!(content3[2]["text"], "Still cold.");
}

#[tokio::test]
async fn unknown_and_expired_containers_are_400() {
    let standin = StandIn::start().await;
    let gw = ptc_gateway(&standin, Duration::from_millis(300)).await;
    let question = json!({"role": "user", "content": "hi"});
    let reply = send(&gw, body(json!([question]), Some("container_nope"))).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    assert!(standin.bodies().is_empty());

    standin.turn(json!([{"type": "tool_use", "id": "toolu_code", "name": "code_execution", "input": {"code": "await get_weather(city='X')"}}]));
    let reply = send(&gw, body(json!([question]), None)).await;
    let container = reply.body["container"]["id"].as_str().unwrap().to_owned();
    let content = reply.body["content"].clone();
    let call_id = content
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap()["id"]
        .clone();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let answers = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "x"}]});
    let reply = send(
        &gw,
        body(
            json!([question, {"role": "assistant", "content": content}, answers]),
            Some(&container),
        ),
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
}

fn first_calls(content: &Value) -> Vec<Value> {
    content
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_program_resumes_only_with_every_result_it_waits_for() {
    let standin = StandIn::start().await;
    let gw = ptc_gateway(&standin, Duration::from_secs(600)).await;
    standin.turn(json!([{"type": "tool_use", "id": "toolu_code", "name": "code_execution", "input": {"code": GATHER}}]));
    let question = json!({"role": "user", "content": "Compare"});
    let reply = send(&gw, body(json!([question]), None)).await;
    let content = reply.body["content"].clone();
    let container = reply.body["container"]["id"].as_str().unwrap().to_owned();
    let calls = first_calls(&content);
    assert_eq!(calls.len(), 2);
    // One of two results: refused at once (not left waiting), naming the missing call.
    let half = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "{\"temp\": 21}"}
    ]});
    let partial = send(
        &gw,
        body(
            json!([question, {"role": "assistant", "content": content}, half]),
            Some(&container),
        ),
    );
    let reply = tokio::time::timeout(Duration::from_secs(60), partial)
        .await
        .expect("a partial answer is refused, not left waiting");
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(calls[1]["id"].as_str().unwrap()),
        "{message}"
    );
    // Nothing was applied: the whole answer still resumes the program.
    standin.turn(json!([{"type": "text", "text": "done"}]));
    let both = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0]["id"], "content": "{\"temp\": 21}"},
        {"type": "tool_result", "tool_use_id": calls[1]["id"], "content": "cold"}
    ]});
    let reply = send(
        &gw,
        body(
            json!([question, {"role": "assistant", "content": content}, both]),
            Some(&container),
        ),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.body["content"][0]["content"]["stdout"],
        "got 21 cold\n"
    );
}

#[tokio::test]
async fn past_the_container_cap_the_least_recently_used_is_closed() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(
        &standin,
        Api::Anthropic,
        GatewayOptions::default().max_containers(2),
    );
    let gw = gw.with_sandbox(sandbox().await);
    let question = json!({"role": "user", "content": "count"});
    let mut containers = Vec::new();
    for i in 0..3 {
        standin.turn(json!([{"type": "tool_use", "id": format!("toolu_{i}"), "name": "code_execution", "input": {"code": format!("n = {i}\nprint(n)")}}]));
        standin.turn(json!([{"type": "text", "text": "ok"}]));
        let reply = send(&gw, body(json!([question]), None)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        containers.push(reply.body["container"]["id"].as_str().unwrap().to_owned());
    }
    // The first (least recently used) made room for the third; it says so.
    let reply = send(&gw, body(json!([question]), Some(&containers[0]))).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("make room"), "{message}");
    // The others keep their state.
    for (i, id) in containers.iter().enumerate().skip(1) {
        standin.turn(json!([{"type": "tool_use", "id": format!("toolu_again_{i}"), "name": "code_execution", "input": {"code": "print(n)"}}]));
        standin.turn(json!([{"type": "text", "text": "ok"}]));
        let reply = send(&gw, body(json!([question]), Some(id))).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            reply.body["content"][1]["content"]["stdout"],
            format!("{i}\n")
        );
    }
}

#[tokio::test]
async fn a_code_call_refused_before_running_still_shows_its_result_block() {
    let standin = StandIn::start().await;
    let gw = ptc_gateway(&standin, Duration::from_secs(600)).await;
    let mut tools = tools();
    tools
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "ask_user", "input_schema": {"type": "object"}}));
    // No `code`, beside a client call: the turn goes to the client with both.
    standin.turn(json!([
        {"type": "tool_use", "id": "toolu_code", "name": "code_execution", "input": {}},
        {"type": "tool_use", "id": "toolu_ask", "name": "ask_user", "input": {}}
    ]));
    let mut request = body(json!([{"role": "user", "content": "go"}]), None);
    request["tools"] = tools;
    let reply = send(&gw, request).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content = reply.body["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "code_execution_tool_result", "tool_use"]
    );
    assert_eq!(content[1]["tool_use_id"], content[0]["id"]);
    assert_eq!(
        content[1]["content"],
        json!({"type": "code_execution_tool_result_error", "error_code": "invalid_tool_input"})
    );
}

#[tokio::test]
async fn code_execution_20260521_runs_in_cordon_as_the_earlier_versions_do() {
    const KIND: &str = "code_execution_20260521";
    let tools = json!([
        {"type": KIND, "name": "code_execution"},
        {"name": "get_weather", "description": "Weather in a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
         "allowed_callers": [KIND]}
    ]);
    // Any upstream: the tool is Cordon's, never refused as another vendor's.
    for api in [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses] {
        let standin = StandIn::start().await;
        let (gw, _) = gateway(&standin, api, GatewayOptions::default());
        let gw = gw.with_sandbox(sandbox().await);
        standin.turn(json!([{"type": "tool_use", "id": "toolu_code", "name": "code_execution",
                             "input": {"code": "r = await get_weather(city='Paris')\nprint('got', r)"}}]));
        let question = json!({"role": "user", "content": "Paris?"});
        let mut request = json!({"model": "m", "max_tokens": 500, "messages": [question]});
        request["tools"] = tools.clone();
        let reply = send(&gw, request.clone()).await;
        assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
        // The model was offered Cordon's code tool only (get_weather is program-only).
        let offered = standin.bodies()[0]["tools"].clone();
        let names: Vec<&str> = offered
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
        assert_eq!(names, ["code_execution"], "{api:?}: {offered}");
        let content = reply.body["content"].as_array().unwrap().clone();
        assert_eq!(content[0]["type"], "server_tool_use", "{content:?}");
        let call = first_calls(&reply.body["content"]).remove(0);
        assert_eq!(
            call["caller"],
            json!({"type": KIND, "tool_id": content[0]["id"]})
        );
        let container = reply.body["container"]["id"].as_str().unwrap().to_owned();

        standin.turn(json!([{"type": "text", "text": "Sunny in Paris."}]));
        let answer = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "sun"}
        ]});
        request["messages"] = json!([question, {"role": "assistant", "content": content}, answer]);
        request["container"] = json!(container);
        let reply = send(&gw, request).await;
        assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
        assert_eq!(
            reply.body["content"][0]["type"],
            "code_execution_tool_result"
        );
        assert_eq!(reply.body["content"][0]["content"]["stdout"], "got sun\n");
        assert_eq!(reply.body["content"][1]["text"], "Sunny in Paris.");
    }
}
