//! The conversation decoders (Anthropic Messages, Chat Completions, Responses; requests and
//! responses). Whatever decodes re-encodes in the same vendor's shape and decodes again to
//! the same value.

#![no_main]

use cordon_protocol::conversation::{anthropic, chat, responses};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(request) = anthropic::decode_request(&value) {
        assert_eq!(
            anthropic::decode_request(&anthropic::encode_request(&request)).ok(),
            Some(request)
        );
    }
    if let Ok(request) = chat::decode_request(&value) {
        // Unknown content parts may move or drop on the first trip (docs/fuzzing.md).
        if let Ok(settled) = chat::decode_request(&chat::encode_request(&request)) {
            assert_eq!(
                chat::decode_request(&chat::encode_request(&settled)).ok(),
                Some(settled)
            );
        }
    }
    if let Ok(request) = responses::decode_request(&value) {
        // An unknown content part comes back as an item of its own after one trip, or not
        // at all (docs/fuzzing.md); whatever decodes again is stable from then on.
        if let Ok(settled) = responses::decode_request(&responses::encode_request(&request)) {
            assert_eq!(
                responses::decode_request(&responses::encode_request(&settled)).ok(),
                Some(settled)
            );
        }
    }
    if let Ok(turn) = anthropic::decode_response(&value) {
        assert_eq!(
            anthropic::decode_response(&anthropic::encode_response(&turn)).ok(),
            Some(turn)
        );
    }
    if let Ok(turn) = chat::decode_response(&value) {
        // Like Responses: the encoder completes a turn with `object` and `created`.
        if let Ok(filled) = chat::decode_response(&chat::encode_response(&turn)) {
            assert_eq!(
                chat::decode_response(&chat::encode_response(&filled)).ok(),
                Some(filled)
            );
        }
    }
    if let Ok(turn) = responses::decode_response(&value) {
        // The encoder completes a turn with the fields the SDK requires, which the decoder
        // keeps; from then on it is stable.
        // An unknown content part may come back as an item the decoder refuses
        // (docs/fuzzing.md).
        if let Ok(filled) = responses::decode_response(&responses::encode_response(&turn)) {
            assert_eq!(
                responses::decode_response(&responses::encode_response(&filled)).ok(),
                Some(filled)
            );
        }
    }
});
