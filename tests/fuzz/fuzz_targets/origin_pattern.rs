//! `OriginPattern::parse` (`--allow-origin`, `--block-origin`, session requests), and
//! matching a parsed pattern against a URL.

#![no_main]

use cordon_computer::origin::OriginPattern;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Pattern and URL share the input: split at the first newline.
    let (pattern, url) = text.split_once('\n').unwrap_or((text, "http://127.0.0.1/"));
    if let Ok(pattern) = OriginPattern::parse(pattern)
        && let Ok(url) = url::Url::parse(url)
    {
        let _ = pattern.matches(&url);
    }
});
