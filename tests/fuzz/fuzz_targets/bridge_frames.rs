//! The bridge ABI's frame decoders, as the host (and the guest) run them on bytes from the
//! other side. A frame that decodes re-encodes to the same bytes (the encoding is canonical),
//! except outcome strings, which are decoded lossily.

#![no_main]

use cordon_guest::abi;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(calls) = abi::decode_batch_request(data) {
        assert_eq!(abi::encode_batch_request(&calls), data);
    }
    if let Ok((tools, code)) = abi::decode_execute_request(data) {
        assert_eq!(abi::encode_execute_request(&tools, code), data);
    }
    if let Ok(result) = abi::decode_response(data) {
        assert_eq!(abi::encode_response(&result), data);
    }
    if let Ok(results) = abi::decode_batch_response(data) {
        assert_eq!(abi::encode_batch_response(&results), data);
    }
    if let Ok(outcome) = abi::decode_outcome(data) {
        let again = abi::encode_outcome(&outcome);
        assert_eq!(abi::decode_outcome(&again), Ok(outcome));
    }
});
