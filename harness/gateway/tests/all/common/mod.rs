//! A stand-in model server speaking the three vendor APIs, and gateway fixtures.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use cordon_gateway::{Api, Gateway, GatewayOptions, HttpUpstream, MemoryRecorder, MessagesCall};
use cordon_protocol::conversation::stream::{anthropic_events, chat_events, responses_events};
use cordon_protocol::conversation::{Turn, anthropic, chat, responses};
use serde_json::{Value, json};

/// What the stand-in answers next.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A turn, given in Anthropic response shape, encoded in the API asked.
    Turn(Value),
    /// An error status and body.
    Error(u16, Value),
    /// Wait this long, then answer the turn.
    Slow(Duration, Value),
    /// A turn given in canonical form (for blocks the Anthropic shape cannot state, like
    /// another vendor's reasoning).
    Native(Box<Turn>),
}

#[derive(Debug, Default)]
pub struct Seen {
    /// Request bodies received, in order.
    pub bodies: Vec<Value>,
    /// `x-api-key` or `authorization` headers received.
    pub keys: Vec<Option<String>>,
}

/// A model server on 127.0.0.1 replaying queued answers.
#[derive(Clone)]
pub struct StandIn {
    pub url: String,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    pub seen: Arc<Mutex<Seen>>,
    _stop: Arc<tokio::sync::oneshot::Sender<()>>,
}

type Shared = (Arc<Mutex<VecDeque<Answer>>>, Arc<Mutex<Seen>>);

impl StandIn {
    pub async fn start() -> StandIn {
        let answers = Arc::new(Mutex::new(VecDeque::new()));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let state: Shared = (answers.clone(), seen.clone());
        let app = Router::new()
            .route(
                "/v1/messages",
                post(|s, h, b| answer(s, h, b, Api::Anthropic)),
            )
            .route(
                "/v1/chat/completions",
                post(|s, h, b| answer(s, h, b, Api::OpenaiChat)),
            )
            .route(
                "/v1/responses",
                post(|s, h, b| answer(s, h, b, Api::OpenaiResponses)),
            )
            .with_state(state);
        let (addr, tx) = serve_local(app).await;
        StandIn {
            url: format!("http://{addr}"),
            answers,
            seen,
            _stop: Arc::new(tx),
        }
    }

    pub fn push(&self, answer: Answer) -> &Self {
        self.answers.lock().unwrap().push_back(answer);
        self
    }

    pub fn turn(&self, content: Value) -> &Self {
        self.push(Answer::Turn(json!({"content": content})))
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.seen.lock().unwrap().bodies.clone()
    }

    /// The base URL for `api` (`/v1` for the OpenAI APIs, as their SDKs take it).
    pub fn base(&self, api: Api) -> String {
        match api {
            Api::Anthropic => self.url.clone(),
            _ => format!("{}/v1", self.url),
        }
    }
}

/// Serves `app` on a free port of 127.0.0.1 until the returned sender fires or is dropped;
/// returns the address it listens on.
pub async fn serve_local(app: Router) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    (addr, tx)
}

fn full_turn(value: &Value) -> Turn {
    let mut v = value.clone();
    let has_tool = v["content"]
        .as_array()
        .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use"));
    let defaults = json!({
        "id": "msg_standin", "type": "message", "role": "assistant", "model": "stand-in",
        "stop_reason": if has_tool { "tool_use" } else { "end_turn" },
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5},
    });
    for (k, d) in defaults.as_object().unwrap() {
        if v.get(k).is_none() {
            v[k] = d.clone();
        }
    }
    anthropic::decode_response(&v).unwrap()
}

async fn answer(
    State((answers, seen)): State<Shared>,
    headers: HeaderMap,
    body: String,
    api: Api,
) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    {
        let mut seen = seen.lock().unwrap();
        seen.bodies.push(body.clone());
        let key = headers
            .get("x-api-key")
            .or_else(|| headers.get("authorization"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        seen.keys.push(key);
    }
    let next = answers.lock().unwrap().pop_front();
    let turn = match next {
        None => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the stand-in has no answer queued",
            )
                .into_response();
        }
        Some(Answer::Error(status, body)) => {
            return (
                StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                body.to_string(),
            )
                .into_response();
        }
        Some(Answer::Slow(wait, value)) => {
            tokio::time::sleep(wait).await;
            full_turn(&value)
        }
        Some(Answer::Turn(value)) => full_turn(&value),
        Some(Answer::Native(turn)) => *turn,
    };
    if body["stream"] == true {
        let events = match api {
            Api::Anthropic => anthropic_events(&turn),
            Api::OpenaiChat => chat_events(&turn),
            _ => responses_events(&turn),
        };
        let mut text = String::new();
        for (name, data) in events {
            if !name.is_empty() {
                text.push_str(&format!("event: {name}\n"));
            }
            let data = match data {
                Value::String(s) => s,
                other => other.to_string(),
            };
            text.push_str(&format!("data: {data}\n\n"));
        }
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from(text))
            .unwrap();
    }
    let encoded = match api {
        Api::Anthropic => anthropic::encode_response(&turn),
        Api::OpenaiChat => chat::encode_response(&turn),
        _ => responses::encode_response(&turn),
    };
    axum::Json(encoded).into_response()
}

/// A gateway to the stand-in in `api`, recording in memory.
pub fn gateway(
    standin: &StandIn,
    api: Api,
    options: GatewayOptions,
) -> (Gateway, Arc<MemoryRecorder>) {
    let upstream = HttpUpstream::new(api, &standin.base(api), Duration::from_secs(10)).unwrap();
    let recorder = Arc::new(MemoryRecorder::default());
    let gateway = Gateway::new(Arc::new(upstream), options).with_recorder(recorder.clone());
    (gateway, recorder)
}

/// A client request body.
pub fn request(messages: Value, tools: Value) -> Value {
    json!({"model": "stand-in", "max_tokens": 1024, "messages": messages, "tools": tools})
}

pub fn weather_tools() -> Value {
    json!([
        {"name": "get_weather", "description": "Weather in a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"name": "get_time", "description": "Time in a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    ])
}

pub async fn send(gateway: &Gateway, body: Value) -> cordon_gateway::MessagesReply {
    gateway.messages(MessagesCall::new(body)).await
}

/// Runs one session-protocol turn, collecting its events.
pub async fn session_turn(
    gw: &Gateway,
    state: &mut cordon_gateway::session::SessionState,
    input: cordon_gateway::session::SessionInput,
) -> Vec<cordon_gateway::session::SessionEvent> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    gw.session_turn(state, input, None, &tx).await;
    drop(tx);
    let mut events = Vec::new();
    while let Some(event) = rx.recv().await {
        events.push(event);
    }
    events
}
