//! Input checks before dispatch: JSON, object shape, known tool, schema.

use cordon_core::CallContext;
use cordon_guest::abi::ToolErrorKind;
use cordon_protocol::execution::ExecutionEvent;
use cordon_protocol::tool::Locus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{call_one, dispatcher, failure_of, recorded, static_tool};

fn weather() -> Value {
    json!([{
        "name": "get_weather",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": false
        },
        "handler": {"kind": "static", "result": {"temp_c": 21}}
    }])
}

#[tokio::test]
async fn valid_input_reaches_the_handler() {
    let call = call_one(
        &dispatcher(weather()),
        &CallContext::new("e"),
        "get_weather",
        json!({"city": "Paris"}),
    )
    .await;
    assert_eq!(call.result, Ok(r#"{"temp_c":21}"#.to_owned()));
    assert!(!call.record.is_error);
    assert_eq!(call.record.input, json!({"city": "Paris"}));
    assert_eq!(call.record.locus, Locus::Host);
}

#[tokio::test]
async fn schema_violations_list_every_violation_with_its_pointer() {
    let call = call_one(
        &dispatcher(weather()),
        &CallContext::new("e"),
        "get_weather",
        json!({"city": 5, "days": 0, "extra": true}),
    )
    .await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::InvalidInput);
    assert!(
        failure
            .message
            .starts_with("input does not match the schema of `get_weather`: "),
        "{}",
        failure.message
    );
    for part in [
        r#"/city: 5 is not of type "string""#,
        "/days: 0 is less than the minimum of 1",
        "extra",
    ] {
        assert!(
            failure.message.contains(part),
            "missing {part:?} in {}",
            failure.message
        );
    }
    assert!(call.record.is_error);
}

#[tokio::test]
async fn missing_required_properties_are_reported_at_the_root() {
    let call = call_one(
        &dispatcher(weather()),
        &CallContext::new("e"),
        "get_weather",
        json!({}),
    )
    .await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::InvalidInput);
    assert!(
        failure
            .message
            .ends_with(r#": "city" is a required property"#),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn many_violations_are_capped() {
    let schema = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let d = dispatcher(
        json!([{"name": "t", "input_schema": schema, "handler": {"kind": "static", "result": 1}}]),
    );
    let input: serde_json::Map<String, Value> =
        (0..100).map(|i| (format!("k{i:03}"), json!(i))).collect();
    let failure =
        failure_of(&call_one(&d, &CallContext::new("e"), "t", Value::Object(input)).await);
    assert!(
        failure.message.ends_with("(and 80 more)"),
        "{}",
        failure.message
    );
}

#[tokio::test]
async fn input_that_is_not_json_is_invalid_input() {
    let d = dispatcher(weather());
    let results = d
        .call_batch(
            &CallContext::new("e"),
            vec![("get_weather".into(), "{city: Paris".into())],
        )
        .await;
    let failure = results[0].result.clone().unwrap_err();
    assert_eq!(failure.kind, ToolErrorKind::InvalidInput);
    assert!(
        failure.message.starts_with("input is not JSON: "),
        "{}",
        failure.message
    );
    assert_eq!(results[0].record.input, Value::Null);
}

#[tokio::test]
async fn input_must_be_an_object() {
    let d = dispatcher(weather());
    for input in [json!(["Paris"]), json!("Paris"), json!(null)] {
        let failure =
            failure_of(&call_one(&d, &CallContext::new("e"), "get_weather", input.clone()).await);
        assert_eq!(failure.kind, ToolErrorKind::InvalidInput);
        assert!(
            failure.message.contains("must be a JSON object"),
            "{input}: {}",
            failure.message
        );
    }
}

#[tokio::test]
async fn unknown_tools_list_the_available_ones() {
    let d = dispatcher(json!([
        static_tool("alpha", json!(1)),
        static_tool("beta", json!(2))
    ]));
    let call = call_one(&d, &CallContext::new("e"), "gamma", json!({})).await;
    let failure = failure_of(&call);
    assert_eq!(failure.kind, ToolErrorKind::UnknownTool);
    assert_eq!(
        failure.message,
        "unknown tool `gamma`; available tools: alpha, beta"
    );
    assert_eq!(call.record.name, "gamma");
}

#[tokio::test]
async fn unknown_tool_lists_are_capped_and_names_truncated() {
    let tools: Vec<Value> = (0..25)
        .map(|i| static_tool(&format!("t{i:02}"), json!(i)))
        .collect();
    let d = dispatcher(Value::Array(tools));
    let failure = failure_of(&call_one(&d, &CallContext::new("e"), "nope", json!({})).await);
    assert!(failure.message.contains("t19"), "{}", failure.message);
    assert!(!failure.message.contains("t20"), "{}", failure.message);
    assert!(
        failure.message.ends_with("(and 5 more)"),
        "{}",
        failure.message
    );

    let huge = "x".repeat(100_000);
    let call = call_one(&d, &CallContext::new("e"), &huge, json!({})).await;
    assert!(call.record.name.chars().count() <= 201);
    assert!(failure.message.len() < 1_000);

    let empty = dispatcher(json!([]));
    let failure = failure_of(&call_one(&empty, &CallContext::new("e"), "x", json!({})).await);
    assert_eq!(failure.message, "unknown tool `x`: no tools are available");
}

#[tokio::test]
async fn rejected_calls_emit_only_an_error_result() {
    let d = dispatcher(weather());
    let mut rec = recorded("exec_v");
    let call = call_one(&d, &rec.ctx, "get_weather", json!({"city": 1})).await;
    let events = rec.drain();
    assert_eq!(events.len(), 1, "{events:?}");
    let ExecutionEvent::ToolResult {
        id,
        name,
        output,
        is_error,
        ..
    } = &events[0]
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (id, name.as_str(), *is_error),
        (&call.record.id, "get_weather", true)
    );
    assert_eq!(output["error"], "invalid_input");
    assert_eq!(
        output["message"].as_str(),
        Some(failure_of(&call).message.as_str())
    );
}

#[tokio::test]
async fn guest_garbage_never_panics() {
    let d = dispatcher(weather());
    let ctx = CallContext::new("e");
    let nasty = [
        "",
        "\u{0}",
        "[[[[[[[[",
        "1e999999",
        "\"\\ud800\"",
        "{\"city\": \"\\u0000\"}",
        "null",
        "{}{}",
    ];
    let calls = nasty
        .iter()
        .map(|input| ("get_weather".to_owned(), (*input).to_owned()))
        .collect();
    let results = d.call_batch(&ctx, calls).await;
    assert_eq!(results.len(), nasty.len());
    assert!(results[..5].iter().all(|r| r.result.is_err()));
    // A NUL inside a string is valid JSON and a valid city.
    assert!(results[5].result.is_ok());
}
