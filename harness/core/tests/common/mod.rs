//! Test DSL: tools files from `json!`, a context that records events, and a raw HTTP
//! server on loopback.

#![allow(dead_code, reason = "each test module uses a different subset")]

use std::sync::{Arc, Mutex};

use cordon_core::{CallContext, DispatchedCall, Dispatcher, EventSink, ToolRegistry};
use cordon_protocol::execution::ExecutionEvent;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// A registry from a list of tool objects (`{"tools": tools}`).
pub fn registry(tools: Value) -> ToolRegistry {
    ToolRegistry::from_json(&json!({ "tools": tools }).to_string(), "test.json")
        .expect("test tools are valid")
}

pub fn dispatcher(tools: Value) -> Dispatcher {
    Dispatcher::new(Arc::new(registry(tools)))
}

/// A static tool that accepts any object.
pub fn static_tool(name: &str, result: Value) -> Value {
    json!({"name": name, "handler": {"kind": "static", "result": result}})
}

/// A client tool that accepts any object.
pub fn client_tool(name: &str) -> Value {
    json!({"name": name, "handler": {"kind": "client"}})
}

/// A command tool running `sh -c script`.
pub fn sh_tool(name: &str, script: &str, timeout_ms: u64) -> Value {
    json!({"name": name, "handler": {"kind": "command", "argv": ["sh", "-c", script], "timeout_ms": timeout_ms}})
}

/// A call context whose events are kept for inspection.
pub struct Recorded {
    pub ctx: CallContext,
    pub events: UnboundedReceiver<ExecutionEvent>,
}

pub fn recorded(execution_id: &str) -> Recorded {
    let (tx, events) = unbounded_channel();
    let mut ctx = CallContext::new(execution_id);
    ctx.events = EventSink::new(tx);
    Recorded { ctx, events }
}

impl Recorded {
    /// Every event sent so far.
    pub fn drain(&mut self) -> Vec<ExecutionEvent> {
        let mut out = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            out.push(event);
        }
        out
    }

    /// Waits for the next event matching `pick`, discarding others.
    pub async fn wait_for<T>(&mut self, mut pick: impl FnMut(&ExecutionEvent) -> Option<T>) -> T {
        loop {
            let event = self.events.recv().await.expect("event channel open");
            if let Some(found) = pick(&event) {
                return found;
            }
        }
    }

    /// Waits for the next `execution.awaiting` and returns its pending ids.
    pub async fn awaiting(&mut self) -> Vec<String> {
        self.wait_for(|event| match event {
            ExecutionEvent::Awaiting { pending, .. } => Some(pending.clone()),
            _ => None,
        })
        .await
    }
}

/// One call through `call_batch`.
pub async fn call_one(
    dispatcher: &Dispatcher,
    ctx: &CallContext,
    name: &str,
    input: Value,
) -> DispatchedCall {
    let mut results = dispatcher
        .call_batch(ctx, vec![(name.to_owned(), input.to_string())])
        .await;
    assert_eq!(results.len(), 1);
    results.remove(0)
}

/// The failure of a call that must have failed.
pub fn failure_of(call: &DispatchedCall) -> cordon_guest::abi::ToolFailure {
    call.result.clone().expect_err("the call should fail")
}

/// A simplified view of an event for order assertions: `type` plus the call id when any.
pub fn label(event: &ExecutionEvent) -> String {
    match event {
        ExecutionEvent::ToolCall { id, .. } => format!("tool.call {id}"),
        ExecutionEvent::ToolResult { id, .. } => format!("tool.result {id}"),
        ExecutionEvent::ApprovalRequired { call_id, .. } => format!("approval.required {call_id}"),
        ExecutionEvent::Awaiting { pending, .. } => {
            format!("execution.awaiting {}", pending.join(","))
        }
        other => format!("{other:?}"),
    }
}

/// What a test HTTP server answers: status and body.
pub type Reply = (u16, String);

/// A requests-recording HTTP/1.1 server on 127.0.0.1 answering with `reply(body)`.
/// `None` from `reply` holds the connection open without answering.
pub struct TestServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<(String, String)>>>,
}

pub async fn http_server(
    reply: impl Fn(&str) -> Option<Reply> + Send + Sync + 'static,
) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}/tool", listener.local_addr().expect("local addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let reply = Arc::new(reply);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buf = [0u8; 4096];
                let (head, body) = loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&data).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let head = text[..end].to_owned();
                        let length = head
                            .lines()
                            .find_map(|line| {
                                let (key, value) = line.split_once(':')?;
                                key.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if data.len() >= end + 4 + length {
                            break (
                                head,
                                String::from_utf8_lossy(&data[end + 4..end + 4 + length])
                                    .into_owned(),
                            );
                        }
                    }
                };
                seen.lock().unwrap().push((head, body.clone()));
                match reply(&body) {
                    Some((status, text)) => {
                        let response = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                            text.len()
                        );
                        let _ = socket.write_all(response.as_bytes()).await;
                        let _ = socket.shutdown().await;
                    }
                    None => {
                        // Hold the connection open without answering until the client gives up.
                        let _ = socket.read(&mut buf).await;
                    }
                }
            });
        }
    });
    TestServer { url, requests }
}
