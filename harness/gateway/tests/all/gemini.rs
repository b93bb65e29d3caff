//! Gemini through the gateway: a Gemini upstream (a stand-in speaking `generateContent` and
//! `streamGenerateContent?alt=sse` over HTTP) from each client API, and a Gemini client to
//! each upstream API.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cordon_gateway::{Api, Gateway, GatewayOptions, HttpUpstream, MessagesCall};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{StandIn, gateway, request, send, serve_local, weather_tools};

/// One request the Gemini stand-in received.
#[derive(Debug, Clone)]
struct Received {
    /// `{model}:{method}` and the query.
    path: String,
    key: Option<String>,
    body: Value,
}

type Shared = (Arc<Mutex<VecDeque<Value>>>, Arc<Mutex<Vec<Received>>>);

/// A Gemini model server on 127.0.0.1 answering queued `GenerateContentResponse`s, whole
/// or as SSE chunks (text cut in two, one part per chunk, the finish reason last) as the
/// real API streams them.
struct GeminiStandIn {
    url: String,
    answers: Arc<Mutex<VecDeque<Value>>>,
    received: Arc<Mutex<Vec<Received>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl GeminiStandIn {
    async fn start() -> Self {
        let answers = Arc::new(Mutex::new(VecDeque::new()));
        let received = Arc::new(Mutex::new(Vec::new()));
        let state: Shared = (answers.clone(), received.clone());
        let app = Router::new()
            .route("/v1beta/models/{model_method}", post(answer))
            .with_state(state);
        let (addr, stop) = serve_local(app).await;
        GeminiStandIn {
            url: format!("http://{addr}"),
            answers,
            received,
            _stop: stop,
        }
    }

    fn push(&self, response: Value) {
        self.answers.lock().unwrap().push_back(response);
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    fn gateway(&self, key: Option<&str>) -> Gateway {
        let upstream = HttpUpstream::new(Api::Gemini, &self.url, Duration::from_secs(10))
            .unwrap()
            .with_key(key.map(|k| cordon_gateway::Credential(k.to_owned())));
        Gateway::new(Arc::new(upstream), GatewayOptions::default())
    }
}

async fn answer(
    State((answers, received)): State<Shared>,
    Path(model_method): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    received.lock().unwrap().push(Received {
        path: format!("{model_method}?{}", query.join("&")),
        key: headers
            .get("x-goog-api-key")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    let Some(response) = answers.lock().unwrap().pop_front() else {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"code": 500, "message": "no answer queued",
                                        "status": "INTERNAL"}})),
        )
            .into_response();
    };
    if response.get("error").is_some() {
        let code = response["error"]["code"].as_u64().unwrap_or(500) as u16;
        return (
            axum::http::StatusCode::from_u16(code).unwrap(),
            axum::Json(response),
        )
            .into_response();
    }
    if !model_method.ends_with(":streamGenerateContent") {
        return axum::Json(response).into_response();
    }
    let mut text = String::new();
    for chunk in chunks(&response) {
        text.push_str(&format!("data: {chunk}\r\n\r\n"));
    }
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

/// A response as stream chunks: each text part in two pieces, other parts whole, the
/// candidate's finish reason and the usage on the last chunk.
fn chunks(response: &Value) -> Vec<Value> {
    let head = |parts: Vec<Value>| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
               "modelVersion": response["modelVersion"], "responseId": response["responseId"]})
    };
    let mut out = Vec::new();
    for part in response["candidates"][0]["content"]["parts"]
        .as_array()
        .unwrap()
    {
        match part["text"].as_str() {
            Some(text) if part.get("thought").is_none() => {
                let cut = text.len() / 2;
                out.push(head(vec![json!({"text": &text[..cut]})]));
                let mut rest = part.clone();
                rest["text"] = json!(&text[cut..]);
                out.push(head(vec![rest]));
            }
            _ => out.push(head(vec![part.clone()])),
        }
    }
    let mut last = head(Vec::new());
    last["candidates"][0]["finishReason"] = response["candidates"][0]["finishReason"].clone();
    last["usageMetadata"] = response["usageMetadata"].clone();
    out.push(last);
    out
}

fn gemini_response(parts: Value) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                        "index": 0}],
        "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7,
                          "totalTokenCount": 18},
        "modelVersion": "gemini-stand-in",
        "responseId": "resp-standin"
    })
}

/// The model thinks, then calls two tools at once (no ids, as Gemini's API sends them),
/// the first call carrying the thought signature.
fn parallel_calls() -> Value {
    gemini_response(json!([
        {"text": "Checking Rome.", "thought": true},
        {"text": "Let me look."},
        {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
         "thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="},
        {"functionCall": {"name": "get_time", "args": {"city": "Rome"}}}
    ]))
}

/// An Anthropic client's two requests against a Gemini upstream: the calls get ids, the
/// thought signature goes back on the call it came with, and answers reach Gemini as
/// function responses named after their calls, without ids Gemini never gave.
async fn anthropic_client_round_trip(stream: bool) {
    let upstream = GeminiStandIn::start().await;
    upstream.push(parallel_calls());
    upstream.push(gemini_response(json!([{"text": "Sunny at noon."}])));
    let gw = upstream.gateway(Some("operator-key"));
    let question = json!({"role": "user", "content": "Rome?"});
    let mut body = request(json!([question]), weather_tools());
    body["model"] = json!("gemini-2.5-flash");
    body["stream"] = json!(stream);
    let reply = send(&gw, body.clone()).await;
    assert_eq!(reply.status, 200, "stream={stream}: {}", reply.body);
    assert_eq!(reply.body["stop_reason"], "tool_use");
    let content = reply.body["content"].as_array().unwrap().clone();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_use"], "{content:?}");
    assert_eq!(content[0]["text"], "Let me look.");
    let (first, second) = (content[1]["id"].clone(), content[2]["id"].clone());
    assert_ne!(first, second);
    assert_eq!(content[2]["input"], json!({"city": "Rome"}));

    let answer = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": first, "content": "sun"},
        {"type": "tool_result", "tool_use_id": second, "content": "noon"}
    ]});
    body["messages"] = json!([question, {"role": "assistant", "content": content}, answer]);
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Sunny at noon.");
    assert_eq!(reply.body["usage"]["output_tokens"], 7);

    let received = upstream.received();
    let method = if stream {
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    } else {
        "gemini-2.5-flash:generateContent?"
    };
    assert_eq!(received[0].path, method);
    assert_eq!(received[0].key.as_deref(), Some("operator-key"));
    assert_eq!(
        received[0].body["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_eq!(
        received[0].body["generationConfig"]["maxOutputTokens"],
        1024
    );
    assert_eq!(
        received[1].body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "Rome?"}]},
            {"role": "model", "parts": [
                {"text": "Checking Rome.", "thought": true},
                {"text": "Let me look."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
                 "thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="},
                {"functionCall": {"name": "get_time", "args": {"city": "Rome"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"result": "sun"}}},
                {"functionResponse": {"name": "get_time", "response": {"result": "noon"}}}
            ]}
        ])
    );
}

#[tokio::test]
async fn an_anthropic_client_reaches_a_gemini_upstream() {
    anthropic_client_round_trip(false).await;
    anthropic_client_round_trip(true).await;
}

#[tokio::test]
async fn openai_clients_reach_a_gemini_upstream() {
    for (api, body) in [
        (
            Api::OpenaiChat,
            json!({"model": "gemini-2.5-pro", "messages": [{"role": "user", "content": "Rome?"}],
                   "tools": [{"type": "function", "function": {"name": "get_weather",
                              "parameters": {"type": "object"}}}]}),
        ),
        (
            Api::OpenaiResponses,
            json!({"model": "gemini-2.5-pro", "input": "Rome?",
                   "tools": [{"type": "function", "name": "get_weather",
                              "parameters": {"type": "object"}}]}),
        ),
    ] {
        let upstream = GeminiStandIn::start().await;
        upstream.push(gemini_response(json!([
            {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
             "thoughtSignature": "c2ln"}
        ])));
        let gw = upstream.gateway(None);
        let reply = gw.messages(MessagesCall::new(body).api(api)).await;
        assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
        let text = reply.body.to_string();
        assert!(
            text.contains("get_weather") && text.contains("Rome"),
            "{text}"
        );
        // The client has no place for Gemini's signature.
        assert!(!text.contains("c2ln"), "{text}");
        assert_eq!(
            upstream.received()[0].path,
            "gemini-2.5-pro:generateContent?"
        );
    }
}

#[tokio::test]
async fn an_upstream_error_reaches_the_client_with_its_status() {
    let upstream = GeminiStandIn::start().await;
    upstream.push(json!({"error": {"code": 429, "message": "quota exhausted",
                                   "status": "RESOURCE_EXHAUSTED"}}));
    let gw = upstream.gateway(None);
    let call = MessagesCall::new(json!({"model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}))
    .api(Api::Gemini);
    let reply = gw.messages(call).await;
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], 429);
    assert_eq!(reply.body["error"]["status"], "RESOURCE_EXHAUSTED");
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quota exhausted")
    );
}

/// A Gemini client's conversation: a function call (with the id Cordon gave it) and the
/// client's answer without an id, paired by name, against every upstream API.
#[tokio::test]
async fn a_gemini_client_reaches_every_upstream_api() {
    let tools = json!([{"functionDeclarations": [{"name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}]);
    let question = json!({"role": "user", "parts": [{"text": "Rome?"}]});
    for api in [
        Api::Anthropic,
        Api::OpenaiChat,
        Api::OpenaiResponses,
        Api::Gemini,
    ] {
        for stream in [false, true] {
            let standin = StandIn::start().await;
            let gemini = GeminiStandIn::start().await;
            let gw = if api == Api::Gemini {
                gemini.push(gemini_response(json!([
                    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}},
                     "thoughtSignature": "c2ln"}])));
                gemini.push(gemini_response(json!([{"text": "Sunny."}])));
                gemini.gateway(None)
            } else {
                standin.turn(
                    json!([{"type": "tool_use", "id": "call_9", "name": "get_weather",
                                     "input": {"city": "Rome"}}]),
                );
                standin.turn(json!([{"type": "text", "text": "Sunny."}]));
                gateway(&standin, api, GatewayOptions::default()).0
            };
            let mut body = json!({"model": "gemini-2.5-flash", "contents": [question],
                                  "tools": tools,
                                  "generationConfig": {"maxOutputTokens": 300}});
            if stream {
                body["stream"] = json!(true);
            }
            let reply = gw
                .messages(
                    MessagesCall::new(body.clone())
                        .api(Api::Gemini)
                        .credential(Some(cordon_gateway::Credential("client-key".into()))),
                )
                .await;
            assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
            let model = reply.body["candidates"][0]["content"].clone();
            let call = &model["parts"][0]["functionCall"];
            assert_eq!(call["name"], "get_weather", "{api:?}: {model}");
            assert_eq!(call["args"], json!({"city": "Rome"}));
            assert!(call["id"].is_string(), "{api:?}: {model}");
            assert_eq!(reply.body["candidates"][0]["finishReason"], "STOP");
            if stream {
                let events = reply.events();
                assert!(events.iter().all(|(name, _)| name.is_empty()));
                let (_, last) = events.last().unwrap();
                assert_eq!(last["candidates"][0]["finishReason"], "STOP", "{events:?}");
            }

            // The SDK's usual answer: the model's content as it came, a response by name.
            body["contents"] = json!([question, model, {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"sky": "clear"}}}]}]);
            let reply = gw.messages(MessagesCall::new(body).api(Api::Gemini)).await;
            assert_eq!(reply.status, 200, "{api:?}: {}", reply.body);
            assert_eq!(
                reply.body["candidates"][0]["content"]["parts"][0]["text"], "Sunny.",
                "{api:?}"
            );
            let sent = if api == Api::Gemini {
                let received = gemini.received();
                let contents = &received[1].body["contents"];
                // The signature went back on its call; the id Cordon made did not.
                assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "c2ln");
                assert!(contents[1]["parts"][0]["functionCall"].get("id").is_none());
                assert_eq!(
                    contents[2]["parts"][0]["functionResponse"],
                    json!({"name": "get_weather", "response": {"sky": "clear"}})
                );
                assert_eq!(received[0].body["generationConfig"]["maxOutputTokens"], 300);
                contents.to_string()
            } else {
                standin.bodies()[1].to_string()
            };
            assert!(sent.contains("call_9") || api == Api::Gemini, "{sent}");
            assert!(sent.contains("clear"), "{api:?}: {sent}");
        }
    }
}

#[tokio::test]
async fn a_malformed_gemini_request_is_a_400_in_googles_shape() {
    let upstream = GeminiStandIn::start().await;
    let gw = upstream.gateway(None);
    let call =
        MessagesCall::new(json!({"model": "m", "contents": [{"role": "robot", "parts": []}]}))
            .api(Api::Gemini);
    let reply = gw.messages(call).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], 400);
    assert_eq!(reply.body["error"]["status"], "INVALID_ARGUMENT");
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("Gemini generateContent"), "{message}");
    assert!(message.contains("robot"), "{message}");
    let reply = gw.reject(Api::Gemini, "the body is not valid JSON");
    assert_eq!(reply.body["error"]["status"], "INVALID_ARGUMENT");
    assert!(upstream.received().is_empty());
}

/// Computers that record the actions they get and answer with a screenshot and a URL.
#[derive(Debug, Default)]
struct RecordingComputers {
    acted: Mutex<Vec<Value>>,
}

impl cordon_gateway::Computers for RecordingComputers {
    fn open<'a>(
        &'a self,
        _url: &'a str,
        _display: Option<(u64, u64)>,
    ) -> futures::future::BoxFuture<'a, Result<String, String>> {
        Box::pin(async { Ok("cmp_recording".to_owned()) })
    }

    fn exists<'a>(&'a self, id: &'a str) -> futures::future::BoxFuture<'a, bool> {
        Box::pin(async move { id == "cmp_recording" })
    }

    fn act<'a>(
        &'a self,
        _id: &'a str,
        input: &'a Value,
        _approved: bool,
    ) -> futures::future::BoxFuture<'a, Result<cordon_gateway::ComputerOutcome, String>> {
        Box::pin(async move {
            self.acted.lock().unwrap().push(input.clone());
            Ok(cordon_gateway::ComputerOutcome::Done {
                screenshot: Some(("image/png".to_owned(), "iVBORw0KGgo=".to_owned())),
                text: None,
                is_error: false,
            })
        })
    }

    fn current_url<'a>(&'a self, _id: &'a str) -> futures::future::BoxFuture<'a, Option<String>> {
        Box::pin(async { Some("http://page.test/#clicked".to_owned()) })
    }
}

/// A bound computer behind a Gemini upstream: the model is offered Gemini's own
/// `computerUse`, its `click_at` reaches the computer as a Gemini action, and the function
/// response carries the URL and the screenshot; an excluded function runs nothing.
#[tokio::test]
async fn gemini_computer_use_runs_on_the_bound_computer() {
    let upstream = GeminiStandIn::start().await;
    upstream.push(gemini_response(json!([
        {"functionCall": {"name": "click_at", "args": {"x": 500, "y": 250}}}])));
    upstream.push(gemini_response(json!([{"text": "Clicked."}])));
    let computers = Arc::new(RecordingComputers::default());
    let gw = upstream.gateway(None).with_computers(computers.clone());
    let body = json!({"model": "gemini-2.5-computer-use", "max_tokens": 100,
        "tools": [{"type": "computer_20251124", "name": "computer",
                   "display_width_px": 1024, "display_height_px": 640}],
        "messages": [{"role": "user", "content": "Press the button."}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_recording".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Clicked.");
    let received = upstream.received();
    assert_eq!(
        received[0].body["tools"],
        json!([{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}])
    );
    assert_eq!(
        *computers.acted.lock().unwrap(),
        vec![json!({"name": "click_at", "args": {"x": 500, "y": 250}})]
    );
    let answer = &received[1].body["contents"][2]["parts"][0]["functionResponse"];
    assert_eq!(
        *answer,
        json!({"name": "click_at", "response": {"url": "http://page.test/#clicked"},
               "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]})
    );

    // A Gemini client's declaration excludes `drag_and_drop`: the model's call of it is
    // refused to the model, and nothing runs.
    upstream.push(gemini_response(
        json!([{"functionCall": {"name": "drag_and_drop",
        "args": {"x": 1, "y": 2, "destination_x": 3, "destination_y": 4}}}]),
    ));
    upstream.push(gemini_response(json!([{"text": "Not allowed."}])));
    let body = json!({"model": "gemini-2.5-computer-use",
        "contents": [{"role": "user", "parts": [{"text": "Drag it."}]}],
        "tools": [{"computerUse": {"environment": "ENVIRONMENT_BROWSER",
                                   "excludedPredefinedFunctions": ["drag_and_drop"]}}]});
    let reply = gw
        .messages(
            MessagesCall::new(body)
                .api(Api::Gemini)
                .computer(Some("cmp_recording".into())),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(computers.acted.lock().unwrap().len(), 1, "nothing more ran");
    let received = upstream.received();
    assert_eq!(
        received[2].body["tools"][0]["computerUse"]["excludedPredefinedFunctions"],
        json!(["drag_and_drop"])
    );
    let refused = &received[3].body["contents"][2]["parts"][0]["functionResponse"]["response"];
    assert!(
        refused["error"].as_str().unwrap().contains("excluded"),
        "{refused}"
    );
}
