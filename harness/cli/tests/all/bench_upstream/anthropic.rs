//! The Anthropic dialect: `computer_20251124` with `enable_zoom` (a zoom, then the form
//! filled by six `tool_use` blocks of one turn), and `computer_toolset_20260801` (a zoom its
//! configs leave out is refused to the model, then the card dragged).

use serde_json::{Value, json};

use super::standin::{StandIn, Turn, ensure, image_size};
use super::{DISPLAY, EMAIL, NAME, SUBMIT, TERMS, close, css_of_display, mark, run_bench};

fn message(content: Value) -> Value {
    json!({"id": "msg_standin", "type": "message", "role": "assistant", "model": "standin-1",
           "content": content, "stop_reason": "tool_use", "stop_sequence": null,
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

fn tool_use(id: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": "computer", "input": input})
}

/// Checks an Anthropic image block is a PNG of the display size.
fn check_image(block: &Value) -> Result<(), String> {
    let source = &block["source"];
    ensure(
        block["type"] == "image" && source["type"] == "base64",
        || format!("not a base64 image block: {:.200}", block.to_string()),
    )?;
    let size = image_size(
        source["media_type"].as_str().unwrap_or_default(),
        source["data"].as_str().unwrap_or_default(),
    )?;
    ensure(size == DISPLAY, || format!("a screenshot of {size:?}"))
}

/// The `tool_result` blocks of the last user message.
fn tool_results(body: &Value) -> Vec<Value> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    last["content"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

/// The first turn's checks: the tool declared, the prompt and the first screenshot.
fn check_first(body: &Value, tool: &Value) -> Result<(), String> {
    ensure(body["tools"] == json!([tool]), || {
        format!("tools {} instead of [{tool}]", body["tools"])
    })?;
    let first = &body["messages"][0]["content"];
    ensure(
        first[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Ada Lovelace") || t.contains("blue card")),
        || format!("the prompt is not the task's: {}", first[0]),
    )?;
    check_image(&first[1])
}

#[test]
fn computer_20251124_with_zoom_solves_the_form_at_the_display_scale() {
    let tool = json!({"type": "computer_20251124", "name": "computer",
                      "display_width_px": 1024, "display_height_px": 640, "enable_zoom": true});
    let turns: Vec<Turn> = vec![
        Box::new(move |r| {
            ensure(r.beta.as_deref() == Some("computer-use-2025-11-24"), || {
                format!("anthropic-beta {:?}", r.beta)
            })?;
            check_first(&r.body, &tool)?;
            Ok(message(json!([tool_use(
                "toolu_zoom",
                json!({"action": "zoom", "region": [0, 0, 512, 320]})
            )])))
        }),
        Box::new(|r| {
            let results = tool_results(&r.body);
            ensure(
                results.len() == 1 && results[0]["tool_use_id"] == "toolu_zoom",
                || format!("the zoom's result is missing: {results:?}"),
            )?;
            ensure(results[0].get("is_error").is_none(), || {
                format!("the zoom failed: {}", results[0])
            })?;
            let image = results[0]["content"]
                .as_array()
                .and_then(|c| c.iter().find(|b| b["type"] == "image"))
                .cloned()
                .unwrap_or_default();
            check_image(&image)?;
            let click = |id: &str, p: (i64, i64)| {
                tool_use(
                    id,
                    json!({"action": "left_click", "coordinate": [p.0, p.1]}),
                )
            };
            Ok(message(json!([
                click("toolu_1", NAME),
                tool_use("toolu_2", json!({"action": "type", "text": "Ada Lovelace"})),
                click("toolu_3", EMAIL),
                tool_use(
                    "toolu_4",
                    json!({"action": "type", "text": "ada@example.com"})
                ),
                click("toolu_5", TERMS),
                click("toolu_6", SUBMIT),
            ])))
        }),
    ];
    let standin = StandIn::start(turns);
    let (code, run) = run_bench(&standin, "anthropic", "form", &["--enable-zoom"]);
    let episode = &run["episodes"][0];
    assert_eq!(code, 0, "{episode:#}");
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(true), Some(7)),
        "{episode:#}"
    );
    assert_eq!(
        episode["trace"][0]["action"]["actions"][0]["action"],
        "zoom"
    );
    // The model's pixels reach the page scaled by the environment (1024×640 → 1280×800).
    let (model, screen) = mark(episode, 2, 0);
    assert_eq!(model, NAME);
    assert!(close(screen, css_of_display(NAME)), "{screen:?}");
    let (model, screen) = mark(episode, 7, 0);
    assert_eq!(model, SUBMIT);
    assert!(close(screen, css_of_display(SUBMIT)), "{screen:?}");
    assert_eq!(standin.received().len(), 2);
    assert!(standin.received().iter().all(|r| r.path == "/v1/messages"));
}

#[test]
fn the_toolset_refuses_a_zoom_its_configs_leave_out_and_drags_the_card() {
    let turns: Vec<Turn> = vec![
        Box::new(|r| {
            let tool = &r.body["tools"][0];
            ensure(
                tool["type"] == "computer_toolset_20260801"
                    && tool["name"] == "computer"
                    && tool["display_width_px"] == 1024
                    && tool["display_height_px"] == 640,
                || format!("the toolset is not declared: {tool}"),
            )?;
            let configs = &tool["configs"];
            ensure(
                configs["zoom"] == json!({"enabled": false})
                    && configs["left_click_drag"] == json!({"enabled": true})
                    && configs["screenshot"] == json!({"enabled": true}),
                || format!("configs {configs}"),
            )?;
            check_first(&r.body, tool)?;
            Ok(message(json!([tool_use(
                "toolu_zoom",
                json!({"action": "zoom", "region": [0, 0, 100, 100]})
            )])))
        }),
        Box::new(|r| {
            let results = tool_results(&r.body);
            let text = results[0]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            ensure(
                results[0]["is_error"] == true
                    && text.contains("the action `zoom` is disabled for this tool"),
                || format!("the zoom was not refused: {}", results[0]),
            )?;
            Ok(message(json!([tool_use(
                "toolu_drag",
                json!({
                "action": "left_click_drag", "start_coordinate": [200, 280],
                "coordinate": [640, 320]})
            )])))
        }),
    ];
    let standin = StandIn::start(turns);
    let (code, run) = run_bench(
        &standin,
        "anthropic",
        "drag",
        &["--computer-tool", "computer_toolset_20260801"],
    );
    let episode = &run["episodes"][0];
    assert_eq!(code, 0, "{episode:#}");
    // The refused zoom never reached the computer: the drag is the only step.
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(true), Some(1)),
        "{episode:#}"
    );
    let (model, screen) = mark(episode, 1, 0);
    assert_eq!(model, (200, 280));
    assert!(close(screen, css_of_display((200, 280))), "{screen:?}");
}
