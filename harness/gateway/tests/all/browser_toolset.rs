//! Anthropic's `browser_toolset_20260801` bound to a Cordon computer, against a stand-in
//! computer: members run as computer actions, disabled and unrunnable members refused to
//! the model, malformed or unrunnable configs refused with a 400.

use std::sync::{Arc, Mutex};

use cordon_gateway::{Api, ComputerOutcome, Computers, GatewayOptions, MessagesCall};
use futures::future::BoxFuture;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{StandIn, gateway};

/// Records every action; each answers a tiny screenshot.
#[derive(Debug, Default)]
struct RecordingComputers {
    actions: Mutex<Vec<Value>>,
}

impl Computers for RecordingComputers {
    fn open<'a>(
        &'a self,
        _url: &'a str,
        _display: Option<(u64, u64)>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async { Ok("cmp_browser".to_owned()) })
    }

    fn exists<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move { id == "cmp_browser" })
    }

    fn act<'a>(
        &'a self,
        _id: &'a str,
        input: &'a Value,
        _approved: bool,
    ) -> BoxFuture<'a, Result<ComputerOutcome, String>> {
        self.actions.lock().unwrap().push(input.clone());
        Box::pin(async {
            Ok(ComputerOutcome::Done {
                screenshot: Some(("image/png".into(), "iVBORw0KGgo=".into())),
                text: None,
                is_error: false,
            })
        })
    }
}

fn toolset() -> Value {
    json!({"type": "browser_toolset_20260801", "configs": {"left_click": {"enabled": false}}})
}

fn member(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input, "toolset_name": "browser"})
}

#[tokio::test]
async fn members_run_on_the_computer_and_disabled_or_unrunnable_ones_are_refused() {
    let standin = StandIn::start().await;
    let computers = Arc::new(RecordingComputers::default());
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(computers.clone());
    standin.turn(json!([
        member("toolu_n", "navigate", json!({"url": "example.com"})),
        member("toolu_t", "type", json!({"text": "hello"})),
        member(
            "toolu_c",
            "left_click",
            json!({"target": {"type": "coordinate", "x": 3, "y": 4}})
        ),
        member("toolu_r", "read_page", json!({})),
        member(
            "toolu_d",
            "double_click",
            json!({"target": {"type": "coordinate", "x": 5, "y": 6}})
        )
    ]));
    standin.turn(json!([{"type": "text", "text": "Done."}]));
    let body = json!({"model": "m", "max_tokens": 100, "tools": [toolset()],
                      "messages": [{"role": "user", "content": "Search the site"}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_browser".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["content"][0]["text"], "Done.");
    assert_eq!(
        *computers.actions.lock().unwrap(),
        [
            json!({"kind": "navigate", "url": "https://example.com"}),
            json!({"action": "type", "text": "hello"}),
            json!({"action": "double_click", "coordinate": [5, 6]})
        ]
    );
    let bodies = standin.bodies();
    // The Anthropic upstream gets the toolset with what Cordon cannot run switched off.
    let declared = &bodies[0]["tools"][0];
    assert_eq!(declared["type"], "browser_toolset_20260801");
    assert_eq!(declared["configs"]["left_click"]["enabled"], false);
    assert_eq!(declared["configs"]["read_page"]["enabled"], false);
    assert_eq!(declared["configs"]["navigate"]["enabled"], true);
    let results = bodies[1]["messages"][2]["content"]
        .as_array()
        .unwrap()
        .clone();
    let text_of = |id: &str| {
        results
            .iter()
            .find(|r| r["tool_use_id"] == id)
            .map(|r| r.to_string())
            .unwrap()
    };
    assert!(text_of("toolu_c").contains("the action `left_click` is disabled"));
    assert!(text_of("toolu_r").contains("`read_page` cannot run on Cordon's browser"));
    assert!(text_of("toolu_d").contains("image"));
}

#[tokio::test]
async fn other_upstreams_get_a_browser_function_whose_calls_run_the_same() {
    let standin = StandIn::start().await;
    let computers = Arc::new(RecordingComputers::default());
    let (gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let gw = gw.with_computers(computers.clone());
    standin.turn(json!([{"type": "tool_use", "id": "call_1", "name": "browser",
        "input": {"action": "scroll", "target": {"type": "coordinate", "x": 1, "y": 2}, "scroll_direction": "down"}}]));
    standin.turn(json!([{"type": "text", "text": "Scrolled."}]));
    let body = json!({"model": "m", "max_tokens": 100, "tools": [toolset()],
                      "messages": [{"role": "user", "content": "Scroll"}]});
    let reply = gw
        .messages(MessagesCall::new(body).computer(Some("cmp_browser".into())))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let function = &standin.bodies()[0]["tools"][0]["function"];
    assert_eq!(function["name"], "browser");
    let actions: Vec<&str> = function["parameters"]["properties"]["action"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(actions.contains(&"navigate") && actions.contains(&"scroll"));
    assert!(!actions.contains(&"left_click") && !actions.contains(&"find"));
    assert_eq!(
        *computers.actions.lock().unwrap(),
        [
            json!({"action": "scroll", "coordinate": [1, 2], "scroll_direction": "down", "scroll_amount": 3})
        ]
    );
}

#[tokio::test]
async fn malformed_or_unrunnable_configs_are_400s() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(Arc::new(RecordingComputers::default()));
    let cases = [
        (
            json!({"configs": {"find": {"enabled": true}}}),
            "cannot run `find`",
        ),
        (
            json!({"configs": {"teleport": {"enabled": true}}}),
            "`configs.teleport` names no member",
        ),
        (
            json!({"configs": {"type": {"enabled": 1}}}),
            "must be true or false",
        ),
        (json!({"configs": []}), "`configs` must be an object"),
    ];
    for (extra, expected) in cases {
        let mut tool = json!({"type": "browser_toolset_20260801"});
        for (k, v) in extra.as_object().unwrap() {
            tool[k] = v.clone();
        }
        let body = json!({"model": "m", "max_tokens": 10, "tools": [tool],
                          "messages": [{"role": "user", "content": "hi"}]});
        let reply = gw
            .messages(MessagesCall::new(body).computer(Some("cmp_browser".into())))
            .await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
    assert!(standin.bodies().is_empty());
}

#[tokio::test]
async fn unbound_the_toolset_is_the_clients_and_reaches_an_anthropic_upstream_as_it_came() {
    let standin = StandIn::start().await;
    let (gw, _) = gateway(&standin, Api::Anthropic, GatewayOptions::default());
    let gw = gw.with_computers(Arc::new(RecordingComputers::default()));
    let tool = json!({"type": "browser_toolset_20260801", "configs": {"find": {"enabled": true}}});
    standin.turn(json!([member(
        "toolu_f",
        "find",
        json!({"query": "search bar"})
    )]));
    let body = json!({"model": "m", "max_tokens": 100, "tools": [tool.clone()],
                      "messages": [{"role": "user", "content": "Find it"}]});
    let reply = gw.messages(MessagesCall::new(body.clone())).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(standin.bodies()[0]["tools"][0], tool);
    // The member call goes back to the client, which runs its own browser.
    assert_eq!(reply.body["content"][0]["name"], "find");
    assert_eq!(reply.body["stop_reason"], "tool_use");

    // Another upstream cannot take the toolset when Cordon does not run it.
    let (chat_gw, _) = gateway(&standin, Api::OpenaiChat, GatewayOptions::default());
    let reply = chat_gw.messages(MessagesCall::new(body)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
}
