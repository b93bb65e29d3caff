//! Property tests of `OriginPattern::parse` (`--allow-origin`, `--block-origin`, the
//! origins of an HTTP session request): any text parses or is refused with a message, never
//! panics; a parsed pattern keeps its text (serde round trip) and matching never panics;
//! `scheme://host:port` patterns match exactly their own origin.

#![allow(clippy::unwrap_used, reason = "tests")]

use cordon_computer::origin::OriginPattern;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use url::Url;

fn config() -> Config {
    Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

/// Text made of the pieces patterns are made of, plus anything.
fn pattern_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("http://".to_owned()),
        Just("https://".to_owned()),
        Just("ws://".to_owned()),
        Just("file://".to_owned()),
        Just("*.".to_owned()),
        Just("[::1]".to_owned()),
        Just("127.0.0.1".to_owned()),
        Just("example.com".to_owned()),
        Just(":".to_owned()),
        Just("/".to_owned()),
        "[0-9]{1,6}",
        "[a-zA-Z.-]{1,8}",
        "\\PC{1,4}",
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

fn url() -> impl Strategy<Value = Url> {
    (
        prop::sample::select(&["http", "https", "ws", "wss"][..]),
        prop::sample::select(
            &[
                "127.0.0.1",
                "[::1]",
                "example.com",
                "a.example.com",
                "localhost",
            ][..],
        ),
        prop::option::of(1u16..),
    )
        .prop_map(|(scheme, host, port)| {
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            Url::parse(&format!("{scheme}://{host}{port}/x")).unwrap()
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_parses_or_is_refused(raw in prop_oneof![pattern_text(), "\\PC{0,32}"], url in url()) {
        match OriginPattern::parse(&raw) {
            Ok(pattern) => {
                let _ = pattern.matches(&url);
                let text = serde_json::to_value(&pattern).unwrap();
                prop_assert_eq!(&text, &serde_json::Value::String(raw.clone()));
                prop_assert_eq!(serde_json::from_value::<OriginPattern>(text).unwrap(), pattern);
            }
            Err(message) => prop_assert!(message.contains("origin pattern"), "{}", message),
        }
    }

    #[test]
    fn an_origin_pattern_matches_its_own_origin(
        scheme in prop::sample::select(&["http", "https"][..]),
        host in "[a-z]{1,10}\\.(com|dev)",
        port in 1u16..,
    ) {
        let pattern = OriginPattern::parse(&format!("{scheme}://{host}:{port}")).unwrap();
        let other_port = if port == u16::MAX { 1 } else { port + 1 };
        let own = Url::parse(&format!("{scheme}://{host}:{port}/path?q")).unwrap();
        let other_port = Url::parse(&format!("{scheme}://{host}:{other_port}/")).unwrap();
        let other_host = Url::parse(&format!("{scheme}://x{host}:{port}/")).unwrap();
        prop_assert!(pattern.matches(&own), "{}", own);
        prop_assert!(!pattern.matches(&other_port), "{}", other_port);
        prop_assert!(!pattern.matches(&other_host), "{}", other_host);
    }
}
