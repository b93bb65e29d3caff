//! Policies: deny never runs, ask runs only once approved.

use std::sync::Arc;
use std::time::Duration;

use cordon_core::{ApprovalBroker, ApproveListed, Approver, Dispatcher};
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::execution::{ClientToolResult, Decision, ExecutionEvent};
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
