//! Test DSL: one shared sandbox, tools from JSON, run-to-completion helpers.

use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{
    ExecutionEvent, ExecutionResult, ExecutionStatus, Language, Limits,
};
use cordon_sandbox::{Execution, ExecutionRequest, Sandbox, SandboxConfig};
use serde_json::Value;
use tokio::sync::OnceCell;

static SANDBOX: OnceCell<Sandbox> = OnceCell::const_new();

/// The sandbox shared by every test (images load once per test binary; on a fresh machine
/// the CPython image is fetched and built here, before any test's clock starts).
pub async fn sandbox() -> &'static Sandbox {
    SANDBOX
        .get_or_init(|| async {
            let config = SandboxConfig::default()
                .preload(vec![
                    Language::Python,
                    Language::PythonLite,
                    Language::Javascript,
                ])
                .max_instances(300);
            Sandbox::new(config).await.expect("the sandbox starts")
        })
        .await
}

/// A sandbox of its own with `language` loaded and a pool of `instances`: for tests about
/// how slots are shared and reused.
pub async fn small_pool(language: Language, instances: u32) -> Sandbox {
    let config = SandboxConfig::default()
        .preload(vec![language])
        .max_instances(instances);
    Sandbox::new(config).await.expect("the sandbox starts")
}

/// Tools from a JSON array of declarations.
pub fn tools(declarations: Value) -> Dispatcher {
    let registry = ToolRegistry::from_json(
        &serde_json::json!({"tools": declarations}).to_string(),
        "<test>",
    )
    .expect("test tools are valid");
    Dispatcher::new(Arc::new(registry))
}

/// No tools.
pub fn no_tools() -> Dispatcher {
    Dispatcher::new(Arc::new(ToolRegistry::empty()))
}

/// A static tool returning `result`, accepting any object.
pub fn static_tool(name: &str, result: Value) -> Value {
    serde_json::json!({"name": name, "handler": {"kind": "static", "result": result}})
}

/// A client tool (the test answers its calls).
pub fn client_tool(name: &str) -> Value {
    serde_json::json!({"name": name, "handler": {"kind": "client"}})
}

/// The guest the Python suites run on: `python` (CPython), or RustPython when
/// `CORDON_TEST_PYTHON=python-lite` (the same contract, checked by the same tests).
pub fn python_language() -> Language {
    match std::env::var("CORDON_TEST_PYTHON").as_deref() {
        Ok("python-lite") => Language::PythonLite,
        _ => Language::Python,
    }
}

/// Starts a Python execution.
pub async fn start(code: &str, tools: Dispatcher, limits: Limits) -> Execution {
    start_in(python_language(), code, tools, limits).await
}

/// Starts an execution in `language`.
pub async fn start_in(
    language: Language,
    code: &str,
    tools: Dispatcher,
    limits: Limits,
) -> Execution {
    sandbox()
        .await
        .execute(ExecutionRequest::new(language, code, tools).limits(limits))
}

/// Runs JavaScript to completion.
pub async fn js(code: &str, tools: Dispatcher, limits: Limits) -> ExecutionResult {
    start_in(Language::Javascript, code, tools, limits)
        .await
        .wait()
        .await
}

/// Runs Python code to completion with default limits and no tools.
pub async fn python(code: &str) -> ExecutionResult {
    start(code, no_tools(), Limits::default())
        .await
        .wait()
        .await
}

/// Runs Python code with tools.
pub async fn python_with(code: &str, tools: Dispatcher) -> ExecutionResult {
    start(code, tools, Limits::default()).await.wait().await
}

/// Runs Python code with limits.
pub async fn python_limited(code: &str, limits: Limits) -> ExecutionResult {
    start(code, no_tools(), limits).await.wait().await
}

/// Asserts the execution completed and returns it.
#[track_caller]
pub fn completed(result: ExecutionResult) -> ExecutionResult {
    assert_eq!(
        result.status,
        ExecutionStatus::Completed,
        "not completed: {result:#?}"
    );
    result
}

/// Asserts the execution raised `error_type` and returns its message.
#[track_caller]
pub fn raised(result: &ExecutionResult, error_type: &str) -> String {
    assert_eq!(
        result.status,
        ExecutionStatus::Error,
        "expected {error_type}: {result:#?}"
    );
    let error = result.error.as_ref().expect("an error result has an error");
    assert_eq!(error.error_type, error_type, "{result:#?}");
    error.message.clone()
}

/// Collects events until `execution.completed`.
pub async fn all_events(execution: &mut Execution) -> Vec<ExecutionEvent> {
    let mut events = Vec::new();
    while let Some(event) = execution.next_event().await {
        let done = matches!(event, ExecutionEvent::Completed(_));
        events.push(event);
        if done {
            break;
        }
    }
    events
}
