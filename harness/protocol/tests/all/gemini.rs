//! Gemini `generateContent` in the canonical conversation: lossless round trips of
//! requests and responses (thought signatures on the part they came with, calls with and
//! without ids, parallel calls, images), conversions to and from the other vendors, and
//! `streamGenerateContent` chunks through the accumulator and the live encoder.

use cordon_protocol::conversation::stream::{
    Accumulator, Delta, GeminiAccumulator, GeminiLiveEncoder, LiveEncoder, Progress, gemini_events,
};
use cordon_protocol::conversation::{
    ContentBlock, Role, StopReason, ToolChoice, ToolDefinition, ToolResultContent, Vendor,
    anthropic, encode_error, gemini, responses, validate_pairing,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const PNG: &str = "iVBORw0KGgo=";

/// A Gemini conversation as the google-genai SDK sends it: thoughts and signatures, a call
/// without an id answered by name, two parallel calls with ids, an image, tools of both
/// spellings, and settings in `generationConfig`.
fn request_body() -> Value {
    json!({
        "contents": [
            {"role": "user", "parts": [
                {"text": "What is the weather in Paris and in Rome? Here is a map."},
                {"inlineData": {"mimeType": "image/png", "data": PNG}}
            ]},
            {"role": "model", "parts": [
                {"text": "Let me think.", "thought": true},
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}},
                 "thoughtSignature": "sig-one"}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "response": {"result": "18C"}}}
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Rome"}},
                 "thoughtSignature": "sig-two"},
                {"functionCall": {"id": "c2", "name": "time", "args": {"city": "Rome"}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "c1", "name": "weather",
                                      "response": {"temperature": 24, "sky": "clear"}}},
                {"functionResponse": {"id": "c2", "name": "time",
                                      "response": {"error": "no clock"}}}
            ]},
            {"role": "model", "parts": [{"text": "Both are warm.", "thoughtSignature": "sig-three"}]},
            {"role": "user", "parts": [{"text": "Thanks"}]}
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [
            {"functionDeclarations": [
                {"name": "weather", "description": "Weather of a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}}
            ]},
            {"functionDeclarations": [
                {"name": "time", "parametersJsonSchema": {"type": "object",
                  "properties": {"city": {"type": "string"}}, "additionalProperties": false}}
            ]},
            {"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"maxOutputTokens": 1000, "temperature": 0.5, "topP": 0.9,
                             "stopSequences": ["END"], "topK": 40,
                             "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    })
}

/// What a same-vendor round trip gives back: the same conversation, function tools in one
/// Tool object, built-ins after them.
fn request_body_reencoded() -> Value {
    let mut body = request_body();
    body["tools"] = json!([
        {"functionDeclarations": [
            body["tools"][0]["functionDeclarations"][0].clone(),
            body["tools"][1]["functionDeclarations"][0].clone(),
        ]},
        body["tools"][2].clone(),
    ]);
    // Answers without ids are paired by name; the pairing is not written back.
    body
}

#[test]
fn gemini_request_round_trips_with_signatures_ids_and_settings() {
    let request = gemini::decode_request(&json!({
        "model": "models/gemini-2.5-flash", "stream": true,
        "contents": request_body()["contents"].clone(),
    }))
    .unwrap();
    assert_eq!(request.model, "gemini-2.5-flash");
    assert!(request.stream);

    let request = gemini::decode_request(&request_body()).unwrap();
    validate_pairing(&request).unwrap();
    assert_eq!(request.max_tokens, Some(1000));
    assert_eq!(request.temperature, Some(0.5));
    assert_eq!(request.top_p, Some(0.9));
    assert_eq!(request.stop_sequences, vec!["END".to_owned()]);
    assert_eq!(request.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(request.system.as_ref().unwrap().text(), "Be brief.");
    assert!(matches!(
        &request.tools[2],
        ToolDefinition::BuiltIn { vendor: Vendor::Gemini, kind, .. } if kind == gemini::COMPUTER_USE
    ));
    // The call without an id got one of Cordon's, and its answer found it by name.
    let first_call = match &request.messages[1].content[1] {
        ContentBlock::ToolCall(call) => call.clone(),
        other => panic!("{other:?}"),
    };
    assert!(gemini::is_synthesized_call_id(&first_call.id));
    match &request.messages[2].content[0] {
        ContentBlock::ToolResult(result) => {
            assert_eq!(result.call_id, first_call.id);
            assert_eq!(result.content, ToolResultContent::Text("18C".into()));
        }
        other => panic!("{other:?}"),
    }
    // The signature follows the part it came with, as Gemini reasoning.
    assert_eq!(
        request.messages[1].content[2],
        ContentBlock::Reasoning {
            vendor: Vendor::Gemini,
            data: json!({"thoughtSignature": "sig-one", "signs": "functionCall"}),
        }
    );
    match &request.messages[4].content[1] {
        ContentBlock::ToolResult(result) => assert!(result.is_error),
        other => panic!("{other:?}"),
    }
    assert_eq!(gemini::encode_request(&request), request_body_reencoded());
}

#[test]
fn snake_case_fields_are_read_like_camel_case() {
    let request = gemini::decode_request(&json!({
        "contents": [{"role": "user", "parts": [{"text": "hi"},
            {"inline_data": {"mime_type": "image/jpeg", "data": PNG}}]}],
        "system_instruction": {"parts": [{"text": "sys"}]},
        "tools": [{"function_declarations": [{"name": "f", "parameters": {"type": "OBJECT",
            "properties": {"q": {"type": "STRING"}}}}]}],
        "tool_config": {"function_calling_config": {"mode": "ANY",
                                                    "allowed_function_names": ["f"]}},
        "generation_config": {"max_output_tokens": 20}
    }))
    .unwrap();
    assert_eq!(request.max_tokens, Some(20));
    assert_eq!(request.system.unwrap().text(), "sys");
    assert_eq!(
        request.tool_choice,
        Some(ToolChoice::Tool { name: "f".into() })
    );
    assert!(matches!(
        request.messages[0].content[1],
        ContentBlock::Image { .. }
    ));
    match &request.tools[0] {
        // The SDK's upper-case OpenAPI types become JSON Schema's for every vendor.
        ToolDefinition::Function(f) => assert_eq!(
            f.input_schema,
            json!({"type": "object", "properties": {"q": {"type": "string"}}})
        ),
        other => panic!("{other:?}"),
    }
}

/// A Gemini conversation sent to Anthropic: ids paired, the error flag kept, signatures and
/// thoughts left out, the computer-use built-in not sent to another vendor.
#[test]
fn gemini_request_converts_to_anthropic() {
    let request = gemini::decode_request(&request_body()).unwrap();
    let body = anthropic::encode_request(&request);
    let messages = body["messages"].as_array().unwrap();
    let call = &messages[1]["content"][0];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(call["input"], json!({"city": "Paris"}));
    assert_eq!(messages[2]["content"][0]["tool_use_id"], call["id"]);
    assert_eq!(messages[4]["content"][1]["is_error"], true);
    assert_eq!(messages[4]["content"][1]["content"], "no clock");
    assert_eq!(
        messages[4]["content"][0]["content"],
        json!({"temperature": 24, "sky": "clear"}).to_string()
    );
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["max_tokens"], 1000);
    assert!(!body.to_string().contains("sig-"));
}

/// An Anthropic conversation sent to Gemini: function responses named after their calls,
/// tool-result images as `functionResponse.parts`, schemas as `parametersJsonSchema`.
#[test]
fn anthropic_request_converts_to_gemini() {
    let request = anthropic::decode_request(&json!({
        "model": "claude", "max_tokens": 64, "system": "sys",
        "tools": [{"name": "look", "description": "Look", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": "Look twice"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "anthropic-sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}},
                {"type": "tool_use", "id": "toolu_2", "name": "look", "input": {"at": 2}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": "a cat"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                  "data": PNG}}
                ]},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom",
                 "is_error": true}
            ]}
        ]
    }))
    .unwrap();
    assert_eq!(
        gemini::encode_request(&request),
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Look twice"}]},
                {"role": "model", "parts": [
                    {"functionCall": {"name": "look", "args": {}, "id": "toolu_1"}},
                    {"functionCall": {"name": "look", "args": {"at": 2}, "id": "toolu_2"}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "look", "response": {"result": "a cat"},
                        "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG}}],
                        "id": "toolu_1"}},
                    {"functionResponse": {"name": "look", "response": {"error": "boom"},
                                          "id": "toolu_2"}}
                ]}
            ],
            "systemInstruction": {"parts": [{"text": "sys"}]},
            "tools": [{"functionDeclarations": [{"name": "look", "description": "Look",
                                                 "parametersJsonSchema": {"type": "object"}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
            "generationConfig": {"maxOutputTokens": 64}
        })
    );
}

/// Ids Cordon made for calls without one never reach a Gemini upstream; its own do.
#[test]
fn synthesized_ids_stay_out_of_upstream_requests_but_reach_clients() {
    let body = json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}},
                                    {"functionCall": {"name": "f", "args": {"n": 2}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "f", "response": {"result": "one"}}},
            {"functionResponse": {"name": "f", "response": {"result": "two"}}}]}
    ]});
    let request = gemini::decode_request(&body).unwrap();
    validate_pairing(&request).unwrap();
    let ids: Vec<String> = request.messages[1]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall(c) => Some(c.id.clone()),
            _ => None,
        })
        .collect();
    let answered: Vec<String> = request.messages[2]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r.call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, answered);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(gemini::encode_request(&request), body);
}

fn response_body() -> Value {
    json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Planning.", "thought": true},
                {"text": "I will check both."},
                {"functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                 "thoughtSignature": "sig-a"},
                {"functionCall": {"name": "weather", "args": {"city": "Bergen"}}}
            ]},
            "finishReason": "STOP",
            "index": 0,
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
        }],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 12,
                          "thoughtsTokenCount": 8, "totalTokenCount": 50},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1"
    })
}

#[test]
fn gemini_response_round_trips_and_reads_calls_as_tool_use() {
    let turn = gemini::decode_response(&response_body()).unwrap();
    assert_eq!(turn.id, "resp-1");
    assert_eq!(turn.model, "gemini-2.5-flash");
    assert_eq!(turn.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(turn.usage.input_tokens, 30);
    assert_eq!(turn.usage.output_tokens, 20);
    let calls: Vec<_> = turn.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| gemini::is_synthesized_call_id(&c.id)));
    assert_ne!(calls[0].id, calls[1].id);
    // A client gets the ids Cordon gave the calls, so its answers can name them.
    let mut expected = response_body();
    let parts = &mut expected["candidates"][0]["content"]["parts"];
    parts[2]["functionCall"]["id"] = json!(calls[0].id);
    parts[3]["functionCall"]["id"] = json!(calls[1].id);
    assert_eq!(gemini::encode_response(&turn), expected);

    // To an Anthropic client: thoughts and signatures left out, calls as tool_use.
    let message = anthropic::encode_response(&turn);
    assert_eq!(message["stop_reason"], "tool_use");
    let kinds: Vec<&str> = message["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "tool_use"]);
}

#[test]
fn finish_reasons_map_both_ways() {
    let turn_of = |reason: &str| {
        gemini::decode_response(&json!({"candidates": [{
            "content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": reason}]}))
        .unwrap()
    };
    assert_eq!(
        turn_of("MAX_TOKENS").stop_reason,
        Some(StopReason::MaxTokens)
    );
    assert_eq!(turn_of("SAFETY").stop_reason, Some(StopReason::Refusal));
    let recitation = turn_of("RECITATION");
    assert_eq!(recitation.stop_reason, Some(StopReason::Refusal));
    let back = gemini::encode_response(&recitation);
    assert_eq!(back["candidates"][0]["finishReason"], "RECITATION");
    // Another vendor's turn.
    let message = anthropic::decode_response(&json!({"id": "msg_1", "model": "claude",
        "content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens",
        "usage": {"input_tokens": 3, "output_tokens": 4}}))
    .unwrap();
    let body = gemini::encode_response(&message);
    assert_eq!(body["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert_eq!(
        body["usageMetadata"],
        json!({"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7})
    );
    // A blocked prompt has no candidate.
    let blocked =
        gemini::decode_response(&json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap();
    assert_eq!(blocked.stop_reason, Some(StopReason::Refusal));
}

/// Signatures kept aside by a gateway come back first in the message: each still goes on
/// the first part of the kind it came with.
#[test]
fn a_signature_put_back_first_goes_on_the_next_part_of_its_kind() {
    let turn = gemini::decode_response(&response_body()).unwrap();
    let (signatures, rest): (Vec<ContentBlock>, Vec<ContentBlock>) =
        turn.content.iter().cloned().partition(
            |b| matches!(b, ContentBlock::Reasoning { data, .. } if data.get("thought").is_none()),
        );
    let mut message = turn.clone();
    message.content = signatures.into_iter().chain(rest).collect();
    let parts = gemini::encode_response(&message)["candidates"][0]["content"]["parts"].clone();
    assert_eq!(parts[2]["thoughtSignature"], "sig-a");
    assert!(parts[1].get("thoughtSignature").is_none());
    assert!(parts[3].get("thoughtSignature").is_none());
}

#[test]
fn errors_have_googles_shape() {
    let error = encode_error(Vendor::Gemini, 400, "invalid_request_error", "bad");
    assert_eq!(
        error.body,
        json!({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}})
    );
    assert_eq!(
        encode_error(Vendor::Gemini, 502, "api_error", "x").body["error"]["status"],
        "UNAVAILABLE"
    );
}

/// Chunks as the real API streams them: text cut anywhere, the signature on a last empty
/// text part, a whole function call.
fn stream_chunks() -> Vec<Value> {
    let head = |parts: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
               "modelVersion": "gemini-2.5-pro", "responseId": "r-9"})
    };
    let mut last = head(json!([{"functionCall": {"name": "f", "args": {"a": 1}},
                                 "thoughtSignature": "sig-call"}]));
    last["candidates"][0]["finishReason"] = json!("STOP");
    last["usageMetadata"] = json!({"promptTokenCount": 5, "candidatesTokenCount": 7,
                                   "totalTokenCount": 12});
    vec![
        head(json!([{"text": "Thinking ", "thought": true}])),
        head(json!([{"text": "hard.", "thought": true}])),
        head(json!([{"text": "Hel"}])),
        head(json!([{"text": "lo"}])),
        head(json!([{"text": "", "thoughtSignature": "sig-text"}])),
        last,
    ]
}

#[test]
fn the_accumulator_rebuilds_a_streamed_turn_and_its_deltas_match_it() {
    let mut accumulator = GeminiAccumulator::default();
    let mut deltas = Vec::new();
    let mut done = false;
    for chunk in stream_chunks() {
        // The call and the end come in one chunk: the end is what it reports.
        done = accumulator.push_deltas("", &chunk, &mut deltas).unwrap() == Progress::Done;
    }
    assert!(done);
    let turn = accumulator.finish().unwrap();
    let call_id = turn.tool_calls().next().unwrap().id.clone();
    assert_eq!(
        gemini::encode_response(&turn)["candidates"][0]["content"]["parts"],
        json!([
            {"text": "Thinking hard.", "thought": true},
            {"text": "Hello", "thoughtSignature": "sig-text"},
            {"functionCall": {"name": "f", "args": {"a": 1}, "id": call_id},
             "thoughtSignature": "sig-call"}
        ])
    );
    assert_eq!(turn.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(turn.usage.output_tokens, 7);
    // Every block stop holds the block the whole turn holds at that place.
    let stopped: Vec<ContentBlock> = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::BlockStop { block, .. } => Some(block.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(stopped, turn.content);
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
    assert!(matches!(deltas.first(), Some(Delta::TurnStart { id, .. }) if id == "r-9"));
    assert!(matches!(deltas.last(), Some(Delta::TurnEnd { .. })));
}

/// A turn as whole-turn chunks and as live chunks rebuilds to the same turn.
#[test]
fn whole_and_live_chunks_rebuild_the_turn() {
    let turn = gemini::decode_response(&response_body()).unwrap();
    let rebuild = |events: Vec<(String, Value)>| {
        let mut accumulator = GeminiAccumulator::default();
        for (name, data) in &events {
            assert_eq!(name, "");
            accumulator.push(name, data).unwrap();
        }
        accumulator.finish().unwrap()
    };
    let whole = rebuild(gemini_events(&turn));
    assert_eq!(
        gemini::encode_response(&whole),
        gemini::encode_response(&turn)
    );

    let mut deltas = Vec::new();
    let mut accumulator = GeminiAccumulator::default();
    for (name, data) in gemini_events(&turn) {
        accumulator.push_deltas(&name, &data, &mut deltas).unwrap();
    }
    let mut encoder = GeminiLiveEncoder::default();
    let mut events = Vec::new();
    for delta in &deltas {
        encoder.encode(delta, &mut events);
    }
    let live = rebuild(events);
    assert_eq!(live.content, turn.content);
    assert_eq!(live.stop_reason, turn.stop_reason);
    assert_eq!(live.usage.input_tokens, turn.usage.input_tokens);
}

#[test]
fn a_stream_error_is_the_upstreams() {
    let mut accumulator = GeminiAccumulator::default();
    let error = accumulator
        .push(
            "",
            &json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
        )
        .unwrap_err();
    assert!(error.to_string().contains("overloaded"), "{error}");
}

/// A Responses turn reaches a Gemini client: its reasoning is left out, its calls keep
/// their ids so the client's answers find them.
#[test]
fn a_responses_turn_reaches_a_gemini_client() {
    let turn = responses::decode_response(&json!({
        "id": "resp_1", "object": "response", "model": "gpt", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
             "arguments": "{\"x\":1}"}
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    }))
    .unwrap();
    let body = gemini::encode_response(&turn);
    assert_eq!(
        body["candidates"][0]["content"],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "f", "args": {"x": 1}, "id": "call_1"}}]})
    );
    assert_eq!(body["candidates"][0]["finishReason"], "STOP");
    let answer = gemini::decode_request(&json!({"contents": [
        {"role": "user", "parts": [{"text": "go"}]},
        body["candidates"][0]["content"].clone(),
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"ok": true}}}]}
    ]}))
    .unwrap();
    validate_pairing(&answer).unwrap();
    assert_eq!(answer.messages[1].role, Role::Assistant);
}

/// What Gemini would refuse is left out: empty text beside another vendor's calls, and a
/// message whose blocks were all another vendor's reasoning.
#[test]
fn empty_text_and_emptied_messages_stay_out_of_gemini_requests() {
    let request = anthropic::decode_request(&json!({
        "model": "m", "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "…", "signature": "s"}]},
            {"role": "user", "content": "Again"},
            {"role": "assistant", "content": [
                {"type": "text", "text": ""},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]
    }))
    .unwrap();
    let body = gemini::encode_request(&request);
    let roles: Vec<&str> = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "user", "model", "user"]);
    assert_eq!(
        body["contents"][2]["parts"],
        json!([{"functionCall": {"name": "f", "args": {}, "id": "toolu_1"}}])
    );
}
