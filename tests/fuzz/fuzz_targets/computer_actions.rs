//! The vendor computer-action decoders (Anthropic, OpenAI, Gemini, native) on any JSON.
//! Whatever decodes must re-encode, and decode again to the same call.

#![no_main]

use cordon_protocol::computer::{self, Vendor, anthropic, gemini, openai};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for vendor in [
        Vendor::Anthropic,
        Vendor::OpenAi,
        Vendor::Gemini,
        Vendor::Native,
    ] {
        let Ok(call) = computer::decode(vendor, &value) else {
            continue;
        };
        if let Ok(encoded) = computer::encode(&call, vendor) {
            assert_eq!(computer::decode(vendor, &encoded).as_ref(), Ok(&call));
        }
    }
    for version in [anthropic::Version::V20250124, anthropic::Version::V20251124] {
        let _ = anthropic::decode_input(&value, version);
    }
    let _ = openai::decode_action(&value);
    if let Some(object) = value.as_object()
        && let Some(name) = object.get("name").and_then(|n| n.as_str())
    {
        let _ = gemini::decode_action(name, object);
    }
});
