//! The OpenAI Responses dialect: the GA `computer` tool, a batched `computer_call` filling
//! the form with a pending safety check, answered through `previous_response_id`. With
//! `--safety-checks approve` the check is acknowledged and the form submitted; with the
//! default (`deny`) nothing of the batch runs, the check is recorded, and the episode ends.

use serde_json::{Value, json};

use super::standin::{StandIn, Turn, check_data_url, ensure};
use super::{DISPLAY, EMAIL, NAME, SUBMIT, TERMS, close, css_of_display, mark, run_bench};

fn response(id: &str, output: Value) -> Value {
    json!({"id": id, "object": "response", "created_at": 0, "status": "completed",
           "model": "standin-1", "output": output,
           "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}})
}

fn click(p: (i64, i64)) -> Value {
    json!({"type": "click", "button": "left", "x": p.0, "y": p.1})
}

fn check() -> Value {
    json!({"id": "cu_sc_1", "code": "malicious_instructions",
           "message": "The page may hold instructions the user did not give."})
}

/// The first request: the GA tool, stored, the prompt and a display-sized screenshot; the
/// answer: the form filled in one batch carrying a safety check.
fn first_turn() -> Turn {
    Box::new(|r| {
        let body = &r.body;
        ensure(r.path == "/responses", || format!("POST {}", r.path))?;
        ensure(body["tools"] == json!([{"type": "computer"}]), || {
            format!("tools {}", body["tools"])
        })?;
        ensure(
            body["store"] == true && body.get("previous_response_id").is_none(),
            || format!("not a fresh stored conversation: {:.300}", body.to_string()),
        )?;
        let content = &body["input"][0]["content"];
        ensure(
            content[0]["type"] == "input_text"
                && content[0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("Ada Lovelace")),
            || format!("the prompt: {}", content[0]),
        )?;
        check_data_url(
            content[1]["image_url"].as_str().unwrap_or_default(),
            DISPLAY,
        )?;
        Ok(response(
            "resp_1",
            json!([{"type": "computer_call", "id": "cu_1", "call_id": "call_1",
                    "status": "completed",
                    "actions": [click(NAME), {"type": "type", "text": "Ada Lovelace"},
                                click(EMAIL), {"type": "type", "text": "ada@example.com"},
                                click(TERMS)],
                    "pending_safety_checks": [check()]}]),
        ))
    })
}

#[test]
fn an_approved_safety_check_is_acknowledged_and_the_batched_form_is_submitted() {
    let turns: Vec<Turn> = vec![
        first_turn(),
        Box::new(|r| {
            let body = &r.body;
            ensure(body["previous_response_id"] == "resp_1", || {
                format!("previous_response_id {}", body["previous_response_id"])
            })?;
            let output = &body["input"][0];
            ensure(
                body["input"].as_array().map(Vec::len) == Some(1)
                    && output["type"] == "computer_call_output"
                    && output["call_id"] == "call_1"
                    && output["output"]["type"] == "computer_screenshot",
                || format!("input {:.400}", body["input"].to_string()),
            )?;
            ensure(
                output["acknowledged_safety_checks"] == json!([check()]),
                || format!("acknowledged {}", output["acknowledged_safety_checks"]),
            )?;
            check_data_url(
                output["output"]["image_url"].as_str().unwrap_or_default(),
                DISPLAY,
            )?;
            Ok(response(
                "resp_2",
                json!([{"type": "computer_call", "id": "cu_2", "call_id": "call_2",
                        "status": "completed", "action": click(SUBMIT),
                        "pending_safety_checks": []}]),
            ))
        }),
    ];
    let standin = StandIn::start(turns);
    let (code, run) = run_bench(
        &standin,
        "openai-responses",
        "form",
        &["--safety-checks", "approve"],
    );
    let episode = &run["episodes"][0];
    assert_eq!(code, 0, "{episode:#}");
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(true), Some(2)),
        "{episode:#}"
    );
    // The whole batch was one step, its check asked about and approved.
    let first = &episode["trace"][0];
    assert_eq!(first["action"]["format"], "openai");
    assert_eq!(
        first["marks"].as_array().map(Vec::len),
        Some(3),
        "{first:#}"
    );
    let gate = &first["gates"][0];
    assert_eq!(
        (gate["rule"].as_str(), gate["answer"].as_str()),
        (Some("vendor-safety-check"), Some("approved")),
        "{first:#}"
    );
    for (index, point) in [NAME, EMAIL, TERMS].into_iter().enumerate() {
        let (model, screen) = mark(episode, 1, index);
        assert_eq!(model, point);
        assert!(close(screen, css_of_display(point)), "{screen:?}");
    }
}

#[test]
fn a_denied_safety_check_runs_nothing_and_ends_the_episode_with_the_check_recorded() {
    let standin = StandIn::start(vec![first_turn()]);
    let (code, run) = run_bench(&standin, "openai-responses", "form", &[]);
    let episode = &run["episodes"][0];
    assert_eq!(code, 1, "{episode:#}");
    assert_eq!(
        (episode["success"].as_bool(), episode["steps"].as_u64()),
        (Some(false), Some(1)),
        "{episode:#}"
    );
    let step = &episode["trace"][0];
    assert_eq!(step["status"], "denied", "{step:#}");
    assert_eq!(
        step["marks"],
        json!([]),
        "nothing of the batch ran: {step:#}"
    );
    let gate = &step["gates"][0];
    assert_eq!(
        (gate["rule"].as_str(), gate["answer"].as_str()),
        (Some("vendor-safety-check"), Some("denied")),
        "{step:#}"
    );
    assert!(
        gate["reason"]
            .as_str()
            .is_some_and(|r| r.contains("instructions the user did not give")),
        "{gate}"
    );
    assert_eq!(
        standin.received().len(),
        1,
        "no answer went back unacknowledged"
    );
}
