//! Every limit is enforced, named in the result, and leaves the sandbox serving others.

use cordon_protocol::execution::{ExecutionResult, ExecutionStatus, LimitKind, Limits};
use serde_json::json;

use crate::common::*;

#[track_caller]
fn hit(result: &ExecutionResult, kind: LimitKind) {
    assert_eq!(result.status, ExecutionStatus::LimitExceeded, "{result:#?}");
    assert_eq!(result.limit, Some(kind), "{result:#?}");
    assert_eq!(result.error.as_ref().unwrap().error_type, "LimitExceeded");
}

#[tokio::test]
async fn infinite_loop_hits_the_cpu_limit() {
    let result = python_limited(
        "while True:\n    pass",
        Limits {
            cpu_ms: 150,
            ..Limits::default()
        },
    )
    .await;
    hit(&result, LimitKind::Cpu);
    assert!(result.usage.cpu_ms >= 150, "{:?}", result.usage);
}

#[tokio::test]
async fn sleeping_hits_the_wall_limit_not_the_cpu_limit() {
    let result = python_limited(
        "import time\ntime.sleep(30)",
        Limits {
            wall_ms: 200,
            ..Limits::default()
        },
    )
    .await;
    hit(&result, LimitKind::Wall);
}

#[tokio::test]
async fn memory_bomb_hits_the_memory_limit() {
    let limits = Limits {
        memory_bytes: 96 << 20,
        ..Limits::default()
    };
    let result = python_limited(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(1 << 20))",
        limits,
    )
    .await;
    hit(&result, LimitKind::Memory);
    assert!(
        result.usage.peak_memory_bytes <= 96 << 20,
        "{:?}",
        result.usage
    );
}

#[tokio::test]
async fn a_caught_memory_error_does_not_hide_the_limit_from_later_code() {
    let limits = Limits {
        memory_bytes: 96 << 20,
        ..Limits::default()
    };
    let code = "try:\n    x = bytearray(200 << 20)\nexcept MemoryError:\n    x = None\n'survived'";
    let result = python_limited(code, limits).await;
    // Either the guest raised MemoryError and kept going, or it aborted: never a crash.
    match result.status {
        ExecutionStatus::Completed => assert_eq!(result.result, json!("survived")),
        _ => hit(&result, LimitKind::Memory),
    }
}

#[tokio::test]
async fn output_flood_hits_the_output_limit() {
    let limits = Limits {
        max_output_bytes: 10_000,
        ..Limits::default()
    };
    let result = python_limited("while True:\n    print('x' * 100)", limits).await;
    hit(&result, LimitKind::Output);
    assert!(result.stdout.len() <= 10_000);
    assert!(result.truncated);
}

/// Bytes of `result` as `cordon run --json` prints it and events carry it.
fn json_size(result: &ExecutionResult) -> usize {
    serde_json::to_string(result).unwrap().len()
}

#[tokio::test]
async fn a_huge_exception_is_cut_to_about_the_output_limit() {
    // RustPython holds the 30 M characters in 120 MB, and formats the traceback besides.
    let limits = Limits {
        max_output_bytes: 100_000,
        memory_bytes: 1 << 30,
        ..Limits::default()
    };
    let result = python_limited("raise ValueError('x' * 30_000_000)", limits).await;
    raised(&result, "ValueError");
    assert!(result.truncated, "{:?}", result.error);
    assert!(json_size(&result) < 110_000, "{} bytes", json_size(&result));
    assert!(result.error.as_ref().unwrap().message.starts_with("xxx"));

    let result = js("throw new Error('x'.repeat(30e6))", no_tools(), limits).await;
    assert_eq!(result.status, ExecutionStatus::Error, "{:?}", result.error);
    assert!(result.truncated);
    assert!(json_size(&result) < 110_000, "{} bytes", json_size(&result));
}

#[tokio::test]
async fn recorded_tool_inputs_share_the_output_limit() {
    let tools = tools(json!([static_tool("ping", json!(1))]));
    let limits = Limits {
        max_output_bytes: 20_000,
        ..Limits::default()
    };
    let code = "for n in range(50):\n    tools.call('ping', {'data': 'x' * 5000})\n'done'";
    let result = completed(start(code, tools, limits).await.wait().await);
    assert_eq!(result.tool_calls.len(), 50);
    assert!(result.truncated);
    assert!(!result.tool_calls[0].input.is_null());
    assert!(result.tool_calls[49].input.is_null());
    assert!(json_size(&result) < 30_000, "{} bytes", json_size(&result));
}

#[tokio::test]
async fn a_huge_final_value_counts_as_output() {
    let limits = Limits {
        max_output_bytes: 1_000,
        ..Limits::default()
    };
    let result = python_limited("'x' * 5000", limits).await;
    hit(&result, LimitKind::Output);
}

#[tokio::test]
async fn tool_call_loop_hits_the_tool_call_limit() {
    let tools = tools(json!([static_tool("ping", json!(1))]));
    let limits = Limits {
        max_tool_calls: 5,
        ..Limits::default()
    };
    let result = start("while True:\n    tools.call('ping', {})", tools, limits)
        .await
        .wait()
        .await;
    hit(&result, LimitKind::ToolCalls);
    assert_eq!(result.tool_calls.len(), 5);
}

#[tokio::test]
async fn oversized_tool_input_hits_the_payload_limit_and_a_result_fails_the_call() {
    let tools = tools(json!([static_tool("ping", json!("y".repeat(5000)))]));
    let limits = Limits {
        max_payload_bytes: 1_000,
        ..Limits::default()
    };
    let result = start(
        "tools.call('ping', {'data': 'x' * 5000})",
        tools.clone(),
        limits,
    )
    .await
    .wait()
    .await;
    hit(&result, LimitKind::Payload);
    assert!(result.error.as_ref().unwrap().message.contains("input"));
    // An oversized result is the call's failure, which the code can catch.
    let code = "try:\n    tools.call('ping', {})\nexcept ToolError as error:\n    r = [error.kind, str(error)]\nr";
    let result = completed(start(code, tools, limits).await.wait().await);
    assert_eq!(result.result[0], "tool_failed");
    let message = result.result[1].as_str().unwrap();
    assert!(message.contains("payload_too_large"), "{message}");
    assert!(!message.contains("yyyy"), "{message}");
    assert!(result.tool_calls[0].is_error);
}

#[tokio::test]
async fn deep_recursion_raises_recursion_error() {
    let result = python("def f(n):\n    return f(n + 1)\nf(0)").await;
    assert_eq!(result.status, ExecutionStatus::Error, "{result:#?}");
    let kind = &result.error.as_ref().unwrap().error_type;
    assert!(
        kind == "RecursionError" || kind == "StackOverflow",
        "{result:#?}"
    );
}

#[tokio::test]
async fn the_sandbox_keeps_serving_after_limits() {
    let _ = python_limited(
        "while True:\n    pass",
        Limits {
            cpu_ms: 50,
            ..Limits::default()
        },
    )
    .await;
    let result = completed(python("1 + 1").await);
    assert_eq!(result.result, json!(2));
}

#[tokio::test]
async fn cancel_stops_a_running_execution() {
    let execution = start("while True:\n    pass", no_tools(), Limits::default()).await;
    let control = execution.control();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    control.cancel();
    let result = execution.wait().await;
    assert_eq!(result.status, ExecutionStatus::Cancelled, "{result:#?}");
}
