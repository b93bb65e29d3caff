//! Batches mixing host and client calls: results in request order, events in the
//! documented order.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cordon_core::ApproveListed;
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::execution::{Caller, ClientToolResult, ExecutionEvent};
use cordon_protocol::tool::Locus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{client_tool, dispatcher, label, recorded, sh_tool, static_tool};

fn tools() -> Value {
    json!([
        static_tool("weather", json!({"temp_c": 21})),
        client_tool("ask_user"),
        sh_tool("echo", r#"printf '{"echo": '; cat; printf '}'"#, 10_000),
        {"name": "email", "policy": "ask", "handler": {"kind": "static", "result": "sent"}},
        {"name": "typed", "input_schema": {"type": "object", "required": ["x"]}, "handler": {"kind": "static", "result": 0}},
    ])
}

#[tokio::test]
async fn mixed_batches_resolve_in_request_order() {
    let mut rec = recorded("exec_b");
    let d = dispatcher(tools());
    let ctx = rec.ctx.clone();
    let calls = vec![
        ("weather".to_owned(), "{}".to_owned()),
        ("ask_user".to_owned(), r#"{"q": "name?"}"#.to_owned()),
        ("typed".to_owned(), "{}".to_owned()),
        ("echo".to_owned(), r#"{"n": 1}"#.to_owned()),
        ("nope".to_owned(), "{}".to_owned()),
        ("ask_user".to_owned(), r#"{"q": "age?"}"#.to_owned()),
    ];
    let task = tokio::spawn(async move { d.call_batch(&ctx, calls).await });
    let pending = rec.awaiting().await;
    assert_eq!(pending.len(), 2);
    rec.ctx
        .client_calls
        .submit(vec![ClientToolResult {
            call_id: pending[1].clone(),
            output: json!(42),
            is_error: false,
        }])
        .unwrap();
    rec.ctx
        .client_calls
        .submit(vec![ClientToolResult {
            call_id: pending[0].clone(),
            output: json!("Ada"),
            is_error: false,
        }])
        .unwrap();
    let results = task.await.unwrap();

    let names: Vec<&str> = results.iter().map(|c| c.record.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["weather", "ask_user", "typed", "echo", "nope", "ask_user"]
    );
    assert_eq!(results[0].result, Ok(r#"{"temp_c":21}"#.to_owned()));
    assert_eq!(results[1].result, Ok(r#""Ada""#.to_owned()));
    assert_eq!(
        results[2].result.clone().unwrap_err().kind,
        ToolErrorKind::InvalidInput
    );
    assert_eq!(results[3].result, Ok(r#"{"echo":{"n":1}}"#.to_owned()));
    assert_eq!(
        results[4].result.clone().unwrap_err().kind,
        ToolErrorKind::UnknownTool
    );
    assert_eq!(results[5].result, Ok("42".to_owned()));
    assert_eq!(
        (results[1].record.id.as_str(), results[5].record.id.as_str()),
        (pending[0].as_str(), pending[1].as_str())
    );
    let loci: Vec<Locus> = results.iter().map(|c| c.record.locus).collect();
    assert_eq!(
        loci,
        vec![
            Locus::Host,
            Locus::Client,
            Locus::Host,
            Locus::Host,
            Locus::Host,
            Locus::Client
        ]
    );

    let ids: BTreeSet<&str> = results.iter().map(|c| c.record.id.as_str()).collect();
    assert_eq!(ids.len(), results.len(), "ids are unique");
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_") && id.len() == 21),
        "{ids:?}"
    );
    // The batch's parked time is carried once, by its first call.
    assert!(results[1..].iter().all(|c| c.suspended == Duration::ZERO));
}

#[tokio::test]
async fn events_follow_the_documented_order() {
    // The caller answers from the event stream itself, so every event is observed.
    let mut rec = recorded("exec_order");
    rec.ctx.approver = Arc::new(ApproveListed::new(["email"]));
    let d = dispatcher(tools());
    let ctx = rec.ctx.clone();
    let calls = vec![
        ("weather".to_owned(), r#"{"city": "Rome"}"#.to_owned()),
        ("email".to_owned(), "{}".to_owned()),
        ("ask_user".to_owned(), "{}".to_owned()),
        ("typed".to_owned(), "{}".to_owned()),
        ("echo".to_owned(), "{}".to_owned()),
    ];
    let task = tokio::spawn(async move { d.call_batch(&ctx, calls).await });
    let mut seen = Vec::new();
    loop {
        let event = rec.events.recv().await.unwrap();
        let done = matches!(event, ExecutionEvent::Awaiting { .. });
        if let ExecutionEvent::Awaiting { pending, .. } = &event {
            rec.ctx
                .client_calls
                .submit(vec![ClientToolResult {
                    call_id: pending[0].clone(),
                    output: json!(1),
                    is_error: false,
                }])
                .unwrap();
        }
        seen.push(event);
        if done {
            break;
        }
    }
    let results = task.await.unwrap();
    seen.extend(rec.drain());
    let id = |i: usize| results[i].record.id.clone();
    let labels: Vec<String> = seen.iter().map(label).collect();
    assert_eq!(
        labels[..6].to_vec(),
        vec![
            format!("tool.result {}", id(3)),
            format!("approval.required {}", id(1)),
            format!("tool.call {}", id(0)),
            format!("tool.call {}", id(1)),
            format!("tool.call {}", id(2)),
            format!("tool.call {}", id(4)),
        ]
    );
    assert_eq!(labels[6], format!("execution.awaiting {}", id(2)));
    let tail: BTreeSet<String> = labels[7..].iter().cloned().collect();
    let want: BTreeSet<String> = [0, 1, 2, 4]
        .iter()
        .map(|&i| format!("tool.result {}", id(i)))
        .collect();
    assert_eq!(tail, want);
    assert_eq!(labels.len(), 11);

    // tool.call carries the caller and where the call runs.
    let calls: Vec<(String, Caller, Locus, Value)> = seen
        .iter()
        .filter_map(|event| match event {
            ExecutionEvent::ToolCall {
                id,
                caller,
                locus,
                input,
                ..
            } => Some((id.clone(), caller.clone(), *locus, input.clone())),
            _ => None,
        })
        .collect();
    let caller = Caller {
        execution_id: "exec_order".into(),
    };
    assert_eq!(
        calls[0],
        (id(0), caller.clone(), Locus::Host, json!({"city": "Rome"}))
    );
    assert_eq!(calls[2], (id(2), caller, Locus::Client, json!({})));

    // tool.result carries the output, or the error object.
    for event in &seen {
        if let ExecutionEvent::ToolResult {
            id: rid,
            output,
            is_error,
            ..
        } = event
        {
            if *rid == id(0) {
                assert_eq!((output, *is_error), (&json!({"temp_c": 21}), false));
            }
            if *rid == id(3) {
                assert_eq!(output["error"], "invalid_input");
                assert!(*is_error);
            }
        }
    }
}

#[tokio::test]
async fn host_calls_in_a_batch_run_concurrently() {
    // Two commands that each wait for the other's marker file: they finish only if both
    // run at the same time (sequential dispatch would time out).
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    let script = |mine: &std::path::Path, other: &std::path::Path| {
        format!(
            "touch '{}'; i=0; while [ ! -e '{}' ]; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.05; done; echo true",
            mine.display(),
            other.display()
        )
    };
    let d = dispatcher(json!([
        sh_tool("a", &script(&a, &b), 60_000),
        sh_tool("b", &script(&b, &a), 60_000)
    ]));
    let results = d
        .call_batch(
            &recorded("e").ctx,
            vec![("a".into(), "{}".into()), ("b".into(), "{}".into())],
        )
        .await;
    assert_eq!(results[0].result, Ok("true".to_owned()));
    assert_eq!(results[1].result, Ok("true".to_owned()));
}

#[tokio::test]
async fn empty_batches_are_empty() {
    let d = dispatcher(tools());
    let mut rec = recorded("e");
    assert!(d.call_batch(&rec.ctx, vec![]).await.is_empty());
    assert!(rec.drain().is_empty());
}

#[tokio::test]
async fn a_single_host_call_sends_its_call_and_result_and_records_itself() {
    // One allowed host call takes a shorter path than a batch; what it sends and returns
    // is the same: `tool.call` (input, caller, locus), then `tool.result` with the output.
    let mut rec = recorded("exec_one");
    let d = dispatcher(tools());
    for (name, input, output) in [
        ("weather", json!({"city": "Oslo"}), json!({"temp_c": 21})),
        ("echo", json!({"n": 2}), json!({"echo": {"n": 2}})),
    ] {
        let call = crate::common::call_one(&d, &rec.ctx, name, input.clone()).await;
        assert_eq!(call.result, Ok(output.to_string()));
        assert_eq!(
            (
                call.record.name.as_str(),
                &call.record.input,
                call.record.is_error
            ),
            (name, &input, false)
        );
        assert_eq!(call.record.locus, Locus::Host);
        let seen = rec.drain();
        assert_eq!(
            seen.iter().map(label).collect::<Vec<_>>(),
            [
                format!("tool.call {}", call.record.id),
                format!("tool.result {}", call.record.id)
            ]
        );
        match &seen[0] {
            ExecutionEvent::ToolCall {
                input: sent,
                caller,
                locus,
                ..
            } => {
                assert_eq!(sent, &input);
                assert_eq!(caller.execution_id, "exec_one");
                assert_eq!(*locus, Locus::Host);
            }
            other => panic!("expected tool.call, got {other:?}"),
        }
        match &seen[1] {
            ExecutionEvent::ToolResult {
                output: sent,
                is_error,
                ..
            } => assert_eq!((sent, *is_error), (&output, false)),
            other => panic!("expected tool.result, got {other:?}"),
        }
    }
    // A call that is refused before it runs is answered, never announced as running.
    let call = crate::common::call_one(&d, &rec.ctx, "typed", json!({})).await;
    assert_eq!(
        rec.drain().iter().map(label).collect::<Vec<_>>(),
        [format!("tool.result {}", call.record.id)]
    );
    assert_eq!(
        call.result.map_err(|failure| failure.kind),
        Err(ToolErrorKind::InvalidInput)
    );
}
