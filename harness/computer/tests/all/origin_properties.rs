//! Property tests of `OriginPattern::parse` (`--allow-origin`, `--block-origin`, the
//! origins of an HTTP session request): any text parses or is refused with a message, never
//! panics; a parsed pattern keeps its text (serde round trip) and matching never panics;
//! `scheme://host:port` patterns match exactly their own origin; a bare host covers only
//! its scheme's default port (and lifts the private-network rule only there), `host:*`
//! every port, whatever the spelling of the host.

#![allow(clippy::unwrap_used, reason = "tests")]

use cordon_computer::origin::{OriginPattern, OriginPolicy};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use std::net::IpAddr;
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

/// A host spelled as an operator may write it in a pattern, the host a URL on it has, and
/// a private address it is at (the literal itself, or what the name resolves to).
fn private_host() -> impl Strategy<Value = (&'static str, &'static str, IpAddr)> {
    prop::sample::select(
        &[
            ("10.0.0.5", "10.0.0.5", "10.0.0.5"),
            ("[::1]", "[::1]", "::1"),
            ("[::ffff:a00:5]", "10.0.0.5", "10.0.0.5"),
            ("0x7f.1", "127.0.0.1", "127.0.0.1"),
            ("LocalHost.", "localhost", "127.0.0.1"),
            ("Intranet.Example.", "intranet.example", "10.0.0.5"),
            ("*.Corp.Example", "db.corp.example", "172.16.0.9"),
            ("metadata.test", "metadata.test", "169.254.169.254"),
        ][..],
    )
    .prop_map(|(pattern, host, ip)| (pattern, host, ip.parse().unwrap()))
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![Just(80u16), Just(443), Just(8080), 1u16..]
}

fn default_port(scheme: &str) -> u16 {
    if matches!(scheme, "http" | "ws") {
        80
    } else {
        443
    }
}

proptest! {
    #![proptest_config(config())]

    /// `--allow-origin HOST` opens the host's default ports and no other port of it to the
    /// session, by URL and at the proxy, whichever name or address the page uses.
    #[test]
    fn a_bare_host_covers_only_its_default_ports(
        (pattern, host, ip) in private_host(),
        scheme in prop::sample::select(&["http", "https", "ws", "wss"][..]),
        port in port(),
    ) {
        let url = format!("{scheme}://{host}:{port}/x");
        let default = port == default_port(scheme);
        let bare = OriginPattern::parse(pattern).unwrap();
        prop_assert_eq!(bare.matches(&Url::parse(&url).unwrap()), default, "{}", url);
        let allow = OriginPolicy::new(vec![bare.clone()], vec![]);
        prop_assert_eq!(allow.check(&url).is_ok(), default, "{}", url);
        let operator = OriginPolicy::default().with_operator(&[bare], false);
        let at_default_port = port == 80 || port == 443;
        let proxy = operator.check_address(host, port, ip);
        prop_assert_eq!(proxy.is_ok(), at_default_port, "{}:{} at {}", host, port, ip);
        if !at_default_port {
            prop_assert!(proxy.unwrap_err().0.contains("private-network address"));
        }
    }

    /// `HOST:*` covers every port and `HOST:N` exactly port N, under any scheme.
    #[test]
    fn a_port_wildcard_covers_every_port(
        (pattern, host, ip) in private_host(),
        scheme in prop::sample::select(&["http", "https", "ws", "wss"][..]),
        port in port(),
        other in port(),
    ) {
        let url = format!("{scheme}://{host}:{port}/x");
        let any = OriginPattern::parse(&format!("{pattern}:*")).unwrap();
        prop_assert!(any.matches(&Url::parse(&url).unwrap()), "{}", url);
        let operator = OriginPolicy::default().with_operator(&[any], false);
        prop_assert!(operator.check(&url).is_ok(), "{}", url);
        prop_assert!(operator.check_address(host, port, ip).is_ok());
        let one = OriginPattern::parse(&format!("{pattern}:{other}")).unwrap();
        prop_assert_eq!(one.matches(&Url::parse(&url).unwrap()), port == other, "{}", url);
        let operator = OriginPolicy::default().with_operator(&[one], false);
        prop_assert_eq!(operator.check_address(host, port, ip).is_ok(), port == other);
    }

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
