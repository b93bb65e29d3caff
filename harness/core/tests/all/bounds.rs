//! Bounds and containment of host calls: payload limits enforced while reading, bounded
//! concurrency, command environments and process groups, redacted `http` errors.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordon_core::{
    CallContext, DEFAULT_COMMAND_PATH, Dispatcher, PAYLOAD_TOO_LARGE, ToolProvider, ToolRegistry,
};
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::tool::ToolDeclaration;
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    call_one, dispatcher, failure_of, http_server, recorded, sh_tool, static_tool,
};

fn limited(max_payload_bytes: u64) -> CallContext {
    let mut ctx = CallContext::new("exec_bounds");
    ctx.max_payload_bytes = max_payload_bytes;
    ctx
}

/// Whether `pid` has exited (gone, or a zombie waiting for init to reap it).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Waits (bounded) for `pid` to exit; killing is asynchronous to the kill call.
async fn wait_exited(pid: u32) -> bool {
    for _ in 0..200 {
        if exited(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .expect("the command wrote its child's pid")
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn command_output_is_cut_at_the_payload_limit_and_the_process_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // Prints forever: only stopping at the limit ends this call before its timeout.
    let script = format!(
        "echo $$ > {}; while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done",
        pid_file.display()
    );
    let d = dispatcher(json!([sh_tool("flood", &script, 600_000)]));
    let mut rec = recorded("exec_flood");
    rec.ctx.max_payload_bytes = 10_000;
    let call = call_one(&d, &rec.ctx, "flood", json!({})).await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert!(
        failure.message.starts_with(PAYLOAD_TOO_LARGE),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("10000-byte"),
        "{}",
        failure.message
    );
    assert!(
        wait_exited(read_pid(&pid_file)).await,
        "the command still runs"
    );
    for event in rec.drain() {
        let size = serde_json::to_string(&event).unwrap().len();
        assert!(size < 1_000, "an event carries {size} bytes: {event:?}");
    }
}

#[tokio::test]
async fn oversized_results_of_any_handler_fail_before_they_are_streamed() {
    let big = "z".repeat(50_000);
    let d = dispatcher(json!([static_tool("big", json!(big))]));
    let mut rec = recorded("exec_big");
    rec.ctx.max_payload_bytes = 1_000;
    let failure = failure_of(&call_one(&d, &rec.ctx, "big", json!({})).await);
    assert!(
        failure.message.starts_with(PAYLOAD_TOO_LARGE),
        "{failure:?}"
    );
    let events = rec.drain();
    assert!(!events.is_empty());
    for event in events {
        assert!(
            !serde_json::to_string(&event).unwrap().contains("zzzz"),
            "the result was streamed: {event:?}"
        );
    }

    let server =
        http_server(|_| Some((200, json!({"data": "y".repeat(100_000)}).to_string()))).await;
    let d = dispatcher(json!([
        {"name": "h", "handler": {"kind": "http", "url": server.url, "timeout_ms": 30_000}}
    ]));
    let failure = failure_of(&call_one(&d, &limited(1_000), "h", json!({})).await);
    assert!(
        failure.message.starts_with(PAYLOAD_TOO_LARGE),
        "{failure:?}"
    );
    // Within the limit the same call works.
    let call = call_one(&d, &limited(1 << 20), "h", json!({})).await;
    assert!(call.result.is_ok(), "{call:?}");
}

/// Counts calls in flight and remembers the most at once.
#[derive(Debug, Default)]
struct Gauge {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl ToolProvider for Gauge {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        _input: &'a Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            // Stay in flight across a few scheduler turns so overlapping calls overlap.
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(json!("ok"))
        })
    }
}

async fn most_in_flight(dispatcher: impl Fn(ToolRegistry) -> Dispatcher) -> usize {
    let gauge = Arc::new(Gauge::default());
    let declaration: ToolDeclaration = serde_json::from_value(json!({
        "name": "gauge.probe",
        "handler": {"kind": "mcp", "server": "gauge", "tool": "probe"}
    }))
    .unwrap();
    let mut registry = ToolRegistry::empty();
    registry
        .connect("gauge", vec![declaration], gauge.clone())
        .unwrap();
    let calls = (0..100)
        .map(|_| ("gauge.probe".to_owned(), "{}".to_owned()))
        .collect();
    let results = dispatcher(registry)
        .call_batch(&CallContext::new("exec_many"), calls)
        .await;
    assert_eq!(results.len(), 100);
    assert!(results.iter().all(|call| call.result.is_ok()));
    gauge.most.load(Ordering::SeqCst)
}

#[tokio::test]
async fn host_calls_of_a_batch_run_at_most_eight_at_once() {
    let most = most_in_flight(|registry| Dispatcher::new(Arc::new(registry))).await;
    assert!(
        (2..=cordon_core::dispatch::DEFAULT_HOST_CONCURRENCY).contains(&most),
        "{most}"
    );
    let most =
        most_in_flight(|registry| Dispatcher::new(Arc::new(registry)).with_host_concurrency(3))
            .await;
    assert!(most <= 3, "{most}");
}

#[tokio::test]
async fn commands_start_with_an_empty_environment_plus_what_they_declare() {
    let script =
        r#"printf '{"path":"%s","home":"%s","x":"%s"}' "$PATH" "${HOME-unset}" "${X-unset}""#;
    let bare =
        json!({"name": "bare", "handler": {"kind": "command", "argv": ["sh", "-c", script]}});
    let declared = json!({"name": "declared", "handler": {
        "kind": "command", "argv": ["sh", "-c", script],
        "env": {"X": "from the declaration"}, "inherit_env": ["HOME", "NOT_SET_ANYWHERE_42"]
    }});
    let d = dispatcher(json!([bare, declared]));
    let ctx = CallContext::new("exec_env");
    let value = |call: cordon_core::DispatchedCall| -> Value {
        serde_json::from_str(&call.result.expect("the command succeeds")).unwrap()
    };
    assert_eq!(
        value(call_one(&d, &ctx, "bare", json!({})).await),
        json!({"path": DEFAULT_COMMAND_PATH, "home": "unset", "x": "unset"})
    );
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        value(call_one(&d, &ctx, "declared", json!({})).await),
        json!({"path": DEFAULT_COMMAND_PATH, "home": home, "x": "from the declaration"})
    );
}

#[tokio::test]
async fn a_timeout_kills_the_commands_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // The background child keeps stdout open, so the call runs into its timeout.
    let script = format!("sleep 1000 & echo $! > {}; wait", pid_file.display());
    let d = dispatcher(json!([sh_tool("spawner", &script, 500)]));
    let failure = failure_of(&call_one(&d, &CallContext::new("e"), "spawner", json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Timeout, "{failure:?}");
    assert!(
        wait_exited(read_pid(&pid_file)).await,
        "the background child survived"
    );
}

#[tokio::test]
async fn background_children_die_when_the_command_returns() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!(
        "sleep 1000 >/dev/null 2>&1 & echo $! > {}; echo '{{}}'",
        pid_file.display()
    );
    let d = dispatcher(json!([sh_tool("leaver", &script, 30_000)]));
    let call = call_one(&d, &CallContext::new("e"), "leaver", json!({})).await;
    assert_eq!(call.result, Ok("{}".to_owned()));
    assert!(
        wait_exited(read_pid(&pid_file)).await,
        "the background child survived"
    );
}

fn assert_no_secrets(message: &str) {
    for secret in ["hunter22", "s3cr3t-t0ken", "token=", "admin:", "admin@"] {
        assert!(!message.contains(secret), "`{secret}` leaked: {message}");
    }
}

#[tokio::test]
async fn http_errors_never_show_the_urls_credentials_or_query() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("http://admin:hunter22@127.0.0.1:{port}/api?token=s3cr3t-t0ken");
    let d = dispatcher(json!([{"name": "h", "handler": {"kind": "http", "url": url}}]));
    let mut rec = recorded("exec_url");
    let failure = failure_of(&call_one(&d, &rec.ctx, "h", json!({})).await);
    assert!(failure.message.starts_with("request failed"), "{failure:?}");
    assert_no_secrets(&failure.message);
    for event in rec.drain() {
        assert_no_secrets(&serde_json::to_string(&event).unwrap());
    }

    // A server that answers 500 and quotes a request URL back in its body.
    let server = http_server(|_| {
        let quoted = "http://admin:hunter22@127.0.0.1/tool?token=s3cr3t-t0ken";
        Some((500, format!("failed: GET {quoted}")))
    })
    .await;
    let url = server
        .url
        .replace("http://", "http://admin:hunter22@")
        .replace("/tool", "/tool?token=s3cr3t-t0ken");
    let d = dispatcher(json!([{"name": "h", "handler": {"kind": "http", "url": url}}]));
    let failure = failure_of(&call_one(&d, &CallContext::new("e"), "h", json!({})).await);
    assert!(failure.message.starts_with("HTTP 500"), "{failure:?}");
    assert_no_secrets(&failure.message);
}
