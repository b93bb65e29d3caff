//! The SSE resume point (`Last-Event-ID` header bytes, `?after=` text).

#![no_main]

use cordon_protocol::execution::parse_event_seq;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(seq) = parse_event_seq(data) {
        assert_eq!(parse_event_seq(seq.to_string().as_bytes()), Ok(seq));
    }
});
