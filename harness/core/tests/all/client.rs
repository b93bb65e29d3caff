//! Client tools: the batch suspends, the caller submits results in any grouping, the batch
//! resumes; bad submissions are rejected whole; unanswered calls time out.

use std::time::Duration;

use cordon_core::{ClientCallBroker, DispatchedCall, SubmitError};
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::execution::{ClientToolResult, ExecutionEvent};
use cordon_protocol::tool::Locus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::common::{Recorded, client_tool, dispatcher, recorded};

fn ok(call_id: &str, output: Value) -> ClientToolResult {
    ClientToolResult {
        call_id: call_id.into(),
        output,
        is_error: false,
    }
}

/// Starts a batch of client calls in a task; returns it once its `execution.awaiting` is out.
async fn start(
    rec: &mut Recorded,
    calls: &[(&str, Value)],
) -> (JoinHandle<Vec<DispatchedCall>>, Vec<String>) {
    let d = dispatcher(json!([client_tool("ask_user"), client_tool("read_file")]));
    let ctx = rec.ctx.clone();
    let calls: Vec<(String, String)> = calls
        .iter()
        .map(|(n, i)| ((*n).to_owned(), i.to_string()))
        .collect();
    let task = tokio::spawn(async move { d.call_batch(&ctx, calls).await });
    let pending = rec.awaiting().await;
    (task, pending)
}

#[tokio::test]
async fn results_submitted_at_once_resume_the_batch_in_request_order() {
    let mut rec = recorded("exec_c");
    let (task, pending) = start(
        &mut rec,
        &[
            ("ask_user", json!({"q": 1})),
            ("read_file", json!({"p": "a"})),
        ],
    )
    .await;
    assert_eq!(pending.len(), 2);
    assert_eq!(rec.ctx.client_calls.pending(), pending);
    // Submitted in reverse order: pairing is by id, not position.
    rec.ctx
        .client_calls
        .submit(vec![
            ok(&pending[1], json!("file")),
            ok(&pending[0], json!({"a": 1})),
        ])
        .unwrap();
    let results = task.await.unwrap();
    assert_eq!(results[0].result, Ok(r#"{"a":1}"#.to_owned()));
    assert_eq!(results[1].result, Ok(r#""file""#.to_owned()));
    assert_eq!(results[0].record.id, pending[0]);
    assert_eq!(results[0].record.locus, Locus::Client);
    assert!(rec.ctx.client_calls.pending().is_empty());
}

#[tokio::test]
async fn results_may_arrive_in_several_requests() {
    let mut rec = recorded("exec_c");
    let (task, pending) = start(
        &mut rec,
        &[
            ("ask_user", json!({})),
            ("ask_user", json!({})),
            ("read_file", json!({})),
        ],
    )
    .await;
    rec.ctx
        .client_calls
        .submit(vec![ok(&pending[1], json!(2))])
        .unwrap();
    assert_eq!(
        rec.ctx.client_calls.pending(),
        vec![pending[0].clone(), pending[2].clone()]
    );
    rec.ctx.client_calls.submit(vec![]).unwrap();
    rec.ctx
        .client_calls
        .submit(vec![ok(&pending[2], json!(3))])
        .unwrap();
    rec.ctx
        .client_calls
        .submit(vec![ok(&pending[0], json!(1))])
        .unwrap();
    let results: Vec<_> = task.await.unwrap().into_iter().map(|c| c.result).collect();
    assert_eq!(
        results,
        vec![Ok("1".to_owned()), Ok("2".to_owned()), Ok("3".to_owned())]
    );
}

#[tokio::test]
async fn bad_submissions_are_rejected_whole() {
    let broker = ClientCallBroker::default();
    let mut a = broker.register("call_a");
    let mut b = broker.register("call_b");

    let error = broker
        .submit(vec![ok("call_a", json!(1)), ok("call_zzz", json!(2))])
        .unwrap_err();
    assert_eq!(
        error,
        SubmitError::UnknownCall {
            call_id: "call_zzz".into()
        }
    );
    assert!(error.to_string().contains("call_zzz"), "{error}");

    let error = broker
        .submit(vec![
            ok("call_a", json!(1)),
            ok("call_b", json!(2)),
            ok("call_a", json!(3)),
        ])
        .unwrap_err();
    assert_eq!(
        error,
        SubmitError::Duplicate {
            call_id: "call_a".into()
        }
    );

    // Nothing of the rejected requests was delivered.
    assert!(a.try_recv().is_err());
    assert!(b.try_recv().is_err());
    assert_eq!(
        broker.pending(),
        vec!["call_a".to_owned(), "call_b".to_owned()]
    );

    broker.submit(vec![ok("call_a", json!("first"))]).unwrap();
    let error = broker
        .submit(vec![ok("call_b", json!(2)), ok("call_a", json!("again"))])
        .unwrap_err();
    assert_eq!(
        error,
        SubmitError::AlreadyAnswered {
            call_id: "call_a".into()
        }
    );
    assert!(
        b.try_recv().is_err(),
        "call_b must not be delivered by a rejected request"
    );
    assert_eq!(a.try_recv().unwrap().output, json!("first"));

    broker.submit(vec![ok("call_b", json!(2))]).unwrap();
    assert_eq!(b.try_recv().unwrap().output, json!(2));
    assert!(broker.pending().is_empty());
}

#[tokio::test]
async fn bad_submissions_leave_a_suspended_batch_waiting() {
    let mut rec = recorded("exec_c");
    let (task, pending) = start(
        &mut rec,
        &[("ask_user", json!({})), ("read_file", json!({}))],
    )
    .await;
    let broker = rec.ctx.client_calls.clone();
    assert!(
        broker
            .submit(vec![ok(&pending[0], json!(1)), ok("call_nope", json!(0))])
            .is_err()
    );
    assert!(
        broker
            .submit(vec![ok(&pending[0], json!(1)), ok(&pending[0], json!(1))])
            .is_err()
    );
    assert_eq!(broker.pending(), pending);
    assert!(!task.is_finished());
    broker
        .submit(vec![ok(&pending[0], json!(1)), ok(&pending[1], json!(2))])
        .unwrap();
    let results = task.await.unwrap();
    assert!(results.iter().all(|c| c.result.is_ok()));
}

#[tokio::test]
async fn unanswered_calls_time_out_and_late_results_are_refused() {
    let mut rec = recorded("exec_c");
    rec.ctx.client_tool_timeout = Duration::from_millis(50);
    let (task, pending) = start(&mut rec, &[("ask_user", json!({}))]).await;
    let results = task.await.unwrap();
    let failure = results[0].result.clone().unwrap_err();
    assert_eq!(failure.kind, ToolErrorKind::Timeout);
    assert_eq!(
        failure.message,
        "no result for client tool `ask_user` within 50 ms"
    );
    assert!(results[0].record.is_error);
    assert!(rec.ctx.client_calls.pending().is_empty());

    let late = rec
        .ctx
        .client_calls
        .submit(vec![ok(&pending[0], json!("late"))])
        .unwrap_err();
    assert_eq!(
        late,
        SubmitError::Expired {
            call_id: pending[0].clone()
        }
    );
    assert!(late.to_string().contains("no longer waiting"), "{late}");
}

#[tokio::test]
async fn client_errors_become_tool_failures() {
    let mut rec = recorded("exec_c");
    let (task, pending) = start(
        &mut rec,
        &[
            ("ask_user", json!({})),
            ("read_file", json!({})),
            ("read_file", json!({})),
        ],
    )
    .await;
    rec.ctx
        .client_calls
        .submit(vec![
            ClientToolResult {
                call_id: pending[0].clone(),
                output: json!("user closed the dialog"),
                is_error: true,
            },
            ClientToolResult {
                call_id: pending[1].clone(),
                output: json!({"errno": 2}),
                is_error: true,
            },
            ClientToolResult {
                call_id: pending[2].clone(),
                output: Value::Null,
                is_error: true,
            },
        ])
        .unwrap();
    let results = task.await.unwrap();
    let messages: Vec<(ToolErrorKind, String)> = results
        .iter()
        .map(|c| c.result.clone().unwrap_err())
        .map(|f| (f.kind, f.message))
        .collect();
    assert_eq!(
        messages,
        vec![
            (ToolErrorKind::Failed, "user closed the dialog".to_owned()),
            (ToolErrorKind::Failed, r#"{"errno":2}"#.to_owned()),
            (
                ToolErrorKind::Failed,
                "client tool `read_file` failed without details".to_owned()
            ),
        ]
    );
}

#[tokio::test]
async fn one_execution_suspends_several_times() {
    let mut rec = recorded("exec_c");
    for round in 0..3 {
        let (task, pending) = start(&mut rec, &[("ask_user", json!({"round": round}))]).await;
        rec.ctx
            .client_calls
            .submit(vec![ok(&pending[0], json!(round))])
            .unwrap();
        let results = task.await.unwrap();
        assert_eq!(results[0].result, Ok(round.to_string()));
    }
}

#[tokio::test]
async fn dropping_a_suspended_batch_withdraws_its_calls() {
    let mut rec = recorded("exec_c");
    let (task, pending) = start(&mut rec, &[("ask_user", json!({}))]).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(rec.ctx.client_calls.pending().is_empty());
    let error = rec
        .ctx
        .client_calls
        .submit(vec![ok(&pending[0], json!(1))])
        .unwrap_err();
    assert_eq!(
        error,
        SubmitError::Expired {
            call_id: pending[0].clone()
        }
    );
}

#[tokio::test]
async fn awaiting_lists_the_pending_ids_and_a_future_deadline() {
    let mut rec = recorded("exec_c");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let d = dispatcher(json!([client_tool("ask_user")]));
    let ctx = rec.ctx.clone();
    let task = tokio::spawn(async move {
        d.call_batch(&ctx, vec![("ask_user".into(), "{}".into())])
            .await
    });
    let (pending, deadline) = rec
        .wait_for(|event| match event {
            ExecutionEvent::Awaiting {
                pending,
                deadline_unix_ms,
            } => Some((pending.clone(), *deadline_unix_ms)),
            _ => None,
        })
        .await;
    // The default timeout is minutes: the deadline is in the future whatever the clock does.
    assert!(deadline > before, "{deadline} <= {before}");
    rec.ctx
        .client_calls
        .submit(vec![ok(&pending[0], json!(null))])
        .unwrap();
    assert_eq!(task.await.unwrap()[0].result, Ok("null".to_owned()));
}
