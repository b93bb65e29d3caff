//! Hostile code: the host never crashes, never leaks host state, never hangs past limits.

use cordon_protocol::execution::ExecutionStatus;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn host_files_are_unreachable() {
    let code = r#"
outcomes = []
for path in ["/etc/passwd", "/proc/self/environ", "../../etc/passwd", "/"]:
    try:
        open(path).read()
        outcomes.append("read")
    except Exception as error:
        outcomes.append(type(error).__name__)
try:
    open("new.txt", "w").write("x")
    outcomes.append("wrote")
except Exception as error:
    outcomes.append(type(error).__name__)
outcomes
"#;
    let result = completed(python(code).await);
    let outcomes = result.result.as_array().unwrap().clone();
    assert!(
        !outcomes.contains(&json!("read")) && !outcomes.contains(&json!("wrote")),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn the_environment_is_empty() {
    let result = completed(
        python("import os\n[dict(os.environ), os.getcwd() if hasattr(os, 'getcwd') else '/']")
            .await,
    );
    assert_eq!(result.result[0], json!({}));
}

#[tokio::test]
async fn sockets_are_unavailable() {
    let code = r#"
try:
    import socket
    s = socket.create_connection(("127.0.0.1", 22), timeout=1)
    "connected"
except Exception as error:
    type(error).__name__
"#;
    let result = completed(python(code).await);
    assert_ne!(result.result, json!("connected"));
}

#[tokio::test]
async fn calling_the_bridge_module_directly_with_garbage_is_an_error_not_a_crash() {
    if python_language() == cordon_protocol::execution::Language::Python {
        // The CPython guest's door is `_host`; its garbage test is in `cpython.rs`.
        return;
    }
    let code = r#"
import _cordon
errors = []
for attempt in (lambda: _cordon.call_batch([1, 2], ["{}"]), lambda: _cordon.call(None, None),
                lambda: _cordon.write(1, b"bytes")):
    try:
        attempt()
    except Exception as error:
        errors.append(type(error).__name__)
print(_cordon.call("nope", "not json"))
errors
"#;
    let result = completed(python(code).await);
    assert_eq!(result.result.as_array().unwrap().len(), 3, "{result:#?}");
    assert!(result.stdout.contains("nope"), "{}", result.stdout);
}

#[tokio::test]
async fn introspection_tricks_find_nothing_to_escape_to() {
    let code = r#"
subclasses = ().__class__.__base__.__subclasses__()
names = {c.__name__ for c in subclasses}
import sys
[len(subclasses) > 0, "Popen" in names and __import__("subprocess").Popen(["ls"]) is not None]
"#;
    let result = python(code).await;
    // Either the trick finds no subprocess support or spawning fails: never a host process.
    match result.status {
        ExecutionStatus::Completed => assert_eq!(result.result[1], json!(false), "{result:#?}"),
        _ => assert_eq!(result.status, ExecutionStatus::Error, "{result:#?}"),
    }
}

#[tokio::test]
async fn error_messages_hold_no_host_paths() {
    for code in [
        "import nonexistent_module",
        "1/0",
        "open('/x')",
        "def f(): f()\nf()",
    ] {
        let result = python(code).await;
        let text = serde_json::to_string(&result).unwrap();
        for host_path in ["/root", "/home/", "/work/", ".cargo/registry"] {
            assert!(
                !text.contains(host_path),
                "{host_path} leaked by {code:?}: {text}"
            );
        }
    }
}
