//! The session protocol's state between turns: what `GET /session/{id}` shows a client that
//! restarted, from the state as the server keeps it (JSON in its store).

use cordon_core::ToolRegistry;
use cordon_gateway::session::{CallKind, SessionEvent, SessionInput, SessionState};
use cordon_gateway::{Api, Gateway, GatewayOptions};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{StandIn, gateway, session_turn};

/// A gateway with a trusted operator tool (`lookup`, policy `allow`) and one that asks
/// (`delete_db`, policy `ask`).
fn operator_gateway(standin: &StandIn) -> Gateway {
    let registry = ToolRegistry::from_json(
        &json!({"tools": [
            {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
             "handler": {"kind": "static", "result": {"answer": 42}}},
            {"name": "delete_db", "policy": "ask", "input_schema": {"type": "object"},
             "handler": {"kind": "static", "result": {"deleted": true}}}
        ]})
        .to_string(),
        "<test>",
    )
    .unwrap();
    let (gw, _) = gateway(standin, Api::Anthropic, GatewayOptions::default());
    gw.with_operator_tools(registry)
}

/// The state as the server reads it back from its store.
fn kept(state: &SessionState) -> SessionState {
    serde_json::from_str(&serde_json::to_string(state).unwrap()).unwrap()
}

fn tool_results(history: &Value) -> Vec<(String, Value)> {
    history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            let content = m["content"].as_str().unwrap();
            (
                m["toolCallId"].as_str().unwrap().to_owned(),
                serde_json::from_str(content).unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_restarted_client_sees_the_trusted_result_beside_the_call_waiting_for_permission() {
    let standin = StandIn::start().await;
    standin.turn(json!([
        {"type": "text", "text": "On it."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "life"}},
        {"type": "tool_use", "id": "toolu_2", "name": "delete_db", "input": {}}
    ]));
    let gw = operator_gateway(&standin);
    let (mut state, input) = SessionState::create(
        &json!({"model": "stand-in", "messages": [{"role": "user", "content": "go"}]}),
        None,
    )
    .unwrap();
    let events = session_turn(&gw, &mut state, input).await;
    assert_eq!(
        events,
        [
            SessionEvent::TextDelta("On it.".into()),
            SessionEvent::ToolCall {
                id: "toolu_1".into(),
                name: "lookup".into(),
                input: json!({"q": "life"}),
                kind: CallKind::Server,
            },
            SessionEvent::ToolResult {
                id: "toolu_1".into(),
                content: r#"{"answer":42}"#.into(),
                is_error: false,
            },
            SessionEvent::ToolCall {
                id: "toolu_2".into(),
                name: "delete_db".into(),
                input: json!({}),
                kind: CallKind::Permission,
            },
            SessionEvent::TurnStop {
                reason: "tool_use",
                message: None,
            },
        ]
    );

    // The client restarts: the history has both calls, the result already produced (as the
    // stream showed it), and the call still waiting.
    let mut state = kept(&state);
    let history = state.to_json();
    assert_eq!(
        history["messages"],
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "On it."},
                {"type": "tool_call", "toolCallId": "toolu_1", "name": "lookup", "input": {"q": "life"}},
                {"type": "tool_call", "toolCallId": "toolu_2", "name": "delete_db", "input": {}}
            ]},
            {"role": "tool", "toolCallId": "toolu_1", "content": r#"{"answer":42}"#, "isError": false}
        ])
    );
    assert_eq!(
        history["pending"],
        json!([{"toolCallId": "toolu_2", "name": "delete_db", "input": {}, "kind": "permission"}])
    );

    // Granted: the model reads both results at once, and the history shows each once.
    standin.turn(json!([{"type": "text", "text": "Deleted."}]));
    let input = SessionInput::parse(&json!({"messages": [
        {"role": "tool_permission", "toolCallId": "toolu_2", "granted": true}
    ]}))
    .unwrap();
    state.check(&input).unwrap();
    let events = session_turn(&gw, &mut state, input).await;
    assert_eq!(
        events.last(),
        Some(&SessionEvent::TurnStop {
            reason: "end_turn",
            message: None
        }),
        "{events:?}"
    );
    let bodies = standin.bodies();
    let read: Vec<&str> = bodies[1]["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(read, ["toolu_1", "toolu_2"]);
    let history = kept(&state).to_json();
    assert_eq!(
        tool_results(&history),
        [
            ("toolu_1".to_owned(), json!({"answer": 42})),
            ("toolu_2".to_owned(), json!({"deleted": true})),
        ]
    );
    assert_eq!(history["pending"], json!([]));
}
