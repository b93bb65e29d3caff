//! Client tools: the execution suspends, the caller answers, the execution resumes where it
//! stopped. Batches, several suspensions, errors, expiry, bad submissions.

use std::time::Duration;

use cordon_core::broker::SubmitError;
use cordon_protocol::execution::{ClientToolResult, Decision, ExecutionEvent, Limits};
use cordon_protocol::tool::Locus;
use cordon_sandbox::Execution;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::*;

/// Reads events until the execution waits for client results; returns (call id, tool, input).
async fn awaited_calls(execution: &mut Execution) -> Vec<(String, String, Value)> {
    let mut calls = Vec::new();
    loop {
        match execution
            .next_event()
            .await
            .expect("the execution suspends before ending")
        {
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus: Locus::Client,
                caller,
            } => {
                assert_eq!(caller.execution_id, execution.id());
                calls.push((id, name, input));
            }
            ExecutionEvent::Awaiting { pending, .. } => {
                let ids: Vec<_> = calls.iter().map(|(id, _, _)| id.clone()).collect();
                assert_eq!(pending, ids, "awaiting lists exactly the calls announced");
                return calls;
            }
            ExecutionEvent::Completed(result) => panic!("ended without suspending: {result:#?}"),
            _ => {}
        }
    }
}

fn answer(call_id: &str, output: Value) -> ClientToolResult {
    ClientToolResult {
        call_id: call_id.into(),
        output,
        is_error: false,
    }
}

#[tokio::test]
async fn suspends_and_resumes_several_times_in_one_execution() {
    let tools = tools(json!([client_tool("ask_user")]));
    let code = "a = await ask_user(q='name?')\nb = await ask_user(q='age?')\nf'{a} is {b}'";
    let mut execution = start(code, tools, Limits::default()).await;
    for (question, reply) in [("name?", json!("Ada")), ("age?", json!(36))] {
        let calls = awaited_calls(&mut execution).await;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].2, json!({"q": question}));
        execution
            .submit_tool_results(vec![answer(&calls[0].0, reply)])
            .unwrap();
    }
    let result = completed(execution.wait().await);
    assert_eq!(result.result, json!("Ada is 36"));
    assert_eq!(result.tool_calls.len(), 2);
}

#[tokio::test]
async fn gather_sends_one_batch_answered_in_several_requests_in_any_order() {
    let tools = tools(json!([
        client_tool("lookup"),
        static_tool("local", json!("host"))
    ]));
    let code =
        "import asyncio\nawait asyncio.gather(lookup(k=1), local(), lookup(k=2), lookup(k=3))";
    let mut execution = start(code, tools, Limits::default()).await;
    let calls = awaited_calls(&mut execution).await;
    assert_eq!(
        calls.len(),
        3,
        "the three client calls are one batch: {calls:?}"
    );
    execution
        .submit_tool_results(vec![answer(&calls[2].0, json!(30))])
        .unwrap();
    execution
        .submit_tool_results(vec![
            answer(&calls[0].0, json!(10)),
            answer(&calls[1].0, json!(20)),
        ])
        .unwrap();
    let result = completed(execution.wait().await);
    assert_eq!(result.result, json!([10, "host", 20, 30]));
}

#[tokio::test]
async fn client_errors_raise_tool_error_in_the_guest() {
    let tools = tools(json!([client_tool("flaky")]));
    let code = "try:\n    await flaky()\nexcept ToolError as e:\n    r = [e.kind, str(e)]\nr";
    let mut execution = start(code, tools, Limits::default()).await;
    let calls = awaited_calls(&mut execution).await;
    execution
        .submit_tool_results(vec![ClientToolResult {
            call_id: calls[0].0.clone(),
            output: json!("disk full"),
            is_error: true,
        }])
        .unwrap();
    let result = completed(execution.wait().await);
    assert_eq!(result.result[0], json!("tool_failed"));
    assert!(
        result.result[1].as_str().unwrap().contains("disk full"),
        "{result:#?}"
    );
    assert!(result.tool_calls[0].is_error);
}

#[tokio::test]
async fn unknown_duplicate_and_repeated_ids_are_rejected_without_delivering_anything() {
    let tools = tools(json!([client_tool("slow")]));
    let mut execution = start(
        "import asyncio\nawait asyncio.gather(slow(), slow())",
        tools,
        Limits::default(),
    )
    .await;
    let calls = awaited_calls(&mut execution).await;
    let (first, second) = (&calls[0].0, &calls[1].0);
    let unknown =
        execution.submit_tool_results(vec![answer(first, json!(1)), answer("call_nope", json!(2))]);
    assert!(
        matches!(unknown, Err(SubmitError::UnknownCall { .. })),
        "{unknown:?}"
    );
    let duplicate =
        execution.submit_tool_results(vec![answer(first, json!(1)), answer(first, json!(1))]);
    assert!(
        matches!(duplicate, Err(SubmitError::Duplicate { .. })),
        "{duplicate:?}"
    );
    assert_eq!(
        execution.control().pending_tool_calls().len(),
        2,
        "nothing was delivered"
    );
    execution
        .submit_tool_results(vec![answer(first, json!(1))])
        .unwrap();
    let again = execution.submit_tool_results(vec![answer(first, json!(1))]);
    assert!(again.is_err(), "an answered call cannot be answered twice");
    execution
        .submit_tool_results(vec![answer(second, json!(2))])
        .unwrap();
    assert_eq!(completed(execution.wait().await).result, json!([1, 2]));
}

#[tokio::test]
async fn an_unanswered_call_times_out_with_a_clear_error_in_the_guest() {
    let tools = tools(json!([client_tool("never")]));
    let limits = Limits {
        client_tool_timeout_ms: 150,
        ..Limits::default()
    };
    let code = "try:\n    await never()\nexcept ToolError as e:\n    r = [e.kind, str(e)]\nr";
    let result = completed(start(code, tools, limits).await.wait().await);
    assert_eq!(result.result[0], json!("timeout"), "{result:#?}");
}

#[tokio::test]
async fn waiting_for_a_client_does_not_count_against_the_wall_limit() {
    let tools = tools(json!([client_tool("human")]));
    let limits = Limits {
        wall_ms: 300,
        ..Limits::default()
    };
    let mut execution = start("await human()", tools, limits).await;
    let calls = awaited_calls(&mut execution).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    execution
        .submit_tool_results(vec![answer(&calls[0].0, json!("late but fine"))])
        .unwrap();
    assert_eq!(
        completed(execution.wait().await).result,
        json!("late but fine")
    );
}

#[tokio::test]
async fn ask_policy_waits_for_a_decision() {
    let tools = tools(json!([
        {"name": "pay", "policy": "ask", "handler": {"kind": "static", "result": "paid"}}
    ]));
    let code = "results = []\nfor _ in range(2):\n    try:\n        results.append(await pay(amount=5))\n    except ToolError as e:\n        results.append(e.kind)\nresults";
    let mut execution = start(code, tools, Limits::default()).await;
    for decision in [Decision::Approve, Decision::Deny] {
        let approval = loop {
            match execution.next_event().await.expect("asks before ending") {
                ExecutionEvent::ApprovalRequired {
                    approval_id, tool, ..
                } => {
                    assert_eq!(tool, "pay");
                    break approval_id;
                }
                ExecutionEvent::Completed(result) => panic!("ended: {result:#?}"),
                _ => {}
            }
        };
        execution.decide(&approval, decision).unwrap();
    }
    assert_eq!(
        completed(execution.wait().await).result,
        json!(["paid", "denied"])
    );
}
