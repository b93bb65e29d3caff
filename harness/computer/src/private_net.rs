//! Which IP addresses are private-network addresses: the ones a session may not reach
//! unless its policy names the origin or lifts the default ([`crate::origin::OriginPolicy`]).
//!
//! Judged on IP addresses, never on names: the session's SOCKS proxy resolves a name,
//! classifies every address it got and connects only to one that passed. IPv6 forms that
//! carry an IPv4 address (IPv4-mapped `::ffff:0:0/96`, IPv4-compatible `::/96`, NAT64
//! `64:ff9b::/96`, 6to4 `2002::/16`) are judged by that IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Every range that counts as private, with the name messages use (for docs and tests).
pub const RANGES: &[(&str, &str)] = &[
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("169.254.0.0/16", "link-local"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved (and broadcast)"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("fc00::/7", "unique-local"),
    ("ff00::/8", "multicast"),
    ("64:ff9b:1::/48", "NAT64 local-use"),
];

/// The name of the private range `ip` lies in, or `None` for a public address.
pub fn private_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_range(v4),
        IpAddr::V6(v6) => v6_range(v6),
    }
}

fn v4_range(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "unspecified",
        (127, ..) => "loopback",
        (10, ..) => "private (RFC 1918)",
        (172, 16..=31, _) => "private (RFC 1918)",
        (192, 168, _) => "private (RFC 1918)",
        (169, 254, _) => "link-local",
        (100, 64..=127, _) => "shared address space (CGNAT)",
        (192, 0, 0) => "IETF protocol assignments",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved (and broadcast)",
        _ => return None,
    })
}

fn v6_range(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(ip) {
        return v4_range(v4);
    }
    let s = ip.segments();
    Some(match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => "unspecified",
        [0, 0, 0, 0, 0, 0, 0, 1] => "loopback",
        [x, ..] if x & 0xffc0 == 0xfe80 => "link-local",
        [x, ..] if x & 0xffc0 == 0xfec0 => "site-local",
        [x, ..] if x & 0xfe00 == 0xfc00 => "unique-local",
        [x, ..] if x & 0xff00 == 0xff00 => "multicast",
        [0x64, 0xff9b, 1, ..] => "NAT64 local-use",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 address carries, in the forms that reach it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        // IPv4-mapped ::ffff:a.b.c.d
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(low(hi, lo)),
        // IPv4-compatible ::a.b.c.d (deprecated; `::` and `::1` are themselves)
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => Some(low(hi, lo)),
        // NAT64 well-known prefix 64:ff9b::a.b.c.d
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        // 6to4 2002:aabb:ccdd::
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

/// Whether `host` (lower-case, no trailing dot) is a name that always means this machine:
/// `localhost` and `*.localhost` (RFC 6761; Chromium resolves them to loopback itself).
pub fn is_localhost_name(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn range(s: &str) -> Option<&'static str> {
        private_range(s.parse().unwrap())
    }

    #[test]
    fn private_ranges_and_their_ipv6_disguises() {
        for (ip, want) in [
            ("127.0.0.1", "loopback"),
            ("127.255.1.2", "loopback"),
            ("0.0.0.0", "unspecified"),
            ("10.1.2.3", "private (RFC 1918)"),
            ("172.31.255.255", "private (RFC 1918)"),
            ("192.168.1.1", "private (RFC 1918)"),
            ("169.254.169.254", "link-local"),
            ("100.100.100.200", "shared address space (CGNAT)"),
            ("255.255.255.255", "reserved (and broadcast)"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("fe80::1", "link-local"),
            ("fd00:ec2::254", "unique-local"),
            ("fc00::1", "unique-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:7f00:1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::127.0.0.1", "loopback"),
            ("64:ff9b::10.0.0.1", "private (RFC 1918)"),
            ("2002:7f00:1::", "loopback"),
        ] {
            assert_eq!(range(ip), Some(want), "{ip}");
        }
        for public in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
        ] {
            assert_eq!(range(public), None, "{public}");
        }
        assert!(is_localhost_name("localhost"));
        assert!(is_localhost_name("a.b.localhost"));
        assert!(!is_localhost_name("localhost.example"));
        assert!(!is_localhost_name("notlocalhost"));
    }
}
