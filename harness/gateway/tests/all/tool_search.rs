//! Tool search run by Cordon: deferred tools kept from the model until its search (regex
//! or BM25) finds them, for any upstream; the search shown to Anthropic clients as a server
//! tool; malformed declarations refused.

use cordon_gateway::{Api, GatewayOptions, MessagesCall};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{StandIn, gateway, send};

fn tools(search: &str) -> Value {
    json!([
        {"type": search, "name": if search.contains("bm25") { "tool_search_tool_bm25" } else { "tool_search_tool_regex" }},
        {"name": "get_time", "description": "Time in a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "get_weather", "description": "Current conditions",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string", "description": "City for the forecast"}}},
         "defer_loading": true},
        {"name": "send_email", "description": "Send an email message",
         "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}},
         "defer_loading": true}
    ])
}

fn offered_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// The search, then the found tool called, through each upstream API.
#[tokio::test]
async fn a_regex_search_loads_the_tool_it_finds_for_every_upstream() {
    for upstream in [Api::Anthropic, Api::OpenaiChat, Api::OpenaiResponses] {
        let standin = StandIn::start().await;
        let (gw, recorder) = gateway(&standin, upstream, GatewayOptions::default());
        standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search_tool_regex", "input": {"query": "(?i)forecast"}}]));
        standin.turn(json!([{"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {"city": "Paris"}}]));
        let question = json!({"role": "user", "content": "Weather in Paris?"});
        let body = json!({"model": "m", "max_tokens": 100, "messages": [question],
                          "tools": tools("tool_search_tool_regex_20251119")});
        let reply = send(&gw, body.clone()).await;
        assert_eq!(reply.status, 200, "{upstream:?}: {}", reply.body);
        let bodies = standin.bodies();
        // First round: the deferred tools are not offered; the search is, as a function.
        assert_eq!(
            offered_names(&bodies[0]),
            ["get_time", "tool_search_tool_regex"],
            "{upstream:?}"
        );
        assert!(!bodies[0].to_string().contains("defer_loading"));
        // Second round: the tool found (by a parameter's description) is offered in full.
        assert_eq!(
            offered_names(&bodies[1]),
            ["get_time", "tool_search_tool_regex", "get_weather"],
            "{upstream:?}"
        );
        assert!(
            bodies[1]
                .to_string()
                .contains("Found 1 tool and loaded it; call it directly: get_weather"),
            "{upstream:?}: {}",
            bodies[1]
        );
        // The client sees the search as a server tool and the found tool's call as its own.
        let content = reply.body["content"].as_array().unwrap();
        assert_eq!(content[0]["type"], "server_tool_use");
        let search_id = content[0]["id"].as_str().unwrap();
        assert!(search_id.starts_with("srvtoolu_"));
        assert_eq!(content[0]["input"], json!({"query": "(?i)forecast"}));
        assert_eq!(
            content[1],
            json!({"type": "tool_search_tool_result", "tool_use_id": search_id,
                   "content": {"type": "tool_search_tool_search_result",
                               "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]}})
        );
        assert_eq!(content[2]["name"], "get_weather");
        assert_eq!(reply.body["stop_reason"], "tool_use");
        let runs: Vec<String> = recorder
            .entries(&reply.conversation_id)
            .iter()
            .filter(|e| e.kind == "tool_call")
            .map(|e| e.data["runs"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(runs, ["tool_search", "client"], "{upstream:?}");

        // The next request sends it all back: get_weather stays loaded, and the model
        // reads the same search result.
        standin.turn(json!([{"type": "text", "text": "21 °C"}]));
        let history = json!([question, {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "21"}]}]);
        let mut next = body.clone();
        next["messages"] = history;
        let reply = send(&gw, next).await;
        assert_eq!(reply.status, 200, "{upstream:?}: {}", reply.body);
        let third = &standin.bodies()[2];
        assert_eq!(
            offered_names(third),
            ["get_time", "tool_search_tool_regex", "get_weather"],
            "{upstream:?}"
        );
        assert!(
            third
                .to_string()
                .contains("Found 1 tool and loaded it; call it directly: get_weather")
        );
    }
}

#[tokio::test]
async fn a_bm25_search_ranks_by_words_and_an_openai_client_sees_no_search() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search_tool_bm25", "input": {"query": "send an email to Bob"}}]));
    standin.turn(json!([{"type": "text", "text": "Found it."}]));
    let body = json!({"model": "m", "input": "Mail Bob",
        "tools": [{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
                  {"type": "function", "name": "send_email", "description": "Send an email message",
                   "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
                   "defer_loading": true},
                  {"type": "function", "name": "get_weather", "description": "Current conditions",
                   "parameters": {"type": "object"}, "defer_loading": true}]});
    let reply = gw
        .messages(MessagesCall::new(body).api(Api::OpenaiResponses))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let bodies = standin.bodies();
    assert_eq!(offered_names(&bodies[0]), ["tool_search_tool_bm25"]);
    assert_eq!(
        offered_names(&bodies[1]),
        ["tool_search_tool_bm25", "send_email"]
    );
    // The search ran inline: a Responses client sees only the answer.
    let output = reply.body["output"].as_array().unwrap();
    assert_eq!(output.len(), 1, "{output:?}");
    assert_eq!(output[0]["type"], "message");
}

#[tokio::test]
async fn a_bad_pattern_is_the_models_to_read_and_shown_as_a_result_error() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search_tool_regex", "input": {"query": "get(?=_)"}}]));
    standin.turn(json!([{"type": "text", "text": "Sorry."}]));
    let body = json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
                      "tools": tools("tool_search_tool_regex_20251119")});
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let second = standin.bodies()[1].to_string();
    assert!(second.contains("look-around"), "{second}");
    let result = &reply.body["content"][1];
    assert_eq!(result["type"], "tool_search_tool_result");
    assert_eq!(result["content"]["type"], "tool_search_tool_result_error");
    assert_eq!(result["content"]["error_code"], "invalid_tool_input");
    // Nothing was loaded.
    assert_eq!(
        offered_names(&standin.bodies()[1]),
        ["get_time", "tool_search_tool_regex"]
    );
}

#[tokio::test]
async fn malformed_declarations_are_400s_before_the_upstream_is_asked() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let question = json!([{"role": "user", "content": "hi"}]);
    let cases = [
        (
            json!([{"name": "x", "input_schema": {"type": "object"}, "defer_loading": true}]),
            "no tool search is declared",
        ),
        (
            json!([{"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex", "defer_loading": true}]),
            "cannot itself have `defer_loading: true`",
        ),
        (
            json!([{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25", "top_k": 3}]),
            "has no field `top_k`",
        ),
        (
            json!([{"type": "tool_search_tool_regex_20251119"},
                   {"name": "x", "input_schema": {"type": "object"}, "defer_loading": "yes"}]),
            "`defer_loading` must be true or false",
        ),
    ];
    for (tools, expected) in cases {
        let body = json!({"model": "m", "max_tokens": 10, "messages": question, "tools": tools});
        let reply = send(&gw, body).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        assert_eq!(reply.body["error"]["type"], "invalid_request_error");
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn deferred_operator_tools_wait_for_a_search_and_then_run_inline() {
    let registry = cordon_core::ToolRegistry::from_json(
        &json!({"tools": [
            {"name": "lookup_invoice", "description": "Find an invoice by number",
             "input_schema": {"type": "object", "properties": {"number": {"type": "string"}}},
             "handler": {"kind": "static", "result": {"total": 99}}, "defer_loading": true},
            {"name": "ping", "input_schema": {"type": "object"},
             "handler": {"kind": "static", "result": "pong"}, "defer_loading": true}
        ]})
        .to_string(),
        "<test>",
    )
    .unwrap();
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_operator_tools(registry);

    // Without a search declared, the operator's deferred tools are offered as usual.
    standin.turn(json!([{"type": "text", "text": "ok"}]));
    let plain =
        json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(send(&gw, plain).await.status, 200);
    assert_eq!(
        offered_names(&standin.bodies()[0]),
        ["lookup_invoice", "ping"]
    );

    standin.turn(json!([{"type": "tool_use", "id": "toolu_s", "name": "tool_search_tool_bm25", "input": {"query": "invoice"}}]));
    standin.turn(json!([{"type": "tool_use", "id": "toolu_l", "name": "lookup_invoice", "input": {"number": "7"}}]));
    standin.turn(json!([{"type": "text", "text": "The total is 99."}]));
    let body = json!({"model": "m", "max_tokens": 100,
                      "messages": [{"role": "user", "content": "Invoice 7?"}],
                      "tools": [{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}]});
    let reply = send(&gw, body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let bodies = standin.bodies();
    assert_eq!(offered_names(&bodies[1]), ["tool_search_tool_bm25"]);
    assert_eq!(
        offered_names(&bodies[2]),
        ["tool_search_tool_bm25", "lookup_invoice"]
    );
    assert!(bodies[3].to_string().contains("99"));
    let content = reply.body["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "tool_search_tool_result", "text"]
    );
}
