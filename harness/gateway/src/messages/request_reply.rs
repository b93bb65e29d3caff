//! One client request of this front door ([`MessagesCall`]) and the answer to it
//! ([`MessagesReply`]).

use cordon_protocol::conversation::Turn;
use cordon_protocol::conversation::stream::{
    Event, anthropic_events, chat_events, gemini_events, responses_events,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::upstream::{Api, Credential};

/// One client request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MessagesCall {
    /// The request body (Anthropic Messages).
    pub body: Value,
    /// The client's own key, forwarded when the gateway has none of its own.
    pub credential: Option<Credential>,
    /// `x-cordon-conversation-id` sent by the client.
    pub conversation: Option<String>,
    /// `x-cordon-computer`: a computer id or a URL to open one on.
    pub computer: Option<String>,
    /// The API the client speaks (the body's shape, the answer's, the errors').
    pub api: Api,
}

impl MessagesCall {
    /// A call with just a body.
    pub fn new(body: Value) -> Self {
        MessagesCall {
            body,
            credential: None,
            conversation: None,
            computer: None,
            api: Api::Anthropic,
        }
    }

    /// Sets the API the client speaks.
    pub fn api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }

    /// Sets the client's credential.
    pub fn credential(mut self, credential: Option<Credential>) -> Self {
        self.credential = credential;
        self
    }

    /// Sets the conversation the client continues.
    pub fn conversation(mut self, id: Option<String>) -> Self {
        self.conversation = id;
        self
    }

    /// Sets the computer binding.
    pub fn computer(mut self, computer: Option<String>) -> Self {
        self.computer = computer;
        self
    }
}

/// The answer to one client request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MessagesReply {
    /// HTTP status.
    pub status: u16,
    /// The response body: a message, or an Anthropic error body.
    pub body: Value,
    /// The turn behind `body` (successful replies).
    pub turn: Option<Turn>,
    /// The conversation it belongs to (`x-cordon-conversation-id`).
    pub conversation_id: String,
    /// Why the loop stopped early, for `x-cordon-stop` (`max_tool_rounds`).
    pub stop: Option<&'static str>,
    /// The bound computer, for `x-cordon-computer`.
    pub computer: Option<String>,
    /// The client asked for a stream.
    pub stream: bool,
    /// The API the client speaks.
    pub api: Api,
}

impl MessagesReply {
    /// The response as stream events of the client's API (successful replies). Chat's
    /// events have no name and end with the `[DONE]` string.
    pub fn events(&self) -> Vec<Event> {
        let Some(turn) = &self.turn else {
            return Vec::new();
        };
        match self.api {
            Api::Anthropic => anthropic_events(turn),
            Api::OpenaiChat => chat_events(turn),
            Api::OpenaiResponses => responses_events(turn),
            Api::Gemini => gemini_events(turn),
        }
    }
}

/// What a streamed reply's HTTP head carries, known before its first byte.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StreamHead {
    /// The conversation it belongs to (`x-cordon-conversation-id`).
    pub conversation_id: String,
    /// The bound computer, for `x-cordon-computer`.
    pub computer: Option<String>,
}

/// A reply being streamed: its head, then the client API's events as they come.
#[derive(Debug)]
#[non_exhaustive]
pub struct LiveStream {
    /// The head, sent before the first event.
    pub head: StreamHead,
    /// The events in the client's API (Chat's without names, ending with `[DONE]`); the
    /// channel closes when the reply is complete and recorded.
    pub events: mpsc::UnboundedReceiver<Event>,
}

/// The answer to a client request: streamed as it is made, or whole (a request that did
/// not ask for a stream, or one that failed before its first byte).
#[derive(Debug)]
#[non_exhaustive]
pub enum MessagesAnswer {
    /// The whole reply.
    Whole(Box<MessagesReply>),
    /// The reply streaming.
    Live(LiveStream),
}
