//! The tools-file parser (declarations, handlers, input schemas compiled by jsonschema).

#![no_main]

use cordon_core::registry::ToolRegistry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ToolRegistry::from_json(text, "fuzz.json");
    }
});
