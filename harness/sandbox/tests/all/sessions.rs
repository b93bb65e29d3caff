//! Sessions keep their instance: state survives executions; a limit starts over.

use cordon_protocol::execution::{ExecutionStatus, LimitKind, Limits};
use cordon_sandbox::SessionSpec;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn variables_functions_and_imports_survive_between_executions() {
    let session = sandbox()
        .await
        .session(SessionSpec::new(python_language(), no_tools()));
    completed(
        session
            .execute("import math\ncounter = 1\ndef bump():\n    global counter\n    counter += 1")
            .wait()
            .await,
    );
    completed(session.execute("bump()\nbump()").wait().await);
    let result = completed(session.execute("[counter, math.pi > 3]").wait().await);
    assert_eq!(result.result, json!([3, true]));
    assert!(session.is_warm().await);
}

#[tokio::test]
async fn an_exception_keeps_the_session_state() {
    let session = sandbox()
        .await
        .session(SessionSpec::new(python_language(), no_tools()));
    completed(session.execute("x = 41").wait().await);
    let failed = session
        .execute("x += 1\nraise ValueError('boom')")
        .wait()
        .await;
    assert_eq!(failed.status, ExecutionStatus::Error);
    let result = completed(session.execute("x").wait().await);
    assert_eq!(result.result, json!(42));
}

#[tokio::test]
async fn a_limit_resets_the_session_to_a_fresh_instance() {
    let spec = SessionSpec::new(python_language(), no_tools()).limits(Limits {
        cpu_ms: 100,
        ..Limits::default()
    });
    let session = sandbox().await.session(spec);
    completed(session.execute("x = 1").wait().await);
    let stopped = session.execute("while True:\n    pass").wait().await;
    assert_eq!(stopped.limit, Some(LimitKind::Cpu));
    let result = completed(session.execute("'x' in globals()").wait().await);
    assert_eq!(result.result, json!(false));
}

#[tokio::test]
async fn executions_on_one_session_run_in_order() {
    let session = sandbox()
        .await
        .session(SessionSpec::new(python_language(), no_tools()));
    let first = session.execute("import time\ntime.sleep(0.05)\nlog = ['first']");
    let second = session.execute("log.append('second')\nlog");
    let (_, second) = tokio::join!(first.wait(), second.wait());
    assert_eq!(completed(second).result, json!(["first", "second"]));
}
