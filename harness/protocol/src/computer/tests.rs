#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn k(names: &[&str]) -> Vec<Key> {
    names.iter().map(|n| Key::parse(n).unwrap()).collect()
}

/// Every Anthropic action, written the way the API writes it, survives decode → encode.
#[test]
fn anthropic_round_trips_every_action() {
    let inputs = [
        json!({"action": "screenshot"}),
        json!({"action": "cursor_position"}),
        json!({"action": "left_click", "coordinate": [10, 20]}),
        json!({"action": "left_click", "coordinate": [10, 20], "text": "shift"}),
        json!({"action": "left_click"}),
        json!({"action": "right_click", "coordinate": [1, 2]}),
        json!({"action": "middle_click", "coordinate": [1, 2]}),
        json!({"action": "double_click", "coordinate": [1, 2]}),
        json!({"action": "triple_click", "coordinate": [1, 2], "text": "ctrl+shift"}),
        json!({"action": "mouse_move", "coordinate": [5, 6]}),
        json!({"action": "left_mouse_down"}),
        json!({"action": "left_mouse_up", "coordinate": [7, 8]}),
        json!({"action": "left_click_drag", "start_coordinate": [1, 2], "coordinate": [30, 40]}),
        json!({"action": "scroll", "coordinate": [100, 100], "scroll_direction": "down", "scroll_amount": 3}),
        json!({"action": "scroll", "scroll_direction": "left", "scroll_amount": 1, "text": "shift"}),
        json!({"action": "type", "text": "héllo\nwörld €"}),
        json!({"action": "key", "text": "ctrl+a"}),
        json!({"action": "key", "text": "Return"}),
        json!({"action": "key", "text": "ctrl+a BackSpace"}),
        json!({"action": "hold_key", "text": "shift", "duration": 2}),
        json!({"action": "hold_key", "text": "shift", "duration": 0.5}),
        json!({"action": "wait", "duration": 1}),
        json!({"action": "zoom", "region": [0, 0, 512, 384]}),
    ];
    for input in inputs {
        let action = anthropic::decode_input(&input, anthropic::Version::V20251124).unwrap();
        assert_eq!(
            anthropic::encode_input(&action).unwrap(),
            input,
            "{action:?}"
        );
        // native serde round trip too
        let native: Action =
            serde_json::from_value(serde_json::to_value(&action).unwrap()).unwrap();
        assert_eq!(native, action);
    }
}

#[test]
fn anthropic_decodes_to_canonical_actions() {
    let v = anthropic::Version::V20250124;
    assert_eq!(
        anthropic::decode_input(&json!({"action": "key", "text": "ctrl+Page_Down"}), v).unwrap(),
        Action::Key {
            chords: vec![k(&["Control", "PageDown"])]
        }
    );
    assert_eq!(
        anthropic::decode_input(
            &json!({"action": "scroll", "coordinate": [1, 2], "scroll_direction": "up", "scroll_amount": 5}),
            v
        )
        .unwrap(),
        Action::Scroll {
            at: Some(Point::new(1, 2)),
            delta: ScrollDelta::Ticks {
                direction: Direction::Up,
                amount: 5
            },
            modifiers: vec![],
        }
    );
    // zoom is only in the newer tool version
    assert!(matches!(
        anthropic::decode_input(&json!({"action": "zoom", "region": [0, 0, 1, 1]}), v),
        Err(DecodeError::UnknownAction { .. })
    ));
}

#[test]
fn anthropic_tool_use_envelope_keeps_the_id() {
    let block = json!({"type": "tool_use", "id": "toolu_1", "name": "computer",
        "input": {"action": "left_click", "coordinate": [3, 4]}});
    let call = decode(Vendor::Anthropic, &block).unwrap();
    assert_eq!(call.call_id.as_deref(), Some("toolu_1"));
    assert_eq!(encode(&call, Vendor::Anthropic).unwrap(), block);
}

#[test]
fn bad_input_gives_errors_the_model_can_act_on() {
    let v = anthropic::Version::V20251124;
    let err = anthropic::decode_input(&json!({"action": "teleport"}), v).unwrap_err();
    assert!(
        err.to_string().contains("unknown action `teleport`"),
        "{err}"
    );
    assert!(
        err.to_string().contains("left_click"),
        "lists known actions: {err}"
    );
    let err = anthropic::decode_input(&json!({"action": "left_click", "coordinate": [1]}), v)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "action `left_click`: `coordinate` must be [x, y]"
    );
    let err = anthropic::decode_input(&json!({"action": "left_click", "coordinate": [1.5, 2]}), v)
        .unwrap_err();
    assert!(err.to_string().contains("whole number"), "{err}");
    let err = anthropic::decode_input(&json!({"action": "mouse_move"}), v).unwrap_err();
    assert_eq!(err.to_string(), "action `mouse_move` needs `coordinate`");
    let err = anthropic::decode_input(&json!({"action": "key", "text": "ctrl+hyperspace"}), v)
        .unwrap_err();
    assert_eq!(err, DecodeError::UnknownKey("hyperspace".into()));
    // whole floats are fine
    assert_eq!(
        anthropic::decode_input(
            &json!({"action": "left_click", "coordinate": [1.0, 2.0]}),
            v
        )
        .unwrap()
        .target(),
        Some(Point::new(1, 2))
    );
}

#[test]
fn openai_round_trips_single_and_batched_calls() {
    let items = [
        json!({"type": "computer_call", "call_id": "call_1",
            "action": {"type": "click", "button": "left", "x": 10, "y": 20},
            "pending_safety_checks": []}),
        json!({"type": "computer_call", "call_id": "call_2",
            "action": {"type": "click", "button": "wheel", "x": 1, "y": 2, "keys": ["SHIFT"]},
            "pending_safety_checks": [{"id": "cu_sc_1", "code": "malicious_instructions",
                "message": "The page says to ignore instructions."}]}),
        json!({"type": "computer_call", "call_id": "call_3", "actions": [
            {"type": "move", "x": 5, "y": 6},
            {"type": "double_click", "x": 5, "y": 6, "keys": ["CTRL"]},
            {"type": "scroll", "x": 100, "y": 200, "scroll_x": 0, "scroll_y": 300},
            {"type": "type", "text": "hi ✓"},
            {"type": "keypress", "keys": ["CTRL", "A"]},
            {"type": "keypress", "keys": ["ENTER"]},
            {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 5, "y": 5}, {"x": 9, "y": 9}]},
            {"type": "click", "button": "back", "x": 0, "y": 0},
            {"type": "wait"},
            {"type": "screenshot"},
        ], "pending_safety_checks": []}),
        // a batch of one stays a batch
        json!({"type": "computer_call", "call_id": "call_4",
            "actions": [{"type": "screenshot"}], "pending_safety_checks": []}),
    ];
    for item in items {
        let call = decode(Vendor::OpenAi, &item).unwrap();
        assert_eq!(encode(&call, Vendor::OpenAi).unwrap(), item);
    }
}

#[test]
fn openai_keys_and_safety_checks_decode() {
    let call = openai::decode_call(&json!({"type": "computer_call", "call_id": "c",
        "action": {"type": "keypress", "keys": ["CTRL", "A"]},
        "pending_safety_checks": [{"id": "sc", "code": "irrelevant_domain", "message": "m"}]}))
    .unwrap();
    assert_eq!(
        call.actions,
        vec![Action::Key {
            chords: vec![k(&["Control", "a"])]
        }]
    );
    assert_eq!(call.safety_checks[0].id, "sc");
    // acknowledging round-trips into the output item
    let out = ComputerOutput {
        acknowledged_safety_checks: call.safety_checks.clone(),
        current_url: Some("http://127.0.0.1/".into()),
        ..Default::default()
    };
    let v = out.to_openai(&call);
    assert_eq!(v["call_id"], "c");
    assert_eq!(v["acknowledged_safety_checks"][0]["id"], "sc");
    assert_eq!(v["output"]["current_url"], "http://127.0.0.1/");
}

#[test]
fn gemini_round_trips_every_function() {
    let calls = [
        json!({"name": "open_web_browser", "args": {}}),
        json!({"name": "wait_5_seconds", "args": {}}),
        json!({"name": "go_back", "args": {}}),
        json!({"name": "go_forward", "args": {}}),
        json!({"name": "search", "args": {}}),
        json!({"name": "navigate", "args": {"url": "https://example.com/"}}),
        json!({"name": "click_at", "args": {"x": 500, "y": 999}}),
        json!({"name": "hover_at", "args": {"x": 0, "y": 0}}),
        json!({"name": "type_text_at", "args": {"x": 10, "y": 20, "text": "abc",
            "press_enter": false, "clear_before_typing": true}}),
        json!({"name": "type_text_at", "args": {"x": 10, "y": 20, "text": "abc"}}),
        json!({"name": "key_combination", "args": {"keys": "Control+c"}}),
        json!({"name": "scroll_document", "args": {"direction": "down"}}),
        json!({"name": "scroll_at", "args": {"x": 1, "y": 2, "direction": "up", "magnitude": 400}}),
        json!({"name": "scroll_at", "args": {"x": 1, "y": 2, "direction": "left"}}),
        json!({"name": "drag_and_drop", "args": {"x": 1, "y": 2, "destination_x": 3, "destination_y": 4}}),
        json!({"name": "click_at", "id": "fc_1", "args": {"x": 1, "y": 2,
            "safety_decision": {"decision": "require_confirmation", "explanation": "Buying."}}}),
    ];
    for fc in calls {
        let call = decode(Vendor::Gemini, &fc).unwrap();
        assert_eq!(call.coords, GEMINI_GRID);
        assert_eq!(encode(&call, Vendor::Gemini).unwrap(), fc);
    }
}

#[test]
fn gemini_safety_decision_round_trips_to_acknowledgement() {
    let call = decode(
        Vendor::Gemini,
        &json!({"functionCall": {"name": "click_at", "args": {"x": 1, "y": 2,
            "safety_decision": {"decision": "require_confirmation", "explanation": "Pay?"}}}}),
    )
    .unwrap();
    assert_eq!(
        call.safety_checks[0].code.as_deref(),
        Some("require_confirmation")
    );
    let out = ComputerOutput {
        acknowledged_safety_checks: call.safety_checks.clone(),
        current_url: Some("u".into()),
        ..Default::default()
    };
    let v = out.to_gemini(&call);
    assert_eq!(v["function_response"]["name"], "click_at");
    assert_eq!(
        v["function_response"]["response"]["safety_acknowledgement"],
        "true"
    );
    assert_eq!(v["function_response"]["response"]["url"], "u");
}

#[test]
fn key_names_follow_each_vendor() {
    let chord = Key::parse_chord("ctrl+shift+t").unwrap();
    assert_eq!(chord, k(&["Control", "Shift", "t"]));
    assert_eq!(
        chord.iter().map(Key::to_openai).collect::<Vec<_>>(),
        ["CTRL", "SHIFT", "T"]
    );
    assert_eq!(
        chord.iter().map(Key::to_gemini).collect::<Vec<_>>(),
        ["Control", "Shift", "t"]
    );
    for (alias, canon) in [
        ("Return", "Enter"),
        ("enter", "Enter"),
        ("ENTER", "Enter"),
        ("esc", "Escape"),
        ("Page_Up", "PageUp"),
        ("super", "Meta"),
        ("cmd", "Meta"),
        ("BackSpace", "Backspace"),
        ("Up", "ArrowUp"),
        ("ARROWDOWN", "ArrowDown"),
        ("space", " "),
        ("f5", "F5"),
        ("minus", "-"),
    ] {
        assert_eq!(Key::parse(alias).unwrap().as_str(), canon, "{alias}");
    }
    assert_eq!(Key::parse_chord("ctrl++").unwrap(), k(&["Control", "+"]));
    // xdotool upper-case letter keeps its case; OpenAI's does not
    assert_eq!(Key::parse("A").unwrap().as_str(), "A");
    assert_eq!(Key::parse_openai("A").unwrap().as_str(), "a");
    assert!(Key::parse("F25").is_err());
}

#[test]
fn cross_vendor_encoding_says_what_cannot_be_expressed() {
    let triple = Action::Click {
        at: Some(Point::new(1, 1)),
        button: Button::Left,
        count: 3,
        modifiers: vec![],
    };
    let err = openai::encode_action(&triple).unwrap_err();
    assert_eq!(err.to_string(), "OpenAI cannot express Left click x3");
    let err = anthropic::encode_input(&Action::GoBack).unwrap_err();
    assert_eq!(err.to_string(), "Anthropic cannot express `go_back`");
}

#[test]
fn native_shape_decodes_actions_and_batches() {
    let call = decode(
        Vendor::Native,
        &json!({"kind": "click", "at": {"x": 1, "y": 2},
        "button": "left", "count": 1}),
    )
    .unwrap();
    assert_eq!(call.actions[0].target(), Some(Point::new(1, 2)));
    let call = decode(
        Vendor::Native,
        &json!({"actions": [{"kind": "screenshot"}, {"kind": "wait"}], "call_id": "x"}),
    )
    .unwrap();
    assert_eq!(call.actions.len(), 2);
    assert_eq!(call.call_id.as_deref(), Some("x"));
    let v: Value = encode(&call, Vendor::Native).unwrap();
    assert_eq!(v["actions"][1]["kind"], "wait");
}

#[test]
fn anthropic_result_carries_image_and_error() {
    let call = decode(
        Vendor::Anthropic,
        &json!({"id": "t1", "input": {"action": "screenshot"}}),
    )
    .unwrap();
    let out = ComputerOutput {
        screenshot: Some(Screenshot {
            media_type: "image/png".into(),
            data: vec![1, 2, 3],
            width: 1,
            height: 1,
        }),
        error: Some("x outside 0..=1023".into()),
        ..Default::default()
    };
    let v = out.to_anthropic(&call);
    assert_eq!(v["tool_use_id"], "t1");
    assert_eq!(v["is_error"], true);
    assert_eq!(v["content"][1]["source"]["data"], "AQID");
}
