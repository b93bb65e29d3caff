//! Integration tests of `cordon-guest` (one binary, see STYLE.md): property tests of the
//! bridge frames. The host decodes what a hostile guest writes into its own memory, and the
//! guest decodes what the host sends; on any bytes a decoder returns a `FrameError` or a
//! value, never panics, and a frame that decodes re-encodes to exactly the same bytes.

#![allow(clippy::unwrap_used, reason = "tests")]

use cordon_guest::abi::{self, CallResult, Outcome, ToolErrorKind, ToolFailure};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

fn kind() -> impl Strategy<Value = ToolErrorKind> {
    prop::sample::select(
        &[
            ToolErrorKind::Failed,
            ToolErrorKind::InvalidInput,
            ToolErrorKind::Denied,
            ToolErrorKind::UnknownTool,
            ToolErrorKind::Timeout,
        ][..],
    )
}

fn call_result() -> impl Strategy<Value = CallResult> {
    prop_oneof![
        "\\PC{0,24}".prop_map(Ok),
        (kind(), "\\PC{0,24}").prop_map(|(kind, message)| Err(ToolFailure { kind, message })),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (
            prop::option::of("\\PC{0,24}"),
            prop::option::of("\\PC{0,24}")
        )
            .prop_map(|(result_json, result_repr)| Outcome::Completed {
                result_json,
                result_repr
            }),
        ("\\PC{0,12}", "\\PC{0,24}", "\\PC{0,48}").prop_map(|(error_type, message, traceback)| {
            Outcome::Error {
                error_type,
                message,
                traceback,
            }
        }),
    ]
}

/// Bytes that look like frames: a small count or length first, often enough.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        (0u32..4, prop::collection::vec(any::<u8>(), 0..64)).prop_map(|(count, rest)| {
            let mut frame = count.to_le_bytes().to_vec();
            frame.extend(rest);
            frame
        }),
        (0u8..7, 0u32..16, prop::collection::vec(any::<u8>(), 0..24)).prop_map(
            |(tag, len, rest)| {
                let mut frame = vec![tag];
                frame.extend(len.to_le_bytes());
                frame.extend(rest);
                frame
            }
        ),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_decoder_is_total_and_canonical(frame in frame()) {
        if let Ok(calls) = abi::decode_batch_request(&frame) {
            prop_assert_eq!(abi::encode_batch_request(&calls), frame.clone());
        }
        if let Ok((tools, code)) = abi::decode_execute_request(&frame) {
            prop_assert_eq!(abi::encode_execute_request(&tools, code), frame.clone());
        }
        if let Ok(result) = abi::decode_response(&frame) {
            prop_assert_eq!(abi::encode_response(&result), frame.clone());
        }
        if let Ok(results) = abi::decode_batch_response(&frame) {
            prop_assert_eq!(abi::encode_batch_response(&results), frame.clone());
        }
        if let Ok(outcome) = abi::decode_outcome(&frame) {
            // Outcome strings decode lossily (a guest's value may hold lone surrogates), so
            // only valid UTF-8 comes back byte for byte.
            let again = abi::encode_outcome(&outcome);
            prop_assert_eq!(abi::decode_outcome(&again), Ok(outcome));
        }
    }

    #[test]
    fn batch_requests_round_trip(calls in prop::collection::vec(("[a-z_.]{0,12}", "\\PC{0,24}"), 0..6)) {
        let borrowed: Vec<(&str, &str)> = calls.iter().map(|(n, i)| (n.as_str(), i.as_str())).collect();
        let frame = abi::encode_batch_request(&borrowed);
        prop_assert_eq!(abi::decode_batch_request(&frame), Ok(borrowed));
    }

    #[test]
    fn execute_requests_round_trip(tools in prop::collection::vec("[a-z_.]{0,12}", 0..6), code in "\\PC{0,64}") {
        let borrowed: Vec<&str> = tools.iter().map(String::as_str).collect();
        let frame = abi::encode_execute_request(&borrowed, &code);
        prop_assert_eq!(abi::decode_execute_request(&frame), Ok((borrowed, code.as_str())));
    }

    #[test]
    fn responses_round_trip(result in call_result()) {
        prop_assert_eq!(abi::decode_response(&abi::encode_response(&result)), Ok(result));
    }

    #[test]
    fn batch_responses_round_trip(results in prop::collection::vec(call_result(), 0..6)) {
        let frame = abi::encode_batch_response(&results);
        prop_assert_eq!(abi::decode_batch_response(&frame), Ok(results));
    }

    #[test]
    fn outcomes_round_trip(outcome in outcome()) {
        prop_assert_eq!(abi::decode_outcome(&abi::encode_outcome(&outcome)), Ok(outcome));
    }

    #[test]
    fn truncated_or_extended_frames_are_errors(results in prop::collection::vec(call_result(), 1..4), cut in any::<prop::sample::Index>(), extra in any::<u8>()) {
        let frame = abi::encode_batch_response(&results);
        let cut = cut.index(frame.len());
        prop_assert!(abi::decode_batch_response(&frame[..cut]).is_err());
        let mut longer = frame.clone();
        longer.push(extra);
        prop_assert!(abi::decode_batch_response(&longer).is_err());
    }
}
