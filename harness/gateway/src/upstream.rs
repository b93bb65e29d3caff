//! Upstream models: the trait the loop calls, and HTTP clients for the vendor APIs
//! (Anthropic Messages, OpenAI Chat Completions and Responses, Gemini `generateContent`).

use std::fmt;
use std::time::Duration;

use cordon_protocol::conversation::stream::{
    Accumulator, AnthropicAccumulator, ChatAccumulator, Delta, DeltaSink, GeminiAccumulator,
    Progress, ResponsesAccumulator, turn_deltas,
};
use cordon_protocol::conversation::{
    ContentBlock, ConversionError, Request, Turn, anthropic, chat, gemini, responses,
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::gemini_upstream;
use crate::sse::SseParser;

/// The vendor API an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Api {
    /// Anthropic Messages: POST `URL/v1/messages`.
    Anthropic,
    /// OpenAI Chat Completions: POST `URL/chat/completions`.
    OpenaiChat,
    /// OpenAI Responses: POST `URL/responses`.
    OpenaiResponses,
    /// Gemini: POST `URL/v1beta/models/{model}:generateContent` (or
    /// `:streamGenerateContent?alt=sse`).
    Gemini,
}

impl Api {
    /// Parses `anthropic`, `openai-chat`, `openai-responses`, `gemini`.
    pub fn parse(name: &str) -> Option<Api> {
        match name {
            "anthropic" => Some(Api::Anthropic),
            "openai-chat" | "openai_chat" | "chat" => Some(Api::OpenaiChat),
            "openai-responses" | "openai_responses" | "responses" => Some(Api::OpenaiResponses),
            "gemini" | "google" => Some(Api::Gemini),
            _ => None,
        }
    }

    /// The conversation vendor whose shapes this API uses.
    pub fn vendor(self) -> cordon_protocol::conversation::Vendor {
        use cordon_protocol::conversation::Vendor;
        match self {
            Api::Anthropic => Vendor::Anthropic,
            Api::OpenaiChat => Vendor::OpenaiChat,
            Api::OpenaiResponses => Vendor::OpenaiResponses,
            Api::Gemini => Vendor::Gemini,
        }
    }

    /// The API's name in messages (`Messages`, `Chat Completions`, `Responses`).
    pub fn title(self) -> &'static str {
        match self {
            Api::Anthropic => "Messages",
            Api::OpenaiChat => "Chat Completions",
            Api::OpenaiResponses => "Responses",
            Api::Gemini => "Gemini generateContent",
        }
    }

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenaiChat => "openai-chat",
            Api::OpenaiResponses => "openai-responses",
            Api::Gemini => "gemini",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Api::Anthropic => "/v1/messages",
            Api::OpenaiChat => "/chat/completions",
            Api::OpenaiResponses => "/responses",
            // The model and method follow (`gemini_upstream::url`).
            Api::Gemini => "/v1beta/models",
        }
    }
}

/// A credential for the upstream: the operator's key, or the client's own.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(pub String);

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(…)")
    }
}

/// Why an upstream call failed. Every variant is a transport or upstream fault: none goes
/// into the conversation; the client gets it as an error response.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The upstream answered with an error status.
    #[error("the upstream answered {status}: {message}")]
    Status {
        /// Its HTTP status.
        status: u16,
        /// Its error message (from its error body, or the body itself).
        message: String,
    },
    /// It could not be reached, or its answer could not be read.
    #[error("the upstream model is unreachable: {0}")]
    Unreachable(String),
    /// It did not answer within the timeout.
    #[error("the upstream model did not answer within {0:?}")]
    Timeout(Duration),
    /// Its answer is not a valid turn in its API.
    #[error("the upstream's answer is not valid: {0}")]
    InvalidAnswer(String),
    /// It refused the server's own credential (or the lack of one): the operator's fault,
    /// not the client's, so the client is not told its key is wrong.
    #[error(
        "the upstream refused this server's credential ({status}): {message}; the operator must \
         check --upstream-key-env"
    )]
    Refused {
        /// Its HTTP status (401 or 403).
        status: u16,
        /// Its error message.
        message: String,
    },
}

impl UpstreamError {
    /// The status and Anthropic error type the client gets.
    pub fn status_and_kind(&self) -> (u16, &'static str) {
        match self {
            UpstreamError::Status { status, .. } => (*status, kind_for_status(*status)),
            UpstreamError::Unreachable(_)
            | UpstreamError::InvalidAnswer(_)
            | UpstreamError::Refused { .. } => (502, "api_error"),
            UpstreamError::Timeout(_) => (504, "api_error"),
        }
    }
}

/// Anthropic's error type for an HTTP status.
pub fn kind_for_status(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// Bytes of one upstream answer read at most (a JSON turn, an error body, a whole stream).
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// A model Cordon asks for turns.
pub trait Upstream: Send + Sync + fmt::Debug {
    /// One model turn for `request` (`request.stream` says whether to stream it).
    fn call<'a>(
        &'a self,
        request: &'a Request,
        credential: Option<&'a Credential>,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>>;

    /// One model turn for a streamed `request`, handing `sink` the turn's canonical
    /// deltas as they arrive (each block's `BlockStop` before the next event is read). The
    /// turn returned holds the blocks the deltas stopped, in index order: what went out.
    ///
    /// The default asks [`call`](Upstream::call) for the whole turn and hands its deltas
    /// at once, for upstreams that do not stream (a script).
    fn call_streaming<'a>(
        &'a self,
        request: &'a Request,
        credential: Option<&'a Credential>,
        sink: &'a mut dyn DeltaSink,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(async move {
            let turn = self.call(request, credential).await?;
            for delta in turn_deltas(&turn) {
                sink.send(delta);
            }
            Ok(turn)
        })
    }

    /// `API=URL`, for records and messages.
    fn describe(&self) -> String;

    /// The API it speaks: vendor built-in tools (computer use) reach only their vendor,
    /// other upstreams get a function tool instead.
    fn api(&self) -> Api {
        Api::Anthropic
    }
}

/// An upstream reached over HTTP in one of the three APIs.
#[derive(Debug, Clone)]
pub struct HttpUpstream {
    api: Api,
    url: String,
    client: reqwest::Client,
    timeout: Duration,
    key: Option<Credential>,
    /// Headers sent with every call (an `anthropic-beta` a tool needs).
    headers: Vec<(String, String)>,
}

impl HttpUpstream {
    /// An upstream at `url` (the vendor SDK's `base_url`) with a timeout per call.
    pub fn new(api: Api, url: &str, timeout: Duration) -> Result<Self, UpstreamError> {
        let client = reqwest::Client::builder()
            // A redirect would carry the key to wherever the upstream points; vendor APIs do
            // not redirect, so none is followed.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| UpstreamError::Unreachable(format!("HTTP client setup: {e}")))?;
        Ok(HttpUpstream {
            api,
            url: url.trim_end_matches('/').to_owned(),
            client,
            timeout,
            key: None,
            headers: Vec::new(),
        })
    }

    /// Sends the header `name: value` with every call (a beta a vendor tool needs).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Uses this key for every call instead of the client's.
    pub fn with_key(mut self, key: Option<Credential>) -> Self {
        self.key = key;
        self
    }

    fn body(&self, request: &Request) -> Value {
        match self.api {
            Api::Anthropic => anthropic::encode_request(request),
            Api::OpenaiChat => {
                let mut body = chat::encode_request(request);
                if request.stream {
                    body["stream_options"] = json!({"include_usage": true});
                }
                body
            }
            Api::OpenaiResponses => responses::encode_request(request),
            Api::Gemini => gemini::encode_request(request),
        }
    }

    async fn send(
        &self,
        request: &Request,
        credential: Option<&Credential>,
        mut sink: Option<&mut dyn DeltaSink>,
    ) -> Result<Turn, UpstreamError> {
        let body = self.body(request);
        // Read the answer as a stream only when this very body asked for one.
        let asked_stream = body.get("stream") == Some(&Value::Bool(true))
            || (self.api == Api::Gemini && request.stream);
        let url = match self.api {
            Api::Gemini => gemini_upstream::url(&self.url, &request.model, request.stream),
            _ => format!("{}{}", self.url, self.api.path()),
        };
        // Where a Gemini turn numbers its calls without ids.
        let position = gemini_upstream::call_position();
        let mut http = self.client.post(url).json(&body);
        for (name, value) in &self.headers {
            http = http.header(name.as_str(), value.as_str());
        }
        // Whose key reaches the upstream: a 401/403 is the client's to fix only when it is theirs.
        let clients_key = self.key.is_none() && credential.is_some();
        let credential = self.key.as_ref().or(credential);
        match self.api {
            Api::Anthropic => {
                http = http.header("anthropic-version", "2023-06-01");
                if let Some(Credential(key)) = credential {
                    http = http.header("x-api-key", key);
                }
            }
            Api::OpenaiChat | Api::OpenaiResponses => {
                if let Some(Credential(key)) = credential {
                    http = http.bearer_auth(key);
                }
            }
            Api::Gemini => {
                if let Some(Credential(key)) = credential {
                    http = http.header("x-goog-api-key", key);
                }
            }
        }
        let mut response = http.send().await.map_err(|e| self.transport(e))?;
        let status = response.status().as_u16();
        if !(200..300).contains(&status) {
            let text = read_bounded(&mut response, 64 * 1024)
                .await
                .unwrap_or_default();
            let message = error_message(&text);
            if matches!(status, 401 | 403) && !clients_key {
                return Err(UpstreamError::Refused { status, message });
            }
            if (300..400).contains(&status) {
                return Err(UpstreamError::Unreachable(format!(
                    "the upstream answered {status} (a redirect, not followed: point --upstream at \
                     the final address)"
                )));
            }
            return Err(UpstreamError::Status { status, message });
        }
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse && !asked_stream {
            // Taking it would let the upstream pick the decoder: a whole turn was asked for.
            return Err(UpstreamError::InvalidAnswer(
                "the upstream answered with a stream to a request that asked for none".into(),
            ));
        }
        // A JSON answer to a streamed request is read whole, with the same bound: some
        // servers ignore `stream`.
        if !is_sse {
            let text = read_bounded(&mut response, MAX_ANSWER_BYTES)
                .await
                .map_err(|e| self.read_failure(e))?;
            let body: Value = serde_json::from_str(&text)
                .map_err(|e| UpstreamError::InvalidAnswer(format!("not JSON: {e}")))?;
            let turn = match self.api {
                Api::Anthropic => anthropic::decode_response(&body),
                Api::OpenaiChat => chat::decode_response(&body),
                Api::OpenaiResponses => responses::decode_response(&body),
                Api::Gemini => gemini::decode_response_at(&body, &position),
            };
            let turn = turn.map_err(|e| UpstreamError::InvalidAnswer(e.to_string()))?;
            if let Some(sink) = sink {
                for delta in turn_deltas(&turn) {
                    sink.send(delta);
                }
            }
            return Ok(turn);
        }
        let mut accumulator: Box<dyn AccumulatorObj> = match self.api {
            Api::Anthropic => Box::new(AnthropicAccumulator::default()),
            Api::OpenaiChat => Box::new(ChatAccumulator::default()),
            Api::OpenaiResponses => Box::new(ResponsesAccumulator::default()),
            Api::Gemini => Box::new(GeminiAccumulator::at_position(&position)),
        };
        let mut parser = SseParser::default();
        let mut live = LiveBlocks::default();
        let mut done = false;
        let mut read = 0usize;
        while !done {
            let chunk = response.chunk().await.map_err(|e| self.transport(e))?;
            read += chunk.as_ref().map_or(0, |c| c.len());
            if read > MAX_ANSWER_BYTES {
                return Err(UpstreamError::InvalidAnswer(format!(
                    "the stream is longer than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            let events = match &chunk {
                Some(bytes) => parser.push(bytes),
                None => parser.finish().map(|e| e.into_iter().collect()),
            }
            .map_err(|e| UpstreamError::InvalidAnswer(e.to_string()))?;
            for (name, data) in events {
                if data.get("type").and_then(Value::as_str) == Some("ping") {
                    continue;
                }
                let pushed = accumulator.push_event(&name, &data, &mut live.deltas);
                if let Some(sink) = sink.as_deref_mut() {
                    live.forward(sink);
                }
                match pushed {
                    Ok(Progress::Done) => done = true,
                    Ok(_) => {}
                    // The upstream's own `error` event keeps its meaning.
                    Err(ConversionError::Upstream { message }) => {
                        return Err(UpstreamError::Status {
                            status: 500,
                            message,
                        });
                    }
                    // A stream past its bounds or out of protocol: this turn is abandoned,
                    // the gateway keeps serving.
                    Err(e) => return Err(UpstreamError::InvalidAnswer(e.to_string())),
                }
            }
            if chunk.is_none() {
                break;
            }
        }
        let mut turn = accumulator
            .finish_turn()
            .map_err(|e| UpstreamError::InvalidAnswer(e.to_string()))?;
        if let Some(sink) = sink {
            live.finish(&mut turn, sink);
        }
        Ok(turn)
    }

    fn read_failure(&self, error: ReadError) -> UpstreamError {
        match error {
            ReadError::Transport(e) => self.transport(e),
            ReadError::TooLarge(max) => {
                UpstreamError::InvalidAnswer(format!("the answer is longer than {max} bytes"))
            }
        }
    }

    fn transport(&self, error: reqwest::Error) -> UpstreamError {
        if error.is_timeout() {
            UpstreamError::Timeout(self.timeout)
        } else {
            // The URL is the operator's and may carry a key (userinfo, query): the error's
            // own text, without it, names the cause.
            let error = error.without_url();
            let mut text = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            UpstreamError::Unreachable(text)
        }
    }
}

/// Why a body could not be read in full.
enum ReadError {
    Transport(reqwest::Error),
    TooLarge(usize),
}

/// A response body as text, refusing one longer than `max` bytes before holding it.
async fn read_bounded(response: &mut reqwest::Response, max: usize) -> Result<String, ReadError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > max {
            return Err(ReadError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// `url` as it may be shown (records, logs, errors): without user info, query or fragment,
/// which is where keys hide.
pub fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let had_secret = !parsed.username().is_empty()
                || parsed.password().is_some()
                || parsed.query().is_some()
                || parsed.fragment().is_some();
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            let shown = parsed.as_str().trim_end_matches('/').to_owned();
            if had_secret {
                format!("{shown} (credentials and query hidden)")
            } else {
                shown
            }
        }
        Err(_) => "(an upstream URL that does not parse)".to_owned(),
    }
}

/// The accumulators behind one object type (their `finish` takes `self`).
trait AccumulatorObj: Send {
    fn push_event(
        &mut self,
        name: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress, ConversionError>;
    fn finish_turn(self: Box<Self>) -> Result<Turn, ConversionError>;
}

impl<A: Accumulator + Send> AccumulatorObj for A {
    fn push_event(
        &mut self,
        name: &str,
        data: &Value,
        deltas: &mut Vec<Delta>,
    ) -> Result<Progress, ConversionError> {
        self.push_deltas(name, data, deltas)
    }

    fn finish_turn(self: Box<Self>) -> Result<Turn, ConversionError> {
        (*self).finish()
    }
}

/// The message of a vendor error body (Anthropic's or OpenAI's shape), else the body.
fn error_message(text: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    message.unwrap_or_else(|| {
        let text = text.trim();
        if text.is_empty() {
            "(empty body)".to_owned()
        } else {
            text.chars().take(2000).collect()
        }
    })
}

/// The deltas of one streamed answer on their way to the sink, and the blocks they stopped.
#[derive(Default)]
struct LiveBlocks {
    /// Deltas of the event being read, not yet forwarded.
    deltas: Vec<Delta>,
    /// Any delta went out.
    sent: bool,
    stopped: Vec<(usize, ContentBlock)>,
}

impl LiveBlocks {
    fn forward(&mut self, sink: &mut dyn DeltaSink) {
        for delta in self.deltas.drain(..) {
            self.sent = true;
            if let Delta::BlockStop { index, block } = &delta {
                self.stopped.push((*index, block.clone()));
            }
            sink.send(delta);
        }
    }

    /// The turn holds what went out; an accumulator that told no deltas has its turn told
    /// whole now.
    fn finish(mut self, turn: &mut Turn, sink: &mut dyn DeltaSink) {
        if !self.sent {
            for delta in turn_deltas(turn) {
                sink.send(delta);
            }
            return;
        }
        // A stream cut short may leave blocks unstopped: the accumulator's turn stands then.
        if self.stopped.len() == turn.content.len() {
            self.stopped.sort_by_key(|(index, _)| *index);
            turn.content = self.stopped.into_iter().map(|(_, block)| block).collect();
        }
    }
}

impl Upstream for HttpUpstream {
    fn call<'a>(
        &'a self,
        request: &'a Request,
        credential: Option<&'a Credential>,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(self.send(request, credential, None))
    }

    fn call_streaming<'a>(
        &'a self,
        request: &'a Request,
        credential: Option<&'a Credential>,
        sink: &'a mut dyn DeltaSink,
    ) -> BoxFuture<'a, Result<Turn, UpstreamError>> {
        Box::pin(self.send(request, credential, Some(sink)))
    }

    fn describe(&self) -> String {
        format!("{}={}", self.api.as_str(), redacted(&self.url))
    }

    fn api(&self) -> Api {
        self.api
    }
}
