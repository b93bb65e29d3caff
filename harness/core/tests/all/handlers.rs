//! Host handlers: static, command (argv, stdin/stdout JSON, exit codes, timeouts), http.

use cordon_core::CallContext;
use cordon_guest::abi::ToolErrorKind;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{call_one, dispatcher, failure_of, http_server, sh_tool, static_tool};

async fn run(tool: Value, input: Value) -> cordon_core::DispatchedCall {
    let name = tool["name"].as_str().unwrap().to_owned();
    call_one(
        &dispatcher(json!([tool])),
        &CallContext::new("e"),
        &name,
        input,
    )
    .await
}

#[tokio::test]
async fn static_returns_its_fixed_value() {
    let call = run(static_tool("s", json!({"a": [1, "two", null]})), json!({})).await;
    assert_eq!(call.result, Ok(r#"{"a":[1,"two",null]}"#.to_owned()));
}

#[tokio::test]
async fn command_gets_json_on_stdin_and_returns_json_from_stdout() {
    let call = run(
        sh_tool("echo", r#"printf '{"input": '; cat; printf '}'"#, 10_000),
        json!({"city": "Zürich"}),
    )
    .await;
    let value: Value = serde_json::from_str(&call.result.unwrap()).unwrap();
    assert_eq!(value, json!({"input": {"city": "Zürich"}}));
}

#[tokio::test]
async fn command_arguments_are_not_interpreted_by_a_shell() {
    let tool = json!({"name": "p", "handler": {"kind": "command", "argv": ["printf", "%s", "[\"$HOME; ls\"]"]}});
    assert_eq!(
        run(tool, json!({})).await.result,
        Ok(r#"["$HOME; ls"]"#.to_owned())
    );
}

#[tokio::test]
async fn command_that_ignores_stdin_still_works() {
    let call = run(
        sh_tool("one", "echo 1", 10_000),
        json!({"big": "x".repeat(1 << 20)}),
    )
    .await;
    assert_eq!(call.result, Ok("1".to_owned()));
}

#[tokio::test]
async fn non_zero_exit_is_a_failure_with_code_and_stderr() {
    let call = run(
        sh_tool(
            "bad",
            "echo partial; echo 'city not found' >&2; exit 3",
            10_000,
        ),
        json!({}),
    )
    .await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert_eq!(
        failure.message,
        "`sh` exited with code 3; stderr: city not found"
    );
}

#[tokio::test]
async fn stderr_is_quoted_by_its_tail_only() {
    let call = run(
        sh_tool(
            "noisy",
            "i=0; while [ $i -lt 2000 ]; do echo line $i >&2; i=$((i+1)); done; exit 1",
            10_000,
        ),
        json!({}),
    )
    .await;
    let failure = failure_of(&call);
    assert!(
        failure.message.len() < 2_200,
        "{} bytes",
        failure.message.len()
    );
    assert!(
        failure.message.ends_with("line 1999"),
        "{}",
        &failure.message[failure.message.len() - 40..]
    );
}

#[tokio::test]
async fn non_json_output_is_a_failure_with_a_preview() {
    let failure = failure_of(&run(sh_tool("text", "echo hello world", 10_000), json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert_eq!(failure.message, "`sh` printed non-JSON output: hello world");

    let failure =
        failure_of(&run(sh_tool("long", "yes abc | head -c 5000", 10_000), json!({})).await);
    assert!(failure.message.chars().count() < 300, "{}", failure.message);

    let failure = failure_of(&run(sh_tool("silent", "true", 10_000), json!({})).await);
    assert!(
        failure
            .message
            .contains("printed non-JSON output: (nothing"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn slow_commands_time_out() {
    let failure = failure_of(&run(sh_tool("slow", "sleep 30", 100), json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Timeout);
    assert_eq!(
        failure.message,
        "`sh` did not finish within 100 ms and was killed"
    );
}

#[tokio::test]
async fn missing_programs_are_named() {
    let tool = json!({"name": "m", "handler": {"kind": "command", "argv": ["/nonexistent/dir/weather-tool"]}});
    let failure = failure_of(&run(tool, json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert!(
        failure.message.starts_with("cannot start `weather-tool`: "),
        "{}",
        failure.message
    );
    assert!(
        !failure.message.contains("/nonexistent"),
        "no host paths: {}",
        failure.message
    );
}

fn http_tool(url: &str, timeout_ms: u64) -> Value {
    json!({"name": "h", "handler": {"kind": "http", "url": url, "timeout_ms": timeout_ms}})
}

#[tokio::test]
async fn http_posts_json_and_returns_the_json_body() {
    let server = http_server(|body| {
        let input: Value = serde_json::from_str(body).ok()?;
        Some((200, json!({"got": input}).to_string()))
    })
    .await;
    let call = run(http_tool(&server.url, 10_000), json!({"city": "Oslo"})).await;
    assert_eq!(call.result, Ok(r#"{"got":{"city":"Oslo"}}"#.to_owned()));
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let (head, body) = &requests[0];
    assert!(head.starts_with("POST /tool HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"city": "Oslo"})
    );
}

#[tokio::test]
async fn http_errors_carry_status_and_body_tail() {
    let server = http_server(|_| Some((500, "boom: database down".to_owned()))).await;
    let failure = failure_of(&run(http_tool(&server.url, 10_000), json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert_eq!(failure.message, "HTTP 500: boom: database down");
}

#[tokio::test]
async fn http_non_json_bodies_fail() {
    let server = http_server(|_| Some((200, "<html>hi</html>".to_owned()))).await;
    let failure = failure_of(&run(http_tool(&server.url, 10_000), json!({})).await);
    assert_eq!(failure.kind, ToolErrorKind::Failed);
    assert_eq!(
        failure.message,
        "HTTP 200 with a non-JSON body: <html>hi</html>"
    );
}

#[tokio::test]
async fn http_timeouts_and_refused_connections() {
    let server = http_server(|_| None).await;
    let failure_ = failure_of(&run(http_tool(&server.url, 100), json!({})).await);
    assert_eq!(failure_.kind, ToolErrorKind::Timeout);
    assert_eq!(failure_.message, "no response within 100 ms");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let failure_ = failure_of(&run(http_tool(&url, 10_000), json!({})).await);
    assert_eq!(failure_.kind, ToolErrorKind::Failed);
    assert!(
        failure_.message.starts_with("request failed: "),
        "{}",
        failure_.message
    );
}
