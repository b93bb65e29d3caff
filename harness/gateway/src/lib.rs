//! Cordon's model gateway: the loop between a client speaking the Anthropic Messages API
//! and any upstream model (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses,
//! or a recorded script).
//!
//! The gateway decodes the client's request into the canonical conversation
//! (`cordon_protocol::conversation`), checks tool-call pairing before anything runs, asks
//! the upstream in its own API, and runs server tools itself:
//!
//! - operator tools (a tools file): `allow` inline, `ask` handed to the client for
//!   approval (a `cordon_approval` block answers), validation errors back to the model;
//! - code execution (`code_execution_20250825` / `_20260120`) in Cordon's sandbox, with
//!   client tools callable from the program: the program suspends on them, the client
//!   answers, the program resumes in its container;
//! - computer use, when the caller binds a computer ([`Computers`]).
//!
//! Client tools go back to the client as `tool_use` blocks. At most
//! [`GatewayOptions::max_tool_rounds`] model turns run per client request.
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use cordon_gateway::{Gateway, GatewayOptions, MessagesCall, script::ScriptUpstream};
//!
//! let script = ScriptUpstream::parse(r#"{"content": [{"type": "text", "text": "hi"}]}"#, "demo")
//!     .expect("a valid script");
//! let gateway = Gateway::new(Arc::new(script), GatewayOptions::default());
//! let reply = gateway
//!     .messages(MessagesCall::new(serde_json::json!({
//!         "model": "m", "max_tokens": 100,
//!         "messages": [{"role": "user", "content": "Hello"}],
//!     })))
//!     .await;
//! assert_eq!(reply.status, 200);
//! assert_eq!(reply.body["content"][0]["text"], "hi");
//! # }
//! ```

mod call_ids;
mod computer;
mod continuation;
mod kept;
mod ptc;
pub mod record;
mod run;
pub mod script;
pub mod session;
pub mod sse;
pub mod upstream;

use std::sync::Arc;
use std::time::Duration;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::conversation::Turn;
use cordon_protocol::conversation::stream::{
    Event, anthropic_events, chat_events, responses_events,
};
use cordon_sandbox::Sandbox;
use serde_json::Value;

pub use computer::{ComputerOutcome, Computers};
pub use ptc::{ContainerError, ProgramCall};
pub use record::{Entry, MemoryRecorder, NoRecorder, Recorder};
pub use upstream::{Api, Credential, HttpUpstream, Upstream, UpstreamError};

/// Model turns per client request unless told otherwise.
pub const DEFAULT_MAX_TOOL_ROUNDS: u32 = 20;
/// How long an idle code-execution container lives unless told otherwise.
pub const DEFAULT_CONTAINER_TTL: Duration = Duration::from_secs(30 * 60);
/// How long a program waits for the client's tool results unless told otherwise.
pub const DEFAULT_PROGRAM_WAIT: Duration = Duration::from_secs(5 * 60);
/// Code-execution containers alive at once unless told otherwise.
pub const DEFAULT_MAX_CONTAINERS: usize = 32;

/// How the gateway behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Model turns per client request; at the cap the response says so.
    pub max_tool_rounds: u32,
    /// Idle time after which a code-execution container expires.
    pub container_ttl: Duration,
    /// How long a program suspended on client tools waits for their results (at most
    /// [`Self::container_ttl`]); past it the calls fail inside the program.
    pub program_wait: Duration,
    /// Containers alive at once (each holds a sandbox instance); a new one closes the least
    /// recently used, idle ones first. Keep it below the sandbox's instance limit.
    pub max_containers: usize,
    /// Forward the client's own key to the upstream (off when the client's credential is
    /// the server's own token).
    pub forward_client_key: bool,
    /// The language of code execution's programs: `python` (CPython with numpy, pandas and
    /// matplotlib) by default, `python-lite` (RustPython) or `javascript`.
    pub code_language: cordon_protocol::execution::Language,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            max_tool_rounds: DEFAULT_MAX_TOOL_ROUNDS,
            container_ttl: DEFAULT_CONTAINER_TTL,
            program_wait: DEFAULT_PROGRAM_WAIT,
            max_containers: DEFAULT_MAX_CONTAINERS,
            forward_client_key: true,
            code_language: cordon_protocol::execution::Language::Python,
        }
    }
}

impl GatewayOptions {
    /// Sets [`Self::max_tool_rounds`] (at least 1).
    pub fn max_tool_rounds(mut self, rounds: u32) -> Self {
        self.max_tool_rounds = rounds.max(1);
        self
    }

    /// Sets [`Self::container_ttl`].
    pub fn container_ttl(mut self, ttl: Duration) -> Self {
        self.container_ttl = ttl;
        self
    }

    /// Sets [`Self::program_wait`].
    pub fn program_wait(mut self, wait: Duration) -> Self {
        self.program_wait = wait;
        self
    }

    /// Sets [`Self::max_containers`] (at least 1).
    pub fn max_containers(mut self, count: usize) -> Self {
        self.max_containers = count.max(1);
        self
    }

    /// Sets [`Self::code_language`].
    pub fn code_language(mut self, language: cordon_protocol::execution::Language) -> Self {
        self.code_language = language;
        self
    }

    /// Sets [`Self::forward_client_key`].
    pub fn forward_client_key(mut self, forward: bool) -> Self {
        self.forward_client_key = forward;
        self
    }
}

/// The model gateway. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    upstream: Arc<dyn Upstream>,
    operator: Option<Dispatcher>,
    containers: ptc::Containers,
    recorder: Arc<dyn Recorder>,
    computers: Option<Arc<dyn Computers>>,
    options: GatewayOptions,
    /// Calls that ran inline in a turn handed to the client, by that turn's client calls.
    stash: run::Stash,
    /// Calls handed to the client for approval, until answered.
    asks: run::Asks,
    /// Turns handed to the client with calls to answer, for joining their continuations.
    continuations: continuation::Continuations,
}

impl Gateway {
    /// A gateway to `upstream` with no server tools, no sandbox and no recording.
    pub fn new(upstream: Arc<dyn Upstream>, options: GatewayOptions) -> Self {
        Self::build(upstream, options, None, None, Arc::new(NoRecorder), None)
    }

    fn build(
        upstream: Arc<dyn Upstream>,
        options: GatewayOptions,
        operator: Option<Dispatcher>,
        sandbox: Option<Sandbox>,
        recorder: Arc<dyn Recorder>,
        computers: Option<Arc<dyn Computers>>,
    ) -> Self {
        Gateway {
            inner: Arc::new(Inner {
                upstream,
                operator,
                containers: ptc::Containers::new(
                    sandbox,
                    options.container_ttl,
                    options.program_wait,
                    options.max_containers,
                    options.code_language,
                ),
                recorder,
                computers,
                options,
                stash: run::Stash::default(),
                asks: run::Asks::default(),
                continuations: continuation::Continuations::default(),
            }),
        }
    }

    fn rebuild(self, f: impl FnOnce(&mut Parts)) -> Self {
        let inner = &self.inner;
        let mut parts = Parts {
            operator: inner.operator.clone(),
            sandbox: inner.containers.sandbox(),
            recorder: inner.recorder.clone(),
            computers: inner.computers.clone(),
        };
        f(&mut parts);
        Self::build(
            inner.upstream.clone(),
            inner.options.clone(),
            parts.operator,
            parts.sandbox,
            parts.recorder,
            parts.computers,
        )
    }

    /// Operator server tools (a tools file's registry).
    pub fn with_operator_tools(self, registry: ToolRegistry) -> Self {
        self.rebuild(|p| p.operator = Some(Dispatcher::new(Arc::new(registry))))
    }

    /// The sandbox code execution runs in (without it, code-execution tools are refused).
    pub fn with_sandbox(self, sandbox: Sandbox) -> Self {
        self.rebuild(|p| p.sandbox = Some(sandbox))
    }

    /// Where conversations are recorded.
    pub fn with_recorder(self, recorder: Arc<dyn Recorder>) -> Self {
        self.rebuild(|p| p.recorder = recorder)
    }

    /// What runs computer-use actions for requests that bind a computer.
    pub fn with_computers(self, computers: Arc<dyn Computers>) -> Self {
        self.rebuild(|p| p.computers = Some(computers))
    }

    /// The upstream, as `API=URL`.
    pub fn upstream(&self) -> String {
        self.inner.upstream.describe()
    }

    /// The reply to a request body that could not be read at all (not JSON, not an
    /// object): a 400 `invalid_request_error` in `api`'s shape, in a conversation of its own.
    pub fn reject(&self, api: Api, message: &str) -> MessagesReply {
        run::reject(&self.inner, api, message)
    }

    /// Answers one client request: `POST /v1/messages`, `/v1/chat/completions` or
    /// `/v1/responses` (the call's [`MessagesCall::api`]).
    pub async fn messages(&self, call: MessagesCall) -> MessagesReply {
        run::messages(&self.inner, call).await
    }
}

struct Parts {
    operator: Option<Dispatcher>,
    sandbox: Option<Sandbox>,
    recorder: Arc<dyn Recorder>,
    computers: Option<Arc<dyn Computers>>,
}

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
        }
    }
}
