//! Streamed replies (`Gateway::messages_live`): the client reads deltas while the model is
//! still writing, server tools are held until complete and never run on partial input,
//! every model round streams in one response, an upstream failure after the first byte is
//! the client API's own in-stream error.
//!
//! A gated upstream streams canonical deltas and stops at a gate the test opens only after
//! it saw what must already have arrived: a gateway that buffered would never show it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cordon_core::ToolRegistry;
use cordon_gateway::{
    Api, Credential, Gateway, GatewayOptions, MemoryRecorder, MessagesAnswer, MessagesCall,
    Upstream, UpstreamError,
};
use cordon_protocol::conversation::stream::{BlockKind, Delta, DeltaSink, Event, turn_deltas};
use cordon_protocol::conversation::{
    ContentBlock, Extra, Request, StopReason, ToolCall, Turn, Usage, Vendor,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use crate::common::{StandIn, gateway, request};

/// One step of a gated round.
enum Step {
    Send(Delta),
    /// Wait until the test opens this gate.
    Wait(Arc<Notify>),
    /// The upstream fails here.
    Fail(String),
}

/// An upstream streaming scripted rounds, stopping at gates.
#[derive(Default)]
struct Gated {
    rounds: Mutex<VecDeque<Vec<Step>>>,
    /// The requests it got.
    requests: Mutex<Vec<Request>>,
}

impl std::fmt::Debug for Gated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gated")
    }
}

impl Gated {
    async fn run(
        &self,
        request: &Request,
        sink: &mut dyn DeltaSink,
    ) -> Result<Turn, UpstreamError> {
        self.requests.lock().unwrap().push(request.clone());
        let steps = self
            .rounds
            .lock()
            .unwrap()
            .pop_front()
            .expect("a round queued");
        let mut turn = Turn {
            origin: Some(Vendor::Anthropic),
            id: "msg_gated".into(),
            model: "gated".into(),
            content: Vec::new(),
            stop_reason: None,
            stop_sequence: None,
            usage: Usage::default(),
            container: None,
            extra: Extra::new(),
        };
        for step in steps {
            match step {
                Step::Send(delta) => {
                    if let Delta::BlockStop { block, .. } = &delta {
                        turn.content.push(block.clone());
                    }
                    if let Delta::TurnEnd { stop_reason, .. } = &delta {
                        turn.stop_reason = stop_reason.clone();
                    }
                    sink.send(delta);
                }
                Step::Wait(gate) => gate.notified().await,
                Step::Fail(message) => {
                    return Err(UpstreamError::Status {
                        status: 529,
                        message,
                    });
                }
            }
        }
        Ok(turn)
    }
}

impl Upstream for Gated {
    fn call<'a>(
        &'a self,
        request: &'a Request,
        _credential: Option<&'a Credential>,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(async move { self.run(request, &mut Vec::new()).await })
    }

    fn call_streaming<'a>(
        &'a self,
        request: &'a Request,
        _credential: Option<&'a Credential>,
        sink: &'a mut dyn DeltaSink,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(self.run(request, sink))
    }

    fn describe(&self) -> String {
        "gated".into()
    }
}

fn text(index: usize, text: &str) -> Vec<Step> {
    vec![
        Step::Send(Delta::BlockStart {
            index,
            kind: BlockKind::Text,
        }),
        Step::Send(Delta::Text {
            index,
            text: text.into(),
        }),
        Step::Send(Delta::BlockStop {
            index,
            block: ContentBlock::text(text),
        }),
    ]
}

fn start() -> Step {
    Step::Send(Delta::TurnStart {
        id: "msg_gated".into(),
        model: "gated".into(),
        origin: Some(Vendor::Anthropic),
    })
}

fn end(stop: StopReason) -> Step {
    Step::Send(Delta::TurnEnd {
        stop_reason: Some(stop),
        stop_sequence: None,
        usage: Usage {
            input_tokens: 7,
            output_tokens: 3,
            ..Usage::default()
        },
        container: None,
    })
}

fn lookup_call(id: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall {
        id: id.into(),
        name: "lookup".into(),
        input,
        caller: None,
        extra: Extra::new(),
    })
}

/// A gateway over `upstream` with the operator tool `lookup` (policy allow).
fn gateway_over(upstream: Arc<Gated>) -> (Gateway, Arc<MemoryRecorder>) {
    let registry = ToolRegistry::from_json(
        &json!({"tools": [
            {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
             "handler": {"kind": "static", "result": {"answer": 42}}}
        ]})
        .to_string(),
        "<test>",
    )
    .unwrap();
    let recorder = Arc::new(MemoryRecorder::default());
    let gateway = Gateway::new(upstream, GatewayOptions::default())
        .with_recorder(recorder.clone())
        .with_operator_tools(registry);
    (gateway, recorder)
}

fn body(api: Api) -> Value {
    let messages = json!([{"role": "user", "content": "?"}]);
    let mut body = match api {
        Api::OpenaiResponses => json!({"model": "gated", "input": messages}),
        _ => json!({"model": "gated", "max_tokens": 100, "messages": messages}),
    };
    body["stream"] = json!(true);
    body
}

/// Reads events until `until` holds for one; guards against a gateway that buffers (the
/// gate stays shut and nothing comes) with a generous bound, not a timing assertion.
async fn read_until(
    events: &mut mpsc::UnboundedReceiver<Event>,
    seen: &mut Vec<Event>,
    until: impl Fn(&Event) -> bool,
) {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the awaited event never came: the reply is not streamed")
            .expect("the stream ended before the awaited event");
        let found = until(&event);
        seen.push(event);
        if found {
            return;
        }
    }
}

async fn read_rest(events: &mut mpsc::UnboundedReceiver<Event>, seen: &mut Vec<Event>) {
    while let Some(event) = events.recv().await {
        seen.push(event);
    }
}

fn live(answer: MessagesAnswer) -> cordon_gateway::LiveStream {
    match answer {
        MessagesAnswer::Live(live) => live,
        MessagesAnswer::Whole(reply) => panic!("answered whole: {} {}", reply.status, reply.body),
        _ => panic!("an unknown answer"),
    }
}

/// Whether `event` carries the text piece `piece` in `api`'s shape.
fn is_text(api: Api, event: &Event, piece: &str) -> bool {
    let (name, data) = event;
    match api {
        Api::Anthropic => name == "content_block_delta" && data["delta"]["text"] == piece,
        Api::OpenaiChat => data["choices"][0]["delta"]["content"] == piece,
        _ => name == "response.output_text.delta" && data["delta"] == piece,
    }
}

const APIS: [Api; 3] = [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses];

#[tokio::test]
async fn text_reaches_every_client_api_before_the_model_ends_its_turn() {
    for api in APIS {
        let gate = Arc::new(Notify::new());
        let upstream = Arc::new(Gated::default());
        let mut steps = vec![start()];
        steps.extend(text(0, "Hel"));
        steps.push(Step::Wait(gate.clone()));
        steps.extend(text(1, "lo"));
        steps.push(end(StopReason::EndTurn));
        upstream.rounds.lock().unwrap().push_back(steps);
        let (gw, recorder) = gateway_over(upstream);
        let mut live = live(
            gw.messages_live(MessagesCall::new(body(api)).api(api))
                .await,
        );
        assert!(!live.head.conversation_id.is_empty());
        let mut seen = Vec::new();
        // The model is held at the gate: this piece can only come from a streamed reply.
        read_until(&mut live.events, &mut seen, |e| is_text(api, e, "Hel")).await;
        gate.notify_one();
        read_rest(&mut live.events, &mut seen).await;
        let last = seen.last().unwrap();
        match api {
            Api::Anthropic => assert_eq!(last.0, "message_stop"),
            Api::OpenaiChat => assert_eq!(last.1, "[DONE]"),
            _ => assert_eq!(last.0, "response.completed"),
        }
        assert!(
            seen.iter().any(|e| is_text(api, e, "lo")),
            "{api:?}: {seen:#?}"
        );
        // Recorded as today, once complete.
        let entries = recorder.entries(&live.head.conversation_id);
        let response = entries.iter().find(|e| e.kind == "response").unwrap();
        assert_eq!(response.data["status"], 200);
        assert_eq!(
            response.data["content"],
            json!([{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}])
        );
    }
}

#[tokio::test]
async fn a_server_tool_is_held_until_complete_and_the_next_round_streams_on() {
    let gate = Arc::new(Notify::new());
    let upstream = Arc::new(Gated::default());
    let call = lookup_call("toolu_lookup", json!({"q": "paris"}));
    let mut round = vec![start()];
    round.extend(text(0, "Looking."));
    round.push(Step::Send(Delta::BlockStart {
        index: 1,
        kind: BlockKind::ToolCall {
            id: "toolu_lookup".into(),
            name: "lookup".into(),
            caller: None,
        },
    }));
    round.push(Step::Send(Delta::ToolArguments {
        index: 1,
        json: "{\"q\": \"pa".into(),
    }));
    // Text after the partial call: when it arrives, the call's pieces went by before it.
    round.extend(text(2, "marker"));
    round.push(Step::Wait(gate.clone()));
    round.push(Step::Send(Delta::ToolArguments {
        index: 1,
        json: "ris\"}".into(),
    }));
    round.push(Step::Send(Delta::BlockStop {
        index: 1,
        block: call.clone(),
    }));
    round.push(end(StopReason::ToolUse));
    upstream.rounds.lock().unwrap().push_back(round);
    let mut second = vec![start()];
    second.extend(text(0, "It is 42."));
    second.push(end(StopReason::EndTurn));
    upstream.rounds.lock().unwrap().push_back(second);

    let (gw, recorder) = gateway_over(upstream.clone());
    let api = Api::Anthropic;
    let mut live = live(
        gw.messages_live(MessagesCall::new(body(api)).api(api))
            .await,
    );
    let mut seen = Vec::new();
    read_until(&mut live.events, &mut seen, |e| is_text(api, e, "marker")).await;
    let shown = serde_json::to_string(&seen).unwrap();
    assert!(
        !shown.contains("lookup") && !shown.contains("input_json_delta"),
        "{shown}"
    );
    // Nothing ran yet: the call is not complete.
    let conversation = live.head.conversation_id.clone();
    assert!(
        !recorder
            .entries(&conversation)
            .iter()
            .any(|e| e.kind == "tool_call" || e.kind == "tool_result")
    );
    gate.notify_one();
    read_rest(&mut live.events, &mut seen).await;

    // It ran once, on its whole input; the model read the result in the next round.
    let calls: Vec<Value> = recorder
        .entries(&conversation)
        .iter()
        .filter(|e| e.kind == "tool_call")
        .map(|e| e.data["input"].clone())
        .collect();
    assert_eq!(calls, [json!({"q": "paris"})]);
    let requests = upstream.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert!(
        serde_json::to_string(&requests[1].messages)
            .unwrap()
            .contains("42")
    );
    // One response: blocks numbered on across both rounds, each started and stopped.
    let starts: Vec<u64> = seen
        .iter()
        .filter(|e| e.0 == "content_block_start")
        .map(|e| e.1["index"].as_u64().unwrap())
        .collect();
    assert_eq!(starts, [0, 1, 2]);
    assert_eq!(
        seen.iter().filter(|e| e.0 == "content_block_stop").count(),
        3
    );
    assert_eq!(seen.iter().filter(|e| e.0 == "message_start").count(), 1);
    assert!(seen.iter().any(|e| is_text(api, e, "It is 42.")));
    let stop = seen.iter().find(|e| e.0 == "message_delta").unwrap();
    assert_eq!(stop.1["delta"]["stop_reason"], "end_turn");
    assert_eq!(seen.last().unwrap().0, "message_stop");
}

#[tokio::test]
async fn partial_arguments_never_run_and_a_failure_mid_stream_is_an_in_stream_error() {
    for api in APIS {
        let upstream = Arc::new(Gated::default());
        let mut round = vec![start()];
        round.extend(text(0, "Looking."));
        round.push(Step::Send(Delta::BlockStart {
            index: 1,
            kind: BlockKind::ToolCall {
                id: "toolu_lookup".into(),
                name: "lookup".into(),
                caller: None,
            },
        }));
        round.push(Step::Send(Delta::ToolArguments {
            index: 1,
            json: "{\"q\": \"pa".into(),
        }));
        round.push(Step::Fail("overloaded".into()));
        upstream.rounds.lock().unwrap().push_back(round);
        let (gw, recorder) = gateway_over(upstream);
        let mut live = live(
            gw.messages_live(MessagesCall::new(body(api)).api(api))
                .await,
        );
        let mut seen = Vec::new();
        read_rest(&mut live.events, &mut seen).await;
        let (name, data) = seen.last().unwrap();
        match api {
            Api::Anthropic => {
                assert_eq!(name, "error");
                assert_eq!(data["error"]["type"], "overloaded_error");
            }
            Api::OpenaiChat => assert!(data["error"]["message"].is_string(), "{data}"),
            _ => {
                assert_eq!(name, "error");
                assert!(data["message"].as_str().unwrap().contains("overloaded"));
            }
        }
        assert!(seen.iter().any(|e| is_text(api, e, "Looking.")));
        let entries = recorder.entries(&live.head.conversation_id);
        assert!(!entries.iter().any(|e| e.kind == "tool_call"), "{api:?}");
        assert!(entries.iter().any(|e| e.kind == "error"), "{api:?}");
    }
}

#[tokio::test]
async fn a_failure_before_the_first_byte_is_answered_whole_with_its_status() {
    let upstream = Arc::new(Gated::default());
    upstream
        .rounds
        .lock()
        .unwrap()
        .push_back(vec![Step::Fail("overloaded".into())]);
    let (gw, _) = gateway_over(upstream);
    let answer = gw
        .messages_live(MessagesCall::new(body(Api::Anthropic)))
        .await;
    let MessagesAnswer::Whole(reply) = answer else {
        panic!("streamed a reply that failed before its first byte");
    };
    assert_eq!(reply.status, 529);
    assert_eq!(reply.body["error"]["type"], "overloaded_error");
}

/// A real HTTP upstream in each API, streaming SSE, to each client API: the client stream
/// ends as its API ends one and carries the text and the call.
#[tokio::test]
async fn every_upstream_api_streams_to_every_client_api() {
    for upstream_api in APIS {
        for client_api in APIS {
            let standin = StandIn::start().await;
            standin.turn(json!([
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Paris"}}
            ]));
            let (gw, _) = gateway(&standin, upstream_api, GatewayOptions::default());
            let mut body = request(
                json!([{"role": "user", "content": "?"}]),
                crate::common::weather_tools(),
            );
            if client_api != Api::Anthropic {
                body = client_body(client_api);
            }
            body["stream"] = json!(true);
            let mut live = live(
                gw.messages_live(MessagesCall::new(body).api(client_api))
                    .await,
            );
            let mut seen = Vec::new();
            read_rest(&mut live.events, &mut seen).await;
            let all = serde_json::to_string(&seen).unwrap();
            let pair = format!("{upstream_api:?} → {client_api:?}");
            assert!(all.contains("Checking."), "{pair}: {all}");
            assert!(
                all.contains("get_weather") && all.contains("Paris"),
                "{pair}: {all}"
            );
            let last = seen.last().unwrap();
            match client_api {
                Api::Anthropic => assert_eq!(last.0, "message_stop", "{pair}"),
                Api::OpenaiChat => assert_eq!(last.1, "[DONE]", "{pair}"),
                _ => assert_eq!(last.0, "response.completed", "{pair}"),
            }
            // The upstream was asked for a stream.
            assert_eq!(standin.bodies()[0]["stream"], true, "{pair}");
        }
    }
}

fn client_body(api: Api) -> Value {
    let tool = json!({"type": "function", "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}});
    match api {
        Api::OpenaiChat => {
            json!({"model": "stand-in", "messages": [{"role": "user", "content": "?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})
        }
        _ => json!({"model": "stand-in", "input": "?", "tools": [tool]}),
    }
}

/// Keeps the helper used when only deltas of a whole turn are needed.
#[test]
fn a_whole_turn_streams_as_its_deltas() {
    let turn = Turn {
        origin: Some(Vendor::Anthropic),
        id: "msg_1".into(),
        model: "m".into(),
        content: vec![ContentBlock::text("hi"), lookup_call("t", json!({}))],
        stop_reason: Some(StopReason::ToolUse),
        stop_sequence: None,
        usage: Usage::default(),
        container: None,
        extra: Extra::new(),
    };
    let deltas = turn_deltas(&turn);
    assert_eq!(deltas.len(), 2 + 3 + 3);
    assert!(matches!(deltas[0], Delta::TurnStart { .. }));
    assert!(matches!(deltas.last(), Some(Delta::TurnEnd { .. })));
}
