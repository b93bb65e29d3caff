//! A desktop task under the upstream policy (Anthropic): the model sees the X display's
//! screenshots, types into a terminal, stops, and the task's checker scores the episode.

use serde_json::{Value, json};

use super::standin::{StandIn, Turn, ensure, image_size};
use super::{DISPLAY, finish};

fn message(content: Value, stop: &str) -> Value {
    json!({"id": "msg_standin", "type": "message", "role": "assistant", "model": "standin-1",
           "content": content, "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

fn check_image(block: &Value) -> Result<(), String> {
    let size = image_size(
        block["source"]["media_type"].as_str().unwrap_or_default(),
        block["source"]["data"].as_str().unwrap_or_default(),
    )?;
    ensure(size == DISPLAY, || format!("a screenshot of {size:?}"))
}

#[test]
fn a_desktop_task_is_played_by_the_model_and_scored_by_its_checker() {
    let suite = tempfile::tempdir().unwrap();
    let task = suite.path().join("hello");
    std::fs::create_dir(&task).unwrap();
    std::fs::write(
        task.join("task.json"),
        r#"{"kind": "desktop", "prompt": "Type hello into the terminal and press Enter.",
            "launch": "xterm -geometry 80x24+0+0 -e sh -c 'cat > \"$HOME/answer.txt\"'",
            "checker": "grep -qx hello answer.txt", "max_steps": 5, "max_seconds": 60}"#,
    )
    .unwrap();
    let turns: Vec<Turn> = vec![
        Box::new(|r| {
            let tool = &r.body["tools"][0];
            ensure(
                tool["type"] == "computer_20251124"
                    && tool["display_width_px"] == 1024
                    && tool["display_height_px"] == 640,
                || format!("tool {tool}"),
            )?;
            check_image(&r.body["messages"][0]["content"][1])?;
            // Without a window manager focus follows the pointer: into the terminal first.
            Ok(message(
                json!([
                    {"type": "tool_use", "id": "toolu_1", "name": "computer",
                     "input": {"action": "mouse_move", "coordinate": [100, 100]}},
                    {"type": "tool_use", "id": "toolu_2", "name": "computer",
                     "input": {"action": "type", "text": "hello\n"}}
                ]),
                "tool_use",
            ))
        }),
        Box::new(|r| {
            let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
            let results = messages.last().cloned().unwrap_or_default()["content"].clone();
            for id in ["toolu_1", "toolu_2"] {
                let result = results
                    .as_array()
                    .and_then(|c| c.iter().find(|b| b["tool_use_id"] == id))
                    .cloned()
                    .unwrap_or_default();
                let image = result["content"]
                    .as_array()
                    .and_then(|c| c.iter().find(|b| b["type"] == "image"))
                    .cloned()
                    .unwrap_or_default();
                check_image(&image)
                    .map_err(|e| format!("{id}: {e}: {:.300}", result.to_string()))?;
            }
            Ok(message(
                json!([{"type": "text", "text": "Typed it."}]),
                "end_turn",
            ))
        }),
    ];
    let standin = StandIn::start(turns);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let upstream = format!("anthropic={}", standin.url);
    let (code, run) = finish(
        &standin,
        &[
            "bench",
            "--no-progress-bar",
            "--suite",
            suite.path().to_str().unwrap(),
            "--policy",
            "upstream",
            "--upstream",
            &upstream,
            "--model",
            "standin-1",
            "--out",
            out.to_str().unwrap(),
        ],
        &out,
    );
    let episode = &run["episodes"][0];
    assert_eq!(code, 0, "{episode:#}");
    assert_eq!(
        (
            episode["kind"].as_str(),
            episode["reward"].as_f64(),
            episode["steps"].as_u64()
        ),
        (Some("desktop"), Some(1.0), Some(2)),
        "{episode:#}"
    );
    assert_eq!(standin.received().len(), 2);
}
