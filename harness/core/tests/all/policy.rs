//! Policies: deny never runs, ask runs only once approved, and a tool declared under
//! another name for a connected or pack tool keeps the operator's policy for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cordon_core::{
    ApprovalBroker, ApproveListed, Approver, Dispatcher, RegistryError, ToolProvider, ToolRegistry,
};
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::execution::{ClientToolResult, Decision, ExecutionEvent};
use cordon_protocol::tool::{HandlerSpec, Policy, ToolDeclaration};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{call_one, dispatcher, failure_of, label, recorded};

fn tools() -> Value {
    json!([
        {"name": "rm_rf", "policy": "deny", "handler": {"kind": "static", "result": "gone"}},
        {"name": "send_email", "policy": "ask", "handler": {"kind": "static", "result": "sent"}},
        {"name": "buy", "policy": "ask", "handler": {"kind": "static", "result": "bought"}},
        {"name": "confirm", "policy": "ask", "handler": {"kind": "client"}},
        {"name": "forbidden_client", "policy": "deny", "handler": {"kind": "client"}},
    ])
}

fn with_approver(approver: impl Approver + 'static) -> (Dispatcher, crate::common::Recorded) {
    let mut rec = recorded("exec_p");
    rec.ctx.approver = Arc::new(approver);
    (dispatcher(tools()), rec)
}

#[tokio::test]
async fn deny_never_runs_and_emits_no_tool_call() {
    let (d, mut rec) = with_approver(ApproveListed::new(["rm_rf"]));
    let call = call_one(&d, &rec.ctx, "rm_rf", json!({})).await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::Denied);
    assert_eq!(failure.message, "policy denies tool `rm_rf`");
    let labels: Vec<String> = rec.drain().iter().map(label).collect();
    assert_eq!(labels, vec![format!("tool.result {}", call.record.id)]);
}

#[tokio::test]
async fn denied_client_tools_are_never_handed_to_the_caller() {
    let (d, mut rec) = with_approver(ApproveListed::default());
    let call = call_one(&d, &rec.ctx, "forbidden_client", json!({})).await;
    assert_eq!(failure_of(&call).kind, ToolErrorKind::Denied);
    assert!(rec.ctx.client_calls.pending().is_empty());
    assert!(rec.drain().iter().all(|event| !matches!(
        event,
        ExecutionEvent::ToolCall { .. } | ExecutionEvent::Awaiting { .. }
    )));
}

#[tokio::test]
async fn approve_listed_approves_only_listed_tools() {
    let (d, mut rec) = with_approver(ApproveListed::new(["send_email"]));
    let results = d
        .call_batch(
            &rec.ctx,
            vec![
                ("send_email".into(), "{\"to\": \"a@b\"}".into()),
                ("buy".into(), "{}".into()),
            ],
        )
        .await;
    assert_eq!(results[0].result, Ok("\"sent\"".into()));
    let refused = results[1].result.clone().unwrap_err();
    assert_eq!(refused.kind, ToolErrorKind::Denied);
    assert_eq!(refused.message, "approval refused for `buy`");

    let events = rec.drain();
    let ExecutionEvent::ApprovalRequired {
        call_id,
        tool,
        input,
        reason,
        ..
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (call_id, tool.as_str(), input),
        (&results[0].record.id, "send_email", &json!({"to": "a@b"}))
    );
    assert!(reason.contains("ask"), "{reason}");
    let (a, b) = (&results[0].record.id, &results[1].record.id);
    let labels: Vec<String> = events.iter().map(label).collect();
    assert_eq!(
        labels,
        vec![
            format!("approval.required {a}"),
            format!("approval.required {b}"),
            format!("tool.result {b}"),
            format!("tool.call {a}"),
            format!("tool.result {a}"),
        ]
    );
}

#[tokio::test]
async fn approval_broker_parks_until_resolved() {
    let broker = ApprovalBroker::new(Duration::from_secs(600));
    let (d, mut rec) = with_approver(broker.clone());
    let ctx = rec.ctx.clone();
    let task = tokio::spawn(async move {
        d.call_batch(
            &ctx,
            vec![
                ("send_email".into(), "{}".into()),
                ("buy".into(), "{}".into()),
            ],
        )
        .await
    });
    let mut requested = Vec::new();
    while requested.len() < 2 {
        requested.push(
            rec.wait_for(|event| match event {
                ExecutionEvent::ApprovalRequired {
                    approval_id, tool, ..
                } => Some((approval_id.clone(), tool.clone())),
                _ => None,
            })
            .await,
        );
    }
    // The event may precede the broker's parking by a poll; wait for both to be parked.
    while broker.pending().len() < 2 {
        tokio::task::yield_now().await;
    }
    let pending = broker.pending();
    assert_eq!(
        pending
            .iter()
            .map(|r| (r.approval_id.clone(), r.tool.clone()))
            .collect::<Vec<_>>(),
        requested
    );
    broker.resolve(&requested[1].0, Decision::Deny).unwrap();
    broker.resolve(&requested[0].0, Decision::Approve).unwrap();
    let results = task.await.unwrap();
    assert_eq!(results[0].result, Ok("\"sent\"".into()));
    assert_eq!(
        results[1].result.clone().unwrap_err().message,
        "approval refused for `buy`"
    );
    assert!(broker.pending().is_empty());
    let again = broker
        .resolve(&requested[0].0, Decision::Approve)
        .unwrap_err();
    assert_eq!(again.approval_id, requested[0].0);
    assert!(again.to_string().contains("already decided"), "{again}");
}

#[tokio::test]
async fn one_approved_call_runs_and_carries_the_time_it_waited() {
    let broker = ApprovalBroker::new(Duration::from_secs(600));
    let (d, mut rec) = with_approver(broker.clone());
    let ctx = rec.ctx.clone();
    let task = tokio::spawn(async move { call_one(&d, &ctx, "send_email", json!({})).await });
    let approval_id = rec
        .wait_for(|event| match event {
            ExecutionEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .await;
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    broker.resolve(&approval_id, Decision::Approve).unwrap();
    let call = task.await.unwrap();
    assert_eq!(call.result, Ok("\"sent\"".into()));
    assert!(
        call.suspended >= Duration::from_millis(30),
        "{:?}",
        call.suspended
    );
    // After the approval: the call runs, announced and answered like any other.
    let after: Vec<String> = rec.drain().iter().map(label).collect();
    assert_eq!(
        after,
        [
            format!("tool.call {}", call.record.id),
            format!("tool.result {}", call.record.id)
        ]
    );
}

#[tokio::test]
async fn unanswered_approvals_are_denied_after_the_timeout() {
    let broker = ApprovalBroker::new(Duration::from_millis(20));
    let (d, rec) = with_approver(broker.clone());
    let call = call_one(&d, &rec.ctx, "send_email", json!({})).await;
    assert_eq!(failure_of(&call).kind, ToolErrorKind::Denied);
    assert!(broker.pending().is_empty());
}

#[tokio::test]
async fn ask_client_tools_are_handed_over_only_after_approval() {
    let broker = ApprovalBroker::new(Duration::from_secs(600));
    let (d, mut rec) = with_approver(broker.clone());
    let ctx = rec.ctx.clone();
    let task =
        tokio::spawn(async move { call_one(&d, &ctx, "confirm", json!({"q": "ok?"})).await });
    let approval_id = rec
        .wait_for(|event| match event {
            ExecutionEvent::ApprovalRequired { approval_id, .. } => Some(approval_id.clone()),
            _ => None,
        })
        .await;
    assert!(
        rec.ctx.client_calls.pending().is_empty(),
        "not handed over before approval"
    );
    while broker.pending().is_empty() {
        tokio::task::yield_now().await;
    }
    broker.resolve(&approval_id, Decision::Approve).unwrap();
    let pending = rec.awaiting().await;
    rec.ctx
        .client_calls
        .submit(vec![ClientToolResult {
            call_id: pending[0].clone(),
            output: json!("yes"),
            is_error: false,
        }])
        .unwrap();
    let call = task.await.unwrap();
    assert_eq!(call.result, Ok("\"yes\"".into()));
}

/// A connected server's stand-in that counts the calls that reach it.
#[derive(Debug, Default)]
struct Counting {
    calls: AtomicUsize,
}

impl ToolProvider for Counting {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        _input: &'a Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(json!({"ran": tool})) })
    }
}

impl Counting {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// What `--connect files=… --connect-policy files=<write_policy>` offers, as far as the
/// registry sees it: `write_file` with the operator's policy, `read_file` allowed.
fn files_offered(write_policy: Policy) -> Vec<ToolDeclaration> {
    [("write_file", write_policy), ("read_file", Policy::Allow)]
        .into_iter()
        .map(|(tool, policy)| ToolDeclaration {
            name: format!("files.{tool}"),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            policy,
            defer_loading: false,
            handler: HandlerSpec::Mcp {
                server: "files".into(),
                tool: tool.into(),
            },
        })
        .collect()
}

/// A sandbox's own declarations (as over the HTTP API) joined by the `files` connection.
fn aliased(write_policy: Policy) -> (Dispatcher, Arc<Counting>, ToolRegistry) {
    let mut registry = crate::common::registry(json!([
        {"name": "alias", "policy": "allow",
         "handler": {"kind": "mcp", "server": "files", "tool": "write_file"}},
        {"name": "reader", "handler": {"kind": "mcp", "server": "files", "tool": "read_file"}}
    ]));
    let provider = Arc::new(Counting::default());
    registry
        .connect("files", files_offered(write_policy), provider.clone())
        .unwrap();
    (
        Dispatcher::new(Arc::new(registry.clone())),
        provider,
        registry,
    )
}

#[tokio::test]
async fn an_alias_of_a_denied_connected_tool_is_denied_and_never_reaches_it() {
    let (d, provider, registry) = aliased(Policy::Deny);
    assert_eq!(
        registry.get("alias").unwrap().declaration.policy,
        Policy::Deny
    );
    // Approving everything changes nothing: deny is not a question.
    let mut rec = recorded("exec_alias");
    rec.ctx.approver = Arc::new(ApproveListed::new(["alias", "files.write_file"]));
    let call = call_one(&d, &rec.ctx, "alias", json!({"path": "x", "content": "y"})).await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::Denied);
    assert_eq!(failure.message, "policy denies tool `alias`");
    assert_eq!(provider.calls(), 0, "the denied target was reached");
    // The connection is attached: an alias of an allowed tool runs.
    let read = call_one(&d, &rec.ctx, "reader", json!({})).await;
    assert_eq!(read.result, Ok(r#"{"ran":"read_file"}"#.into()));
    assert_eq!(provider.calls(), 1);
}

#[tokio::test]
async fn an_alias_of_an_ask_connected_tool_asks_first() {
    let (d, provider, registry) = aliased(Policy::Ask);
    assert_eq!(
        registry.get("alias").unwrap().declaration.policy,
        Policy::Ask
    );
    let mut rec = recorded("exec_alias_ask");
    rec.ctx.approver = Arc::new(ApproveListed::default());
    let call = call_one(&d, &rec.ctx, "alias", json!({})).await;
    assert_eq!(failure_of(&call).message, "approval refused for `alias`");
    assert!(
        rec.drain().iter().any(|event| matches!(
            event,
            ExecutionEvent::ApprovalRequired { tool, .. } if tool == "alias"
        )),
        "no approval was asked"
    );
    assert_eq!(provider.calls(), 0);
    rec.ctx.approver = Arc::new(ApproveListed::new(["alias"]));
    let call = call_one(&d, &rec.ctx, "alias", json!({})).await;
    assert_eq!(call.result, Ok(r#"{"ran":"write_file"}"#.into()));
    assert_eq!(provider.calls(), 1);
}

#[test]
fn an_alias_of_a_tool_the_connection_does_not_offer_is_refused() {
    // The server may serve tools it does not list; the operator's policy covers only
    // listed ones, so a declaration cannot reach an unlisted one.
    let mut registry = crate::common::registry(json!([
        {"name": "hidden", "handler": {"kind": "mcp", "server": "files", "tool": "delete_all"}}
    ]));
    let error = registry
        .connect(
            "files",
            files_offered(Policy::Allow),
            Arc::new(Counting::default()),
        )
        .unwrap_err();
    assert!(
        matches!(&error, RegistryError::NotOffered { tool, .. } if tool == "delete_all"),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("read_file, write_file"),
        "{error}"
    );
    assert_eq!(registry.names(), ["hidden"], "the registry is unchanged");
}

#[test]
fn a_second_provider_under_a_connected_name_is_refused() {
    let mut registry = ToolRegistry::empty();
    registry
        .connect(
            "files",
            files_offered(Policy::Deny),
            Arc::new(Counting::default()),
        )
        .unwrap();
    // Under the same name it would take over (and re-police) the first one's tools.
    let mut offered = files_offered(Policy::Allow);
    for decl in &mut offered {
        decl.name = format!("other_{}", decl.name.replace('.', "_"));
    }
    let error = registry
        .connect("files", offered, Arc::new(Counting::default()))
        .unwrap_err();
    assert!(
        matches!(error, RegistryError::AlreadyConnected { .. }),
        "{error:?}"
    );
    assert_eq!(
        registry.get("files.write_file").unwrap().declaration.policy,
        Policy::Deny
    );
}

#[tokio::test]
async fn an_alias_of_a_pack_tool_keeps_the_packs_policy() {
    let dir = tempfile::tempdir().unwrap();
    let text = json!({"tools": [
        {"name": "w", "policy": "allow",
         "handler": {"kind": "mcp", "server": "fs", "tool": "write_file"}},
        {"pack": "fs", "root": dir.path(), "write": true, "policy": "deny"}
    ]})
    .to_string();
    let registry = ToolRegistry::from_json(&text, "tools.json").unwrap();
    let d = Dispatcher::new(Arc::new(registry));
    let rec = recorded("exec_pack_alias");
    let call = call_one(
        &d,
        &rec.ctx,
        "w",
        json!({"path": "planted", "content": "x"}),
    )
    .await;
    assert_eq!(failure_of(&call).kind, ToolErrorKind::Denied);
    assert!(!dir.path().join("planted").exists());
    // A pack without `write` offers no writing tool to alias.
    let text = json!({"tools": [
        {"name": "w", "handler": {"kind": "mcp", "server": "fs", "tool": "write_file"}},
        {"pack": "fs", "root": dir.path()}
    ]})
    .to_string();
    let error = ToolRegistry::from_json(&text, "tools.json").unwrap_err();
    assert!(
        matches!(error, RegistryError::NotOffered { .. }),
        "{error:?}"
    );
}
