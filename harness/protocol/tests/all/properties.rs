//! Property tests of every decoder a client reaches: the computer-action codecs, the
//! conversation codecs and the event-stream resume point. On arbitrary bytes and JSON they
//! return a typed error or a value, never panic; whatever the vendor can express survives
//! `decode(encode(x))`; and whatever decodes, re-encodes and decodes to the same value.

use cordon_protocol::computer::{
    self, Action, Button, ComputerCall, CoordSpace, DecodeError, Direction, GEMINI_GRID, Key,
    Point, Region, SafetyCheck, ScrollDelta, Vendor, anthropic, gemini, openai,
};
use cordon_protocol::conversation::{
    ContentBlock, Request, anthropic as messages, chat, responses,
};
use cordon_protocol::execution::parse_event_seq;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{Map, Value};

/// The stream accumulators, on arbitrary and mutated event sequences.
mod stream;

/// 256 cases per property keeps `cargo test` fast; failures are reproduced as unit tests
/// beside the code they fix, not persisted as files.
fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// Field names and values the decoders look for, so generated JSON reaches past the first
/// `match` often enough to matter.
const WORDS: &[&str] = &[
    // computer use
    "action",
    "actions",
    "type",
    "text",
    "coordinate",
    "start_coordinate",
    "scroll_direction",
    "scroll_amount",
    "duration",
    "key",
    "keys",
    "region",
    "x",
    "y",
    "button",
    "scroll_x",
    "scroll_y",
    "path",
    "url",
    "name",
    "args",
    "id",
    "call_id",
    "input",
    "function_call",
    "functionCall",
    "computer_call",
    "tool_use",
    "left_click",
    "right_click",
    "double_click",
    "triple_click",
    "mouse_move",
    "left_click_drag",
    "left_mouse_down",
    "left_mouse_up",
    "scroll",
    "hold_key",
    "wait",
    "zoom",
    "screenshot",
    "cursor_position",
    "click",
    "keypress",
    "drag",
    "move",
    "click_at",
    "type_text_at",
    "scroll_at",
    "scroll_document",
    "key_combination",
    "navigate",
    "go_back",
    "go_forward",
    "search",
    "open_web_browser",
    "hover_at",
    "drag_and_drop",
    "wait_5_seconds",
    "direction",
    "magnitude",
    "destination_x",
    "destination_y",
    "press_enter",
    "clear_before_typing",
    "safety_decision",
    "pending_safety_checks",
    "kind",
    "coords",
    "up",
    "down",
    "left",
    "right",
    "ctrl+a",
    "Return",
    "CTRL",
    "shift",
    "wheel",
    "back",
    "forward",
    "middle",
    "modifiers",
    // conversations
    "model",
    "messages",
    "role",
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "content",
    "tool_calls",
    "tool_call_id",
    "function",
    "arguments",
    "tools",
    "tool_choice",
    "parameters",
    "input_schema",
    "description",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stop",
    "stop_sequences",
    "stream",
    "image",
    "image_url",
    "source",
    "base64",
    "media_type",
    "data",
    "is_error",
    "tool_result",
    "tool_use_id",
    "thinking",
    "redacted_thinking",
    "signature",
    "input_text",
    "output_text",
    "input_image",
    "message",
    "function_call_output",
    "output",
    "reasoning",
    "summary",
    "instructions",
    "choices",
    "finish_reason",
    "stop_reason",
    "usage",
    "end_turn",
    "tool_calls",
    "response",
    "status",
    "completed",
    "content_block",
    "auto",
    "any",
    "none",
    "required",
    "parallel_tool_calls",
    "caller",
    "allowed_callers",
    "server_tool_use",
    "web_search_tool_result",
    "cache_control",
    "refusal",
    "object",
    "chat.completion",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
    ]
}

/// Any JSON value, biased towards the decoders' vocabulary.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-2000i64..2000).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..7)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Arbitrary bytes, parsed as JSON when they are.
fn bytes_as_json() -> impl Strategy<Value = Option<Value>> {
    prop::collection::vec(any::<u8>(), 0..256)
        .prop_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
}

fn decode_every_computer_shape(value: &Value) {
    for vendor in [
        Vendor::Anthropic,
        Vendor::OpenAi,
        Vendor::Gemini,
        Vendor::Native,
    ] {
        let _ = computer::decode(vendor, value);
    }
    for version in [anthropic::Version::V20250124, anthropic::Version::V20251124] {
        let _ = anthropic::decode_input(value, version);
    }
    let _ = openai::decode_action(value);
    if let Some(object) = value.as_object() {
        for name in [
            "click_at",
            "type_text_at",
            "scroll_at",
            "key_combination",
            "drag_and_drop",
        ] {
            let _ = gemini::decode_action(name, object);
        }
    }
}

/// Whatever decodes re-encodes, and decoding that gives the same call back.
fn computer_decode_is_stable(value: &Value) -> Result<(), TestCaseError> {
    for vendor in [
        Vendor::Anthropic,
        Vendor::OpenAi,
        Vendor::Gemini,
        Vendor::Native,
    ] {
        if let Ok(call) = computer::decode(vendor, value)
            && let Ok(encoded) = computer::encode(&call, vendor)
        {
            prop_assert_eq!(
                computer::decode(vendor, &encoded),
                Ok(call),
                "{:?} {}",
                vendor,
                encoded
            );
        }
    }
    Ok(())
}

const KEYS: &[&str] = &[
    "Control",
    "Shift",
    "Alt",
    "Meta",
    "Enter",
    "Tab",
    "Escape",
    "Backspace",
    "Delete",
    "Home",
    "End",
    "PageUp",
    "PageDown",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "F1",
    "F12",
    "a",
    "z",
    "7",
    "/",
];

fn key() -> impl Strategy<Value = Key> {
    prop::sample::select(KEYS).prop_map(|name| Key::parse(name).unwrap())
}

fn keys(max: usize) -> impl Strategy<Value = Vec<Key>> {
    prop::collection::vec(key(), 0..=max)
}

fn point() -> impl Strategy<Value = Point> {
    (0i64..2000, 0i64..2000).prop_map(|(x, y)| Point { x, y })
}

fn button() -> impl Strategy<Value = Button> {
    prop::sample::select(
        &[
            Button::Left,
            Button::Right,
            Button::Middle,
            Button::Back,
            Button::Forward,
        ][..],
    )
}

fn direction() -> impl Strategy<Value = Direction> {
    prop::sample::select(
        &[
            Direction::Up,
            Direction::Down,
            Direction::Left,
            Direction::Right,
        ][..],
    )
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 ]{0,12}",
        "\\PC{0,12}",
        Just("line one\nline two".to_owned())
    ]
}

/// Seconds as models send them: whole, or with a fraction.
fn seconds() -> impl Strategy<Value = f64> {
    prop_oneof![
        (0u32..60).prop_map(f64::from),
        (0u32..6000).prop_map(|c| f64::from(c) / 100.0)
    ]
}

/// Every canonical action, with values in the ranges models use.
fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::Screenshot),
        Just(Action::CursorPosition),
        (prop::option::of(point()), button(), 1u8..=3, keys(2)).prop_map(
            |(at, button, count, modifiers)| {
                Action::Click {
                    at,
                    button,
                    count,
                    modifiers,
                }
            }
        ),
        (prop::option::of(point()), button())
            .prop_map(|(at, button)| Action::MouseDown { at, button }),
        (prop::option::of(point()), button())
            .prop_map(|(at, button)| Action::MouseUp { at, button }),
        (point(), keys(2)).prop_map(|(to, modifiers)| Action::MouseMove { to, modifiers }),
        (prop::collection::vec(point(), 2..5), keys(2))
            .prop_map(|(path, modifiers)| Action::Drag { path, modifiers }),
        (prop::option::of(point()), scroll_delta(), keys(2)).prop_map(|(at, delta, modifiers)| {
            Action::Scroll {
                at,
                delta,
                modifiers,
            }
        }),
        (
            text(),
            prop::option::of(point()),
            prop::option::of(any::<bool>()),
            prop::option::of(any::<bool>())
        )
            .prop_map(|(text, at, press_enter, clear_before)| Action::Type {
                text,
                at,
                press_enter,
                clear_before
            }),
        prop::collection::vec(prop::collection::vec(key(), 1..4), 1..3)
            .prop_map(|chords| Action::Key { chords }),
        (prop::collection::vec(key(), 1..3), seconds()).prop_map(|(keys, duration_secs)| {
            Action::HoldKey {
                keys,
                duration_secs,
            }
        }),
        prop::option::of(seconds()).prop_map(|duration_secs| Action::Wait { duration_secs }),
        (point(), point()).prop_map(|(a, b)| Action::Zoom {
            region: Region {
                x0: a.x.min(b.x),
                y0: a.y.min(b.y),
                x1: a.x.max(b.x) + 1,
                y1: a.y.max(b.y) + 1
            },
        }),
        "https://[a-z]{1,8}\\.example/[a-z]{0,6}".prop_map(|url| Action::Navigate { url }),
        Just(Action::GoBack),
        Just(Action::GoForward),
        Just(Action::Search),
        Just(Action::OpenWebBrowser),
    ]
}

fn scroll_delta() -> impl Strategy<Value = ScrollDelta> {
    prop_oneof![
        (direction(), 0u32..30)
            .prop_map(|(direction, amount)| ScrollDelta::Ticks { direction, amount }),
        (-3000i64..3000, -3000i64..3000).prop_map(|(x, y)| ScrollDelta::Pixels { x, y }),
        (direction(), prop::option::of(0u32..1000)).prop_map(|(direction, magnitude)| {
            ScrollDelta::Grid {
                direction,
                magnitude,
            }
        }),
        direction().prop_map(|direction| ScrollDelta::Page { direction }),
    ]
}

fn safety_checks() -> impl Strategy<Value = Vec<SafetyCheck>> {
    prop::collection::vec(
        (
            "[a-z_]{1,10}",
            prop::option::of("[a-z_]{1,10}"),
            prop::option::of("[a-z ]{1,20}"),
        )
            .prop_map(|(id, code, message)| SafetyCheck { id, code, message }),
        0..3,
    )
}

/// A call in `vendor`'s own terms (its coordinate space, its envelope's options).
fn call_for(vendor: Vendor) -> impl Strategy<Value = ComputerCall> {
    let actions = match vendor {
        Vendor::OpenAi | Vendor::Native => prop::collection::vec(action(), 1..4).boxed(),
        _ => action().prop_map(|a| vec![a]).boxed(),
    };
    (
        actions,
        prop::option::of("[a-z0-9_]{1,12}"),
        safety_checks(),
        any::<bool>(),
    )
        .prop_map(move |(actions, call_id, checks, batched)| {
            let mut call = ComputerCall::native(Action::Screenshot);
            call.vendor = vendor;
            call.actions = actions;
            call.call_id = call_id;
            match vendor {
                Vendor::OpenAi => {
                    call.safety_checks = checks;
                    call.batched = batched || call.actions.len() > 1;
                }
                Vendor::Gemini => {
                    call.coords = GEMINI_GRID;
                    // Gemini has one safety decision, under a fixed id.
                    call.safety_checks = checks
                        .into_iter()
                        .take(1)
                        .map(|check| SafetyCheck {
                            id: gemini::SAFETY_CHECK_ID.into(),
                            ..check
                        })
                        .collect();
                }
                _ => call.coords = CoordSpace::Display,
            }
            call
        })
}

/// `decode(encode(call)) == call` for every call the vendor can express.
fn computer_round_trip(vendor: Vendor, call: &ComputerCall) -> Result<(), TestCaseError> {
    if let Ok(encoded) = computer::encode(call, vendor) {
        let mut expected = call.clone();
        if vendor == Vendor::Gemini {
            // Gemini's only wait is `wait_5_seconds`: a wait of unspecified length is sent
            // as that one, and comes back saying so.
            for action in &mut expected.actions {
                if let Action::Wait { duration_secs } = action {
                    duration_secs.get_or_insert(5.0);
                }
            }
        }
        prop_assert_eq!(
            computer::decode(vendor, &encoded),
            Ok(expected),
            "{}",
            encoded
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn computer_decoders_never_panic_on_json(value in json()) {
        decode_every_computer_shape(&value);
        computer_decode_is_stable(&value)?;
    }

    #[test]
    fn computer_decoders_never_panic_on_bytes(value in bytes_as_json()) {
        if let Some(value) = value {
            decode_every_computer_shape(&value);
        }
    }

    #[test]
    fn computer_decoders_never_panic_on_near_misses(action in action(), vendor in 0..3usize, mutation in json(), field in word()) {
        // A valid shape with one field replaced by anything: the errors the models make.
        let vendor = [Vendor::Anthropic, Vendor::OpenAi, Vendor::Native][vendor];
        let Ok(mut encoded) = computer::encode(&ComputerCall::native(action), vendor) else {
            return Ok(());
        };
        // Mutate the action itself: Anthropic's `input`, OpenAI's `action`, or the native object.
        let inner = ["input", "action"].into_iter().find(|k| encoded.get(*k).is_some_and(Value::is_object));
        let object = match inner {
            Some(k) => encoded[k].as_object_mut(),
            None => encoded.as_object_mut(),
        };
        if let Some(object) = object {
            object.insert(field, mutation);
        }
        decode_every_computer_shape(&encoded);
        computer_decode_is_stable(&encoded)?;
    }

    #[test]
    fn anthropic_calls_round_trip(call in call_for(Vendor::Anthropic)) {
        computer_round_trip(Vendor::Anthropic, &call)?;
    }

    #[test]
    fn openai_calls_round_trip(call in call_for(Vendor::OpenAi)) {
        computer_round_trip(Vendor::OpenAi, &call)?;
    }

    #[test]
    fn gemini_calls_round_trip(call in call_for(Vendor::Gemini)) {
        computer_round_trip(Vendor::Gemini, &call)?;
    }

    #[test]
    fn native_calls_round_trip(call in call_for(Vendor::Native)) {
        computer_round_trip(Vendor::Native, &call)?;
    }

    #[test]
    fn conversation_decoders_never_panic_and_are_stable(value in json()) {
        conversation_decode_is_stable(&value)?;
    }

    #[test]
    fn conversation_decoders_never_panic_on_bytes(value in bytes_as_json()) {
        if let Some(value) = value {
            conversation_decode_is_stable(&value)?;
        }
    }

    #[test]
    fn conversation_requests_in_vendor_shape_are_stable(value in vendor_request()) {
        conversation_decode_is_stable(&value)?;
    }

    #[test]
    fn event_seq_round_trips(seq in any::<u64>(), pad in "[ \t]{0,2}") {
        prop_assert_eq!(parse_event_seq(format!("{pad}{seq}{pad}").as_bytes()), Ok(seq));
    }

    #[test]
    fn event_seq_never_panics_and_takes_digits_only(raw in prop::collection::vec(any::<u8>(), 0..32)) {
        match parse_event_seq(&raw) {
            Ok(seq) => {
                let text = std::str::from_utf8(&raw).unwrap().trim();
                prop_assert!(text.bytes().all(|b| b.is_ascii_digit()));
                prop_assert_eq!(text.trim_start_matches('0').to_owned(), if seq == 0 { String::new() } else { seq.to_string() });
            }
            Err(error) => prop_assert!(error.shown.chars().count() <= 64),
        }
    }
}

/// Every conversation decoder on `value`; what decodes re-encodes in the same vendor's
/// shape and decodes to the same value.
fn conversation_decode_is_stable(value: &Value) -> Result<(), TestCaseError> {
    if let Ok(request) = messages::decode_request(value) {
        let again = messages::decode_request(&messages::encode_request(&request));
        prop_assert_eq!(again.ok(), Some(request));
    }
    if let Ok(request) = chat::decode_request(value) {
        settles(&request, |r| {
            chat::decode_request(&chat::encode_request(r)).ok()
        })?;
    }
    if let Ok(request) = responses::decode_request(value) {
        settles(&request, |r| {
            responses::decode_request(&responses::encode_request(r)).ok()
        })?;
    }
    if let Ok(turn) = messages::decode_response(value) {
        let again = messages::decode_response(&messages::encode_response(&turn));
        prop_assert_eq!(again.ok(), Some(turn));
    }
    if let Ok(turn) = chat::decode_response(value) {
        // The Chat encoder completes a turn with `object` and `created`, which its decoder
        // keeps (found by the fuzz target); from then on the turn is stable.
        if let Ok(filled) = chat::decode_response(&chat::encode_response(&turn)) {
            let again = chat::decode_response(&chat::encode_response(&filled));
            prop_assert_eq!(again.ok(), Some(filled));
        }
    }
    if let Ok(turn) = responses::decode_response(value) {
        // The Responses encoder completes a turn with the fields the SDK requires
        // (`object`, `status`, `created_at`, the tool settings, usage details), which its
        // decoder keeps; from then on the turn is stable.
        // An unknown content part may come back as an item the decoder refuses (found by
        // the fuzz target; docs/fuzzing.md).
        if let Ok(filled) = responses::decode_response(&responses::encode_response(&turn)) {
            let again = responses::decode_response(&responses::encode_response(&filled));
            prop_assert_eq!(again.ok(), Some(filled));
        }
    }
    Ok(())
}

/// Top-level fields the Chat and Responses encoders write themselves. One of them in
/// `extra` means the request had it with a type the decoder does not take (`"instructions":
/// false`); kept there, it replaces the encoder's value on the way back.
const ENCODED_FIELDS: &[&str] = &[
    "model",
    "messages",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
];

/// A Chat or Responses request survives `decode(encode(..))` exactly when every content
/// block is one the decoder knows and no known field had the wrong type. Known losses,
/// kept visible here (docs/fuzzing.md): a block of an unknown type is carried opaquely, and
/// the encoders do not put it back where it was — Chat drops it from assistant messages,
/// Responses writes an unknown content *part* as an *item* of its own, which its decoder
/// may then refuse (a part without a `type`); a wrongly typed known field kept in `extra`
/// replaces the encoded one. Whatever decodes again is stable from then on.
fn settles(
    request: &Request,
    trip: impl Fn(&Request) -> Option<Request>,
) -> Result<(), TestCaseError> {
    let opaque = request.messages.iter().any(|m| {
        m.content
            .iter()
            .any(|b| matches!(b, ContentBlock::Opaque { .. }))
    });
    let malformed = request
        .extra
        .keys()
        .any(|k| ENCODED_FIELDS.contains(&k.as_str()));
    let settled = trip(request);
    if !opaque && !malformed {
        prop_assert_eq!(settled.as_ref(), Some(request));
    }
    if let Some(settled) = settled {
        prop_assert_eq!(trip(&settled), Some(settled));
    }
    Ok(())
}

/// Requests shaped like each vendor's (model, messages or input, tools), with contents
/// drawn from the vocabulary, so the decoders get past their envelopes.
fn vendor_request() -> impl Strategy<Value = Value> {
    let role = prop::sample::select(&["user", "assistant", "system", "developer", "tool"][..]);
    let block = (word(), json(), word(), json()).prop_map(|(kind, a, key, b)| {
        let mut block = Map::new();
        block.insert("type".into(), Value::String(kind));
        block.insert("text".into(), a);
        block.insert(key, b);
        Value::Object(block)
    });
    let content = prop_oneof![
        text().prop_map(Value::String),
        prop::collection::vec(block, 0..3).prop_map(Value::Array),
    ];
    let message =
        (role, content, prop::option::of((word(), json()))).prop_map(|(role, content, more)| {
            let mut message = Map::new();
            message.insert("role".into(), role.into());
            message.insert("content".into(), content);
            if let Some((key, value)) = more {
                message.insert(key, value);
            }
            Value::Object(message)
        });
    (
        prop::collection::vec(message, 0..4),
        prop::sample::select(&["messages", "input"][..]),
        prop::option::of(json()),
        prop::option::of((word(), json())),
    )
        .prop_map(|(messages, field, tools, more)| {
            let mut body = Map::new();
            body.insert("model".into(), "m".into());
            body.insert("max_tokens".into(), 16.into());
            body.insert(field.into(), Value::Array(messages));
            if let Some(tools) = tools {
                body.insert("tools".into(), tools);
            }
            if let Some((key, value)) = more {
                body.insert(key, value);
            }
            Value::Object(body)
        })
}

/// Decode errors are values the model can read: a typed variant with a message.
#[test]
fn decode_errors_are_typed_and_say_what_is_wrong() {
    let error = computer::decode(Vendor::Anthropic, &Value::from(7)).unwrap_err();
    assert!(matches!(error, DecodeError::NotAnObject(_)));
    assert!(!error.to_string().is_empty());
}

/// Inputs the `conversation` fuzz target found (kept as its seeds): a Chat turn without
/// `object` (the encoder adds it), a Responses turn with a content part of unknown type.
#[test]
fn inputs_the_fuzz_target_found_keep_the_properties() {
    for text in [
        include_str!("../../../../tests/fuzz/seeds/conversation/found_chat_turn_object.json"),
        include_str!("../../../../tests/fuzz/seeds/conversation/found_responses_unknown_part.json"),
    ] {
        let value: Value = serde_json::from_str(text).unwrap();
        conversation_decode_is_stable(&value).unwrap();
    }
}
