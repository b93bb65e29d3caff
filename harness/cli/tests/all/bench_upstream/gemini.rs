//! The Gemini dialect: the `computerUse` tool, the form filled by `type_text_at` and
//! `click_at` on the 0–999 grid (the stand-in places them from the page's CSS positions),
//! the function responses carrying the page's URL and the screenshot; a `safety_decision`
//! on the terms checkbox is acknowledged only when approved, and a denied one ends the
//! episode with that step denied.

use serde_json::{Value, json};

use super::standin::{StandIn, Turn, ensure, image_size};
use super::{
    DISPLAY, EMAIL, NAME, SUBMIT, TERMS, VIEWPORT, close, css_of_display, mark, run_bench,
};

/// A display point's place on Gemini's grid (through the page's CSS pixels).
fn grid(p: (i64, i64)) -> (i64, i64) {
    let (x, y) = css_of_display(p);
    (
        (x * 1000.0 / VIEWPORT.0).floor() as i64,
        (y * 1000.0 / VIEWPORT.1).floor() as i64,
    )
}

/// Where a grid point lands on the page (CSS px).
fn css_of_grid(g: (i64, i64)) -> (f64, f64) {
    (
        (g.0 as f64 + 0.5) * VIEWPORT.0 / 1000.0,
        (g.1 as f64 + 0.5) * VIEWPORT.1 / 1000.0,
    )
}

fn call(name: &str, args: Value) -> Value {
    json!({"functionCall": {"name": name, "args": args}})
}

fn type_at(p: (i64, i64), text: &str) -> Value {
    let (x, y) = grid(p);
    call(
        "type_text_at",
        json!({"x": x, "y": y, "text": text, "press_enter": false}),
    )
}

fn click_at(p: (i64, i64), extra: Value) -> Value {
    let (x, y) = grid(p);
    let mut args = json!({"x": x, "y": y});
    if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
        args.extend(extra.clone());
    }
    call("click_at", args)
}

fn candidate(parts: Value) -> Value {
    json!({"candidates": [{"content": {"role": "model", "parts": parts},
                           "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                             "totalTokenCount": 2},
           "modelVersion": "standin-1", "responseId": "resp_standin"})
}

fn first_turn() -> Turn {
    Box::new(|r| {
        let body = &r.body;
        ensure(r.path == "/v1beta/models/standin-1:generateContent", || {
            format!("POST {}", r.path)
        })?;
        ensure(
            body["tools"] == json!([{"computerUse": {"environment": "ENVIRONMENT_BROWSER"}}]),
            || format!("tools {}", body["tools"]),
        )?;
        let parts = &body["contents"][0]["parts"];
        ensure(
            parts[0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Ada Lovelace")),
            || format!("the prompt: {}", parts[0]),
        )?;
        let image = &parts[1]["inlineData"];
        let size = image_size(
            image["mimeType"].as_str().unwrap_or_default(),
            image["data"].as_str().unwrap_or_default(),
        )?;
        ensure(size == DISPLAY, || format!("a screenshot of {size:?}"))?;
        let decision = json!({"safety_decision": {"decision": "require_confirmation",
                                                   "explanation": "Accepting terms of service."}});
        Ok(candidate(json!([
            type_at(NAME, "Ada Lovelace"),
            type_at(EMAIL, "ada@example.com"),
            click_at(TERMS, decision),
        ])))
    })
}

#[test]
fn gemini_fills_the_form_on_the_grid_and_its_approved_safety_decision_is_acknowledged() {
    let turns: Vec<Turn> = vec![
        first_turn(),
        Box::new(|r| {
            let contents = r.body["contents"].as_array().cloned().unwrap_or_default();
            ensure(
                contents.len() == 3 && contents[1]["role"] == "model",
                || {
                    format!(
                        "the model's turn is not replayed: {} contents",
                        contents.len()
                    )
                },
            )?;
            let answers = contents[2]["parts"].as_array().cloned().unwrap_or_default();
            let names: Vec<&str> = answers
                .iter()
                .filter_map(|p| p["functionResponse"]["name"].as_str())
                .collect();
            ensure(
                names == ["type_text_at", "type_text_at", "click_at"],
                || format!("function responses {names:?}"),
            )?;
            for answer in &answers {
                let response = &answer["functionResponse"];
                ensure(
                    response["response"]["url"]
                        .as_str()
                        .is_some_and(|u| u.starts_with("http://127.0.0.1:")),
                    || format!("no url: {}", response["response"]),
                )?;
                let image = &response["parts"][0]["inlineData"];
                let size = image_size(
                    image["mimeType"].as_str().unwrap_or_default(),
                    image["data"].as_str().unwrap_or_default(),
                )?;
                ensure(size == DISPLAY, || format!("a screenshot of {size:?}"))?;
            }
            let acknowledged: Vec<bool> = answers
                .iter()
                .map(|a| a["functionResponse"]["response"]["safety_acknowledgement"] == "true")
                .collect();
            ensure(acknowledged == [false, false, true], || {
                format!("acknowledgements {acknowledged:?}")
            })?;
            Ok(candidate(json!([click_at(SUBMIT, json!({}))])))
        }),
    ];
    let standin = StandIn::start(turns);
    let (code, run) = run_bench(&standin, "gemini", "form", &["--safety-checks", "approve"]);
    let episode = &run["episodes"][0];
    assert_eq!(code, 0, "{episode:#}");
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(true), Some(4)),
        "{episode:#}"
    );
    assert_eq!(episode["trace"][0]["action"]["format"], "gemini");
    // Grid points reach the page through the environment's scaling (0–999 → 1280×800).
    for (step, point) in [(1, NAME), (2, EMAIL), (3, TERMS), (4, SUBMIT)] {
        let (_, screen) = mark(episode, step, 0);
        assert!(
            close(screen, css_of_grid(grid(point))),
            "step {step}: {screen:?}"
        );
    }
    let gate = &episode["trace"][2]["gates"][0];
    assert_eq!(
        (gate["rule"].as_str(), gate["answer"].as_str()),
        (Some("vendor-safety-check"), Some("approved")),
        "{gate}"
    );
}

#[test]
fn a_denied_gemini_safety_decision_ends_the_episode_at_that_call() {
    let standin = StandIn::start(vec![first_turn()]);
    let (code, run) = run_bench(&standin, "gemini", "form", &["--safety-checks", "deny"]);
    let episode = &run["episodes"][0];
    assert_eq!(code, 1, "{episode:#}");
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(false), Some(3)),
        "{episode:#}"
    );
    let step = &episode["trace"][2];
    assert_eq!(step["status"], "denied", "{step:#}");
    assert_eq!(step["marks"], json!([]), "the click did not run: {step:#}");
    assert_eq!(
        step["gates"][0]["answer"].as_str(),
        Some("denied"),
        "{step:#}"
    );
    assert_eq!(standin.received().len(), 1);
}
