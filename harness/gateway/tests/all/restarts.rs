//! What is at rest between two client requests outlives the gateway: a second gateway on
//! the same [`MemoryGatewayStore`] (the process that replaces the first) takes up idle
//! containers, calls waiting for approval and their continuations; a program suspended on
//! client tools cannot outlive its process and is answered as interrupted.

use std::sync::Arc;

use cordon_core::ToolRegistry;
use cordon_gateway::{Api, Gateway, GatewayOptions, GatewayStore, MemoryGatewayStore};
use cordon_protocol::execution::Language;
use cordon_sandbox::{Sandbox, SandboxConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::common::{StandIn, gateway, request, send};

static SANDBOX: OnceCell<Sandbox> = OnceCell::const_new();

async fn sandbox() -> Sandbox {
    SANDBOX
        .get_or_init(|| async {
            let config = SandboxConfig::default()
                .preload(vec![Language::Python])
                .max_instances(20);
            Sandbox::new(config).await.expect("the sandbox starts")
        })
        .await
        .clone()
}

/// One gateway process: the stand-in upstream, the shared sandbox, `store`.
async fn process(standin: &StandIn, store: &Arc<MemoryGatewayStore>) -> Gateway {
    let registry = ToolRegistry::from_json(
        &json!({"tools": [
            {"name": "delete_db", "policy": "ask", "input_schema": {"type": "object"},
             "handler": {"kind": "static", "result": "deleted"}}
        ]})
        .to_string(),
        "<test>",
    )
    .unwrap();
    let (gw, _) = gateway(standin, Api::Anthropic, GatewayOptions::default());
    gw.with_sandbox(sandbox().await)
        .with_operator_tools(registry)
        .with_store(store.clone() as Arc<dyn GatewayStore>)
}

fn code_tools() -> Value {
    json!([
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"name": "get_weather", "input_schema": {"type": "object"},
         "allowed_callers": ["code_execution_20250825"]}
    ])
}

fn with_container(mut body: Value, container: &str) -> Value {
    body["container"] = json!(container);
    body
}

fn code_call(id: &str, code: &str) -> Value {
    json!([{"type": "tool_use", "id": id, "name": "code_execution", "input": {"code": code}}])
}

#[tokio::test]
async fn an_idle_container_comes_back_in_the_next_process_with_its_variables() {
    let standin = StandIn::start().await;
    let store = Arc::new(MemoryGatewayStore::default());
    let first = process(&standin, &store).await;
    standin.turn(code_call("toolu_1", "x = 41"));
    standin.turn(json!([{"type": "text", "text": "Set."}]));
    let question = json!({"role": "user", "content": "set x"});
    let reply = send(&first, request(json!([question]), code_tools())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let container = reply.body["container"]["id"].as_str().unwrap().to_owned();
    assert_eq!(store.blob_keys(), [format!("gateway/{container}")]);
    let content = reply.body["content"].clone();
    drop(first);

    let second = process(&standin, &store).await;
    standin.turn(code_call("toolu_2", "print(x + 1)"));
    standin.turn(json!([{"type": "text", "text": "42."}]));
    let history = json!([question, {"role": "assistant", "content": content},
                         {"role": "user", "content": "and x + 1?"}]);
    let reply = send(
        &second,
        with_container(request(history, code_tools()), &container),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let shown = reply.body["content"].as_array().unwrap();
    assert_eq!(shown[1]["type"], "code_execution_tool_result", "{shown:?}");
    assert_eq!(shown[1]["content"]["stdout"], "42\n");
    assert_eq!(reply.body["container"]["id"], container);
}

#[tokio::test]
async fn an_approval_sent_to_the_next_process_runs_the_call_and_continues_the_turn() {
    let standin = StandIn::start().await;
    let store = Arc::new(MemoryGatewayStore::default());
    let first = process(&standin, &store).await;
    standin.turn(json!([{"type": "text", "text": "Deleting."},
        {"type": "tool_use", "id": "toolu_d", "name": "delete_db", "input": {}}]));
    let question = json!({"role": "user", "content": "wipe it"});
    let reply = send(&first, request(json!([question]), json!([]))).await;
    assert_eq!(reply.body["stop_reason"], "tool_use", "{}", reply.body);
    let content = reply.body["content"].clone();
    drop(first);

    let second = process(&standin, &store).await;
    standin.turn(json!([{"type": "text", "text": "Done."}]));
    let approval = json!({"role": "user", "content": [
        {"type": "cordon_approval", "tool_use_id": "toolu_d", "granted": true}]});
    let history = json!([question, {"role": "assistant", "content": content}, approval]);
    let reply = send(&second, request(history.clone(), json!([]))).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Done.");
    let sent = standin.bodies().last().unwrap().clone();
    assert_eq!(sent["messages"][2]["content"][0]["content"], "\"deleted\"");

    // Answered once: the same approval again is refused.
    let reply = send(&second, request(history, json!([]))).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
}

#[tokio::test]
async fn a_program_waiting_for_client_results_is_answered_as_interrupted_after_a_restart() {
    let standin = StandIn::start().await;
    let store = Arc::new(MemoryGatewayStore::default());
    let first = process(&standin, &store).await;
    standin.turn(code_call("toolu_c", "r = await get_weather()\nprint(r)"));
    let question = json!({"role": "user", "content": "weather?"});
    let reply = send(&first, request(json!([question]), code_tools())).await;
    assert_eq!(reply.body["stop_reason"], "tool_use", "{}", reply.body);
    let container = reply.body["container"]["id"].as_str().unwrap().to_owned();
    let content = reply.body["content"].clone();
    let call = content
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap()["id"]
        .clone();
    drop(first);

    let second = process(&standin, &store).await;
    let answer = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call, "content": "sunny"}]});
    let history = json!([question, {"role": "assistant", "content": content}, answer]);
    // Found by the code call it waits in (no `container`), or named: both interrupted.
    for body in [
        request(history.clone(), code_tools()),
        with_container(request(history.clone(), code_tools()), &container),
    ] {
        let reply = send(&second, body).await;
        assert_eq!(reply.status, 409, "{}", reply.body);
        assert_eq!(reply.body["type"], "error");
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("interrupted by a restart"), "{message}");
        assert!(message.contains(&container), "{message}");
    }
    assert_eq!(standin.bodies().len(), 1, "the model is not asked again");
}

/// Computers of a server that restarted: `cmp_gone` was open when it stopped.
#[derive(Debug)]
struct RestartedComputers;

impl cordon_gateway::Computers for RestartedComputers {
    fn open<'a>(
        &'a self,
        _url: &'a str,
        _display: Option<(u64, u64)>,
    ) -> futures::future::BoxFuture<'a, Result<String, String>> {
        Box::pin(async { Err("no browser here".to_owned()) })
    }

    fn exists<'a>(&'a self, _id: &'a str) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(async { false })
    }

    fn interrupted_by_restart<'a>(&'a self, id: &'a str) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(async move { id == "cmp_gone" })
    }

    fn act<'a>(
        &'a self,
        _id: &'a str,
        _input: &'a Value,
        _approved: bool,
    ) -> futures::future::BoxFuture<'a, Result<cordon_gateway::ComputerOutcome, String>> {
        Box::pin(async { Err("no browser here".to_owned()) })
    }
}

#[tokio::test]
async fn a_computer_that_was_open_when_the_server_stopped_is_answered_as_interrupted() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(Arc::new(RestartedComputers));
    let tools = json!([{"type": "computer_20250124", "name": "computer",
        "display_width_px": 1024, "display_height_px": 768}]);
    let body = request(json!([{"role": "user", "content": "click"}]), tools);
    let call =
        |id: &str| cordon_gateway::MessagesCall::new(body.clone()).computer(Some(id.to_owned()));
    let reply = gw.messages(call("cmp_gone")).await;
    assert_eq!(reply.status, 409, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("interrupted by a restart"), "{message}");
    // One that never existed is still a plain 400.
    let reply = gw.messages(call("cmp_never")).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn a_sessions_container_comes_back_with_the_session_in_the_next_process() {
    use cordon_gateway::session::{SessionEvent, SessionInput, SessionState};

    let standin = StandIn::start().await;
    let store = Arc::new(MemoryGatewayStore::default());
    let first = process(&standin, &store).await;
    standin.turn(code_call("toolu_s1", "x = 41"));
    standin.turn(json!([{"type": "text", "text": "Set."}]));
    let (mut state, input) = SessionState::create(
        &json!({"model": "stand-in", "messages": [{"role": "user", "content": "set x"}]}),
        None,
    )
    .unwrap();
    crate::common::session_turn(&first, &mut state, input).await;
    let container = state
        .container
        .clone()
        .expect("the session has a container");
    assert_eq!(store.blob_keys(), [format!("gateway/{container}")]);
    drop(first);

    // The server kept the session's state as JSON; the next process reads it back.
    let mut state: SessionState =
        serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
    let second = process(&standin, &store).await;
    standin.turn(code_call("toolu_s2", "print(x + 1)"));
    standin.turn(json!([{"type": "text", "text": "42."}]));
    let input = SessionInput::parse(&json!({"messages": [
        {"role": "user", "content": "x + 1?"}]}))
    .unwrap();
    let events = crate::common::session_turn(&second, &mut state, input).await;
    let output = events.iter().find_map(|event| match event {
        SessionEvent::ToolResult { id, content, .. } if id == "toolu_s2" => Some(content.clone()),
        _ => None,
    });
    assert!(
        output.as_deref().is_some_and(|o| o.contains("42")),
        "{events:?}"
    );
    assert_eq!(state.container.as_deref(), Some(container.as_str()));
}

/// A store that is out of reach.
#[derive(Debug)]
struct DownStore;

fn down<T>() -> futures::future::BoxFuture<'static, Result<T, cordon_gateway::GatewayStoreError>>
where
    T: Send + 'static,
{
    Box::pin(async {
        Err(cordon_gateway::GatewayStoreError(
            "connection refused".to_owned(),
        ))
    })
}

impl GatewayStore for DownStore {
    fn put<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a Value,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<()>> {
        down()
    }
    fn get<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<Option<Value>>>
    {
        down()
    }
    fn take<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<Option<Value>>>
    {
        down()
    }
    fn put_new<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a Value,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<Value>> {
        down()
    }
    fn put_blob<'a>(
        &'a self,
        _: &'a str,
        _: Vec<u8>,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<()>> {
        down()
    }
    fn get_blob<'a>(
        &'a self,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<Option<Vec<u8>>>>
    {
        down()
    }
    fn delete_blob<'a>(
        &'a self,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, cordon_gateway::gateway_store::StoreResult<()>> {
        down()
    }
}

#[tokio::test]
async fn a_store_out_of_reach_is_a_503_for_an_approval_and_code_still_runs_live() {
    let standin = StandIn::start().await;
    let (gw, recorder) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let registry = ToolRegistry::from_json(
        &json!({"tools": [{"name": "delete_db", "policy": "ask", "input_schema": {"type": "object"},
                           "handler": {"kind": "static", "result": "deleted"}}]})
        .to_string(),
        "<test>",
    )
    .unwrap();
    let gw = gw
        .with_sandbox(sandbox().await)
        .with_operator_tools(registry)
        .with_store(Arc::new(DownStore));
    standin.turn(json!([{"type": "tool_use", "id": "toolu_d", "name": "delete_db", "input": {}}]));
    let reply = send(
        &gw,
        request(json!([{"role": "user", "content": "wipe"}]), json!([])),
    )
    .await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(reply.body["error"]["type"], "api_error");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );

    // A program still runs; its container stays live here, and the record says why it
    // was not kept.
    standin.turn(code_call("toolu_c", "x = 41"));
    standin.turn(code_call("toolu_c2", "print(x + 1)"));
    standin.turn(json!([{"type": "text", "text": "42"}]));
    let reply = send(
        &gw,
        request(json!([{"role": "user", "content": "x"}]), code_tools()),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let stdout: Vec<&Value> = reply.body["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "code_execution_tool_result")
        .map(|b| &b["content"]["stdout"])
        .collect();
    assert_eq!(stdout, [&json!(""), &json!("42\n")]);
    let conversation = reply.conversation_id.clone();
    let entries = recorder.entries(&conversation);
    assert!(
        entries
            .iter()
            .any(|e| e.kind == "error" && e.data["type"] == "container_not_kept"),
        "{entries:?}"
    );
}
