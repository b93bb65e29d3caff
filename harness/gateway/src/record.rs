//! Conversation records: what the gateway tells its store about each step.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};

/// One recorded step of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// `request`, `model_turn`, `tool_call`, `tool_result`, `approval`, `response`, `error`.
    pub kind: &'static str,
    /// The tool call it is about (tool calls, results, approvals).
    pub call_id: Option<String>,
    /// The model round within the client request (model turns).
    pub round: Option<u32>,
    /// How long it took, in milliseconds (model turns, tool results, responses).
    pub duration_ms: Option<u64>,
    /// The step itself.
    pub data: Value,
}

/// Longest string kept in a record: longer ones (screenshots, big tool outputs) are
/// replaced by their length, so a conversation's record grows with its steps, not with
/// the images in them.
pub const MAX_RECORDED_STRING: usize = 64 * 1024;

impl Entry {
    /// An entry of `kind` with `data` (strings past [`MAX_RECORDED_STRING`] left out).
    pub fn new(kind: &'static str, mut data: Value) -> Self {
        shrink(&mut data);
        Entry {
            kind,
            call_id: None,
            round: None,
            duration_ms: None,
            data,
        }
    }

    /// Sets the call id.
    pub fn call(mut self, id: &str) -> Self {
        self.call_id = Some(id.to_owned());
        self
    }

    /// Sets the round.
    pub fn round(mut self, round: u32) -> Self {
        self.round = Some(round);
        self
    }

    /// Sets the duration.
    pub fn took(mut self, started: std::time::Instant) -> Self {
        self.duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        self
    }
}

fn shrink(value: &mut Value) {
    match value {
        Value::String(text) if text.len() > MAX_RECORDED_STRING => {
            *text = format!("[{} bytes not recorded]", text.len());
        }
        Value::Array(items) => items.iter_mut().for_each(shrink),
        Value::Object(fields) => fields.values_mut().for_each(shrink),
        _ => {}
    }
}

/// What is recorded of a client request: its messages from the last assistant turn on
/// (the earlier ones are in the record already, each request resends them), with where
/// they start in the whole list.
pub fn request_record(body: &Value) -> Value {
    let mut record = body.clone();
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        let from = messages
            .iter()
            .rposition(|m| m["role"] == "assistant")
            .unwrap_or(0);
        record["messages"] = Value::Array(messages[from..].to_vec());
        record["messages_from"] = json!(from);
        record["messages_total"] = json!(messages.len());
    }
    record
}

/// Where conversations are recorded. Recording never fails a request: implementations
/// report their own failures.
pub trait Recorder: Send + Sync + std::fmt::Debug {
    /// A conversation starts (`upstream` is `API=URL`).
    fn begin(&self, conversation: &str, upstream: &str);
    /// Appends one entry.
    fn record(&self, conversation: &str, entry: Entry);
    /// Whether `conversation` was begun here (a client may only continue those).
    fn knows(&self, conversation: &str) -> bool;
    /// Keeps a Responses-API response for `previous_response_id`: the items it added to
    /// the conversation (the request's new input, then its output) and the response it
    /// continued. Without a place to keep them, `previous_response_id` is refused.
    fn keep_response(&self, _id: &str, _parent: Option<&str>, _items: &Value) {}
    /// A kept response: the response it continued and its items.
    fn response(&self, _id: &str) -> Option<(Option<String>, Value)> {
        None
    }
}

/// Records nothing (bench mode).
#[derive(Debug, Default)]
pub struct NoRecorder;

impl Recorder for NoRecorder {
    fn begin(&self, _conversation: &str, _upstream: &str) {}
    fn record(&self, _conversation: &str, _entry: Entry) {}
    fn knows(&self, _conversation: &str) -> bool {
        false
    }
}

/// Keeps conversations in memory (tests, library use).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    conversations: Mutex<HashMap<String, Vec<Entry>>>,
    responses: Mutex<HashMap<String, (Option<String>, Value)>>,
}

impl MemoryRecorder {
    /// The entries of a conversation.
    pub fn entries(&self, conversation: &str) -> Vec<Entry> {
        self.lock().get(conversation).cloned().unwrap_or_default()
    }

    /// A conversation as JSON (the shape of `GET /v1/conversations/{id}`, without times).
    pub fn to_json(&self, conversation: &str) -> Value {
        let entries: Vec<Value> = self
            .entries(conversation)
            .iter()
            .enumerate()
            .map(|(i, e)| {
                json!({"seq": i + 1, "kind": e.kind, "call_id": e.call_id, "round": e.round,
                       "duration_ms": e.duration_ms, "data": e.data})
            })
            .collect();
        json!({"id": conversation, "entries": entries})
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Entry>>> {
        self.conversations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Recorder for MemoryRecorder {
    fn begin(&self, conversation: &str, _upstream: &str) {
        self.lock().entry(conversation.to_owned()).or_default();
    }

    fn record(&self, conversation: &str, entry: Entry) {
        self.lock()
            .entry(conversation.to_owned())
            .or_default()
            .push(entry);
    }

    fn knows(&self, conversation: &str) -> bool {
        self.lock().contains_key(conversation)
    }

    fn keep_response(&self, id: &str, parent: Option<&str>, items: &Value) {
        self.responses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned(), (parent.map(str::to_owned), items.clone()));
    }

    fn response(&self, id: &str) -> Option<(Option<String>, Value)> {
        self.responses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }
}
