//! The canonical conversation model: golden round trips, cross-vendor conversions,
//! pairing validation and snapshots of every encoded shape.

use cordon_protocol::conversation::stream::{Accumulator, Progress};
use cordon_protocol::conversation::{
    self, ContentBlock, PairingError, Request, Role, StopReason, ToolChoice, ToolResultContent,
    Vendor, anthropic, chat, responses, stream, validate_pairing,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/all/fixtures/conversation/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compare with the stored snapshot `tests/all/snapshots/<name>.json`; with
/// `UPDATE_SNAPSHOTS=1` (or when none exists yet) write it instead.
fn snapshot(name: &str, value: &Value) {
    let path = format!(
        "{}/tests/all/snapshots/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let rendered = format!("{}\n", serde_json::to_string_pretty(value).unwrap());
    match std::fs::read_to_string(&path) {
        Ok(stored) if std::env::var_os("UPDATE_SNAPSHOTS").is_none() => {
            assert_eq!(stored, rendered, "snapshot {name}")
        }
        _ => std::fs::write(&path, rendered).unwrap(),
    }
}

#[test]
fn anthropic_request_round_trips_losslessly() {
    let body = fixture("anthropic_request");
    let request = anthropic::decode_request(&body).unwrap();
    assert_eq!(request.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(request.parallel_tool_calls, Some(true));
    assert_eq!(request.tools.len(), 3);
    assert_eq!(anthropic::encode_request(&request), body);
}

#[test]
fn anthropic_response_round_trips_losslessly() {
    let body = fixture("anthropic_response");
    let turn = anthropic::decode_response(&body).unwrap();
    assert_eq!(turn.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        turn.container.as_ref().map(|c| c.id.as_str()),
        Some("container_abc")
    );
    let call = turn.tool_calls().next().unwrap();
    assert_eq!(
        call.caller.as_ref().and_then(|c| c.tool_id.as_deref()),
        Some("srvtoolu_1")
    );
    assert_eq!(anthropic::encode_response(&turn), body);
}

#[test]
fn chat_request_round_trips_losslessly() {
    let body = fixture("chat_request");
    let request = chat::decode_request(&body).unwrap();
    assert_eq!(
        request.tool_choice,
        Some(ToolChoice::Tool {
            name: "get_weather".into()
        })
    );
    // The two tool messages and the user message after them are one canonical message.
    assert_eq!(request.messages.len(), 3);
    assert_eq!(chat::encode_request(&request), body);
}

#[test]
fn chat_response_round_trips_losslessly() {
    let body = fixture("chat_response");
    let turn = chat::decode_response(&body).unwrap();
    assert_eq!(turn.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(turn.tool_calls().count(), 2);
    assert_eq!(chat::encode_response(&turn), body);
}

#[test]
fn anthropic_request_reaches_chat_with_parallel_calls_results_images_and_errors() {
    let request = anthropic::decode_request(&fixture("anthropic_request")).unwrap();
    let body = chat::encode_request(&request);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        messages[2]["tool_calls"][1]["function"]["arguments"],
        json!("{\"city\":\"Oslo\"}")
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "toolu_1", "content": "21C"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "toolu_2", "content": "Error: station offline"})
    );
    // The tool result's image rides in the user message after the tool messages.
    assert_eq!(
        messages[5]["content"][1]["image_url"]["url"],
        json!("data:image/png;base64,iVBORw0KGgo=")
    );
    // Anthropic-only pieces (thinking, built-in tools, metadata) do not leak into Chat.
    assert_eq!(body["tools"].as_array().unwrap().len(), 1);
    assert!(body.get("metadata").is_none());
    snapshot("anthropic_request_as_chat", &body);
    // And back: the canonical conversation survives, save Anthropic-only pieces.
    let back = chat::decode_request(&body).unwrap();
    assert_eq!(back.messages.len(), 3);
    validate_pairing(&back).unwrap();
}

#[test]
fn chat_request_reaches_anthropic() {
    let request = chat::decode_request(&fixture("chat_request")).unwrap();
    let body = anthropic::encode_request(&request);
    assert_eq!(body["system"], json!("You are terse."));
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": false})
    );
    assert_eq!(
        body["messages"][0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"city": "Paris"})
    );
    snapshot("chat_request_as_anthropic", &body);
}

#[test]
fn turns_cross_between_anthropic_and_chat() {
    let turn = chat::decode_response(&fixture("chat_response")).unwrap();
    let body = anthropic::encode_response(&turn);
    assert_eq!(body["stop_reason"], json!("tool_use"));
    assert_eq!(
        body["content"][1],
        json!({"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}})
    );
    snapshot("chat_response_as_anthropic", &body);
    let turn = anthropic::decode_response(&fixture("anthropic_response")).unwrap();
    let body = chat::encode_response(&turn);
    assert_eq!(body["choices"][0]["finish_reason"], json!("tool_calls"));
    snapshot("anthropic_response_as_chat", &body);
}

fn conversation_with(results: Vec<ContentBlock>) -> Request {
    let mut request = anthropic::decode_request(&fixture("anthropic_request")).unwrap();
    let last = request.messages.last_mut().unwrap();
    assert_eq!(last.role, Role::User);
    last.content = results;
    request
}

fn result(id: &str) -> ContentBlock {
    ContentBlock::ToolResult(conversation::ToolResult {
        call_id: id.into(),
        content: ToolResultContent::Text("ok".into()),
        is_error: false,
        extra: Default::default(),
    })
}

#[test]
fn pairing_names_the_unknown_missing_or_duplicate_id() {
    validate_pairing(&conversation_with(vec![
        result("toolu_2"),
        result("toolu_1"),
    ]))
    .unwrap();
    assert_eq!(
        validate_pairing(&conversation_with(vec![
            result("toolu_1"),
            result("toolu_2"),
            result("toolu_9")
        ])),
        Err(PairingError::UnknownCall {
            id: "toolu_9".into()
        })
    );
    assert_eq!(
        validate_pairing(&conversation_with(vec![result("toolu_1")])),
        Err(PairingError::MissingResult {
            id: "toolu_2".into()
        })
    );
    assert_eq!(
        validate_pairing(&conversation_with(vec![
            result("toolu_1"),
            result("toolu_2"),
            result("toolu_1")
        ])),
        Err(PairingError::DuplicateResult {
            id: "toolu_1".into()
        })
    );
    let error = PairingError::UnknownCall {
        id: "toolu_9".into(),
    };
    let anthropic_error = error.to_vendor(Vendor::Anthropic);
    assert_eq!(anthropic_error.status, 400);
    snapshot("pairing_error_anthropic", &anthropic_error.body);
    snapshot(
        "pairing_error_openai",
        &error.to_vendor(Vendor::OpenaiChat).body,
    );
}

#[test]
fn a_result_without_a_preceding_call_is_unknown() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "hi"}
    ]}]});
    let request = anthropic::decode_request(&body).unwrap();
    assert_eq!(
        validate_pairing(&request),
        Err(PairingError::UnknownCall {
            id: "toolu_x".into()
        })
    );
}

#[test]
fn responses_request_round_trips_losslessly() {
    let body = fixture("responses_request");
    let request = responses::decode_request(&body).unwrap();
    assert_eq!(request.tool_choice, Some(ToolChoice::Any));
    // user, assistant (reasoning + two calls), user (two outputs + text)
    assert_eq!(request.messages.len(), 3);
    validate_pairing(&request).unwrap();
    assert_eq!(responses::encode_request(&request), body);
}

#[test]
fn responses_response_round_trips_losslessly() {
    let body = fixture("responses_response");
    let turn = responses::decode_response(&body).unwrap();
    assert_eq!(turn.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        turn.tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["call_3", "call_4"]
    );
    assert_eq!(responses::encode_response(&turn), body);
}

#[test]
fn requests_cross_between_responses_and_the_others() {
    let request = responses::decode_request(&fixture("responses_request")).unwrap();
    let as_anthropic = anthropic::encode_request(&request);
    assert_eq!(
        as_anthropic["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": false})
    );
    assert_eq!(
        as_anthropic["messages"][1]["content"][0]["id"],
        json!("call_1")
    );
    snapshot("responses_request_as_anthropic", &as_anthropic);
    snapshot("responses_request_as_chat", &chat::encode_request(&request));

    let request = anthropic::decode_request(&fixture("anthropic_request")).unwrap();
    let as_responses = responses::encode_request(&request);
    let input = as_responses["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message"
        ]
    );
    assert_eq!(input[5]["output"], json!("Error: station offline"));
    snapshot("anthropic_request_as_responses", &as_responses);
    let back = responses::decode_request(&as_responses).unwrap();
    validate_pairing(&back).unwrap();
}

#[test]
fn reasoning_goes_back_to_its_own_vendor_only() {
    let turn = responses::decode_response(&fixture("responses_response")).unwrap();
    let mut request = responses::decode_request(&fixture("responses_request")).unwrap();
    request.messages.push(conversation::Message::new(
        Role::Assistant,
        turn.content.clone(),
    ));
    let body = responses::encode_request(&request);
    assert!(
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["encrypted_content"] == json!("gAAAA-next"))
    );
    let body = anthropic::encode_request(&request);
    assert!(!body.to_string().contains("gAAAA"));
}

#[test]
fn turns_cross_between_responses_and_the_others() {
    let turn = responses::decode_response(&fixture("responses_response")).unwrap();
    snapshot(
        "responses_response_as_anthropic",
        &anthropic::encode_response(&turn),
    );
    snapshot("responses_response_as_chat", &chat::encode_response(&turn));
    let turn = anthropic::decode_response(&fixture("anthropic_response")).unwrap();
    let body = responses::encode_response(&turn);
    // The server-run code call is a `code_interpreter_call` item; the program's call of a
    // client tool names it as its `program` caller.
    assert_eq!(body["output"][1]["type"], json!("code_interpreter_call"));
    assert_eq!(body["output"][1]["id"], json!("srvtoolu_1"));
    assert_eq!(body["output"][2]["type"], json!("function_call"));
    assert_eq!(body["output"][2]["call_id"], json!("toolu_3"));
    assert_eq!(
        body["output"][2]["caller"],
        json!({"type": "program", "caller_id": "srvtoolu_1"})
    );
    snapshot("anthropic_response_as_responses", &body);
}

fn replay<A: Accumulator>(
    mut accumulator: A,
    events: &[stream::Event],
) -> (conversation::Turn, Vec<String>) {
    let mut completed = Vec::new();
    let mut done = false;
    for (name, data) in events {
        match accumulator.push(name, data).unwrap() {
            Progress::ToolCallComplete(call) => completed.push(call.id),
            Progress::Done => done = true,
            _ => {}
        }
    }
    assert!(done, "the stream ends with its terminator");
    (accumulator.finish().unwrap(), completed)
}

#[test]
fn anthropic_stream_encodes_and_accumulates_back_to_the_turn() {
    let turn = anthropic::decode_response(&fixture("anthropic_response")).unwrap();
    let events = stream::anthropic_events(&turn);
    snapshot("anthropic_stream", &json!(events));
    let (back, completed) = replay(stream::AnthropicAccumulator::default(), &events);
    assert_eq!(completed, ["toolu_3"]);
    assert_eq!(
        anthropic::encode_response(&back),
        fixture("anthropic_response")
    );
}

#[test]
fn anthropic_partial_tool_input_is_not_a_complete_call() {
    let mut acc = stream::AnthropicAccumulator::default();
    let start = json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}});
    assert_eq!(
        acc.push("content_block_start", &start).unwrap(),
        Progress::Pending
    );
    let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}});
    assert_eq!(
        acc.push("content_block_delta", &delta).unwrap(),
        Progress::Pending
    );
    let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "1}"}});
    assert_eq!(
        acc.push("content_block_delta", &delta).unwrap(),
        Progress::Pending
    );
    let Progress::ToolCallComplete(call) = acc
        .push("content_block_stop", &json!({"index": 0}))
        .unwrap()
    else {
        panic!("the block stop completes the call");
    };
    assert_eq!(call.input, json!({"a": 1}));
    let error =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert!(acc.push("error", &error).is_err());
}

#[test]
fn chat_stream_encodes_and_accumulates_back_to_the_turn() {
    let turn = chat::decode_response(&fixture("chat_response")).unwrap();
    let events = stream::chat_events(&turn);
    snapshot("chat_stream", &json!(events));
    let (back, completed) = replay(stream::ChatAccumulator::default(), &events);
    assert_eq!(completed, ["call_1", "call_2"]);
    assert_eq!(back.content, turn.content);
    assert_eq!(back.stop_reason, turn.stop_reason);
    assert_eq!(back.usage.output_tokens, 30);
}

#[test]
fn responses_stream_encodes_and_accumulates_back_to_the_turn() {
    let turn = responses::decode_response(&fixture("responses_response")).unwrap();
    let events = stream::responses_events(&turn);
    let numbers: Vec<u64> = events
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..events.len() as u64).collect::<Vec<_>>());
    snapshot("responses_stream", &json!(events));
    let (back, completed) = replay(stream::ResponsesAccumulator::default(), &events);
    assert_eq!(completed, ["call_3", "call_4"]);
    assert_eq!(
        responses::encode_response(&back),
        fixture("responses_response")
    );
}

#[test]
fn a_turn_from_one_vendor_streams_in_another() {
    let turn = responses::decode_response(&fixture("responses_response")).unwrap();
    let (back, completed) = replay(
        stream::AnthropicAccumulator::default(),
        &stream::anthropic_events(&turn),
    );
    assert_eq!(completed, ["call_3", "call_4"]);
    assert_eq!(back.tool_calls().count(), 2);
    let turn = anthropic::decode_response(&fixture("anthropic_response")).unwrap();
    let (back, _) = replay(
        stream::ChatAccumulator::default(),
        &stream::chat_events(&turn),
    );
    assert_eq!(
        back.tool_calls().next().unwrap().input,
        json!({"city": "Paris"})
    );
}

#[test]
fn empty_text_beside_tool_calls_does_not_reach_anthropic() {
    let body = json!({"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"}
    ]});
    let request = chat::decode_request(&body).unwrap();
    assert_eq!(chat::encode_request(&request), body);
    let as_anthropic = anthropic::encode_request(&request);
    assert_eq!(
        as_anthropic["messages"][1]["content"],
        json!([{"type": "tool_use", "id": "call_1", "name": "f", "input": {}}])
    );
}

#[test]
fn a_code_call_shown_twice_to_a_responses_client_decodes_to_one_call_and_its_result() {
    // The program waited for the client (running), then ended (completed, in the next
    // response): the client sends both items back.
    let body = json!({"model": "m", "input": [
        {"role": "user", "content": "go"},
        {"type": "code_interpreter_call", "id": "srvtoolu_9", "code": "print(1)",
         "container_id": "container_1", "outputs": null, "status": "in_progress"},
        {"type": "code_interpreter_call", "id": "srvtoolu_9", "code": null,
         "container_id": "container_1", "outputs": [{"type": "logs", "logs": "1\n"}],
         "status": "completed"}
    ]});
    let request = responses::decode_request(&body).unwrap();
    let blocks: Vec<&conversation::ContentBlock> =
        request.messages.iter().flat_map(|m| &m.content).collect();
    let calls = blocks
        .iter()
        .filter(|b| matches!(b, conversation::ContentBlock::ServerToolCall { .. }))
        .count();
    assert_eq!(calls, 1);
    let result = blocks.iter().find_map(|b| match b {
        conversation::ContentBlock::ServerToolResult {
            tool_use_id,
            content,
            ..
        } => Some((tool_use_id.clone(), content.clone())),
        _ => None,
    });
    let (id, content) = result.expect("the completed item carries the result");
    assert_eq!(id, "srvtoolu_9");
    assert_eq!(content["stdout"], json!("1\n"));
    assert_eq!(content["return_code"], json!(0));
}

#[test]
fn a_hosted_tool_reaches_its_own_vendor_only_and_the_encoders_agree() {
    let body = json!({"model": "m", "max_tokens": 10,
    "messages": [{"role": "user", "content": "news?"}],
    "tools": [
        {"name": "get_weather", "input_schema": {"type": "object"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    ]});
    let request = anthropic::decode_request(&body).unwrap();
    let [function, search] = &request.tools[..] else {
        panic!("two tools: {:?}", request.tools)
    };
    for vendor in [
        Vendor::Anthropic,
        Vendor::OpenaiChat,
        Vendor::OpenaiResponses,
    ] {
        assert!(function.reaches(vendor), "{vendor:?}");
        assert_eq!(
            search.reaches(vendor),
            vendor == Vendor::Anthropic,
            "{vendor:?}"
        );
    }
    // What `reaches` says is what each encoder keeps.
    let anthropic_tools = anthropic::encode_request(&request)["tools"].clone();
    assert_eq!(anthropic_tools, body["tools"]);
    let chat_tools = chat::encode_request(&request)["tools"].clone();
    assert_eq!(chat_tools.as_array().map(Vec::len), Some(1), "{chat_tools}");
    let responses_tools = responses::encode_request(&request)["tools"].clone();
    assert_eq!(
        responses_tools.as_array().map(Vec::len),
        Some(1),
        "{responses_tools}"
    );
}

#[test]
fn every_code_execution_version_is_the_code_tool() {
    use cordon_protocol::conversation::is_code_tool_type;
    for kind in [
        "code_execution_20250825",
        "code_execution_20260120",
        "code_execution_20260521",
        "code_interpreter",
    ] {
        assert!(is_code_tool_type(kind), "{kind}");
    }
    for kind in [
        "web_search_20250305",
        "computer_20251124",
        "code_execution",
        "program",
    ] {
        assert!(!is_code_tool_type(kind), "{kind}");
    }
    // A program's call under the newest version is Responses' `program` caller.
    let body = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
            "name": "get_weather", "input": {},
            "caller": {"type": "code_execution_20260521", "tool_id": "srvtoolu_1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
            "content": "sun"}]}
    ]});
    let request = anthropic::decode_request(&body).unwrap();
    let encoded = responses::encode_request(&request);
    let call = encoded["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .unwrap()
        .clone();
    assert_eq!(
        call["caller"],
        json!({"type": "program", "caller_id": "srvtoolu_1"})
    );
}
