//! Which URLs a session may reach: an allow-list, a block-list, and schemes that are never
//! navigable (`file:`, `chrome:`, `javascript:` …).
//!
//! Patterns are origins (`http://127.0.0.1:8080`), wildcard hosts (`https://*.example.com`)
//! or bare hosts (`example.com`: http or https, each on its default port). A pattern
//! without a port covers only the default port of the URL's scheme (80 for http, 443 for
//! https); `host:8080` covers that port, `host:*` every port. `ws:`/`wss:` URLs match the
//! `http:`/`https:` patterns of the same host and port, as browsers treat them.
//!
//! A pattern allows (and lifts the private-network rule for) exactly the host and port it
//! covers, nothing wider: `--allow-origin 10.0.0.5` opens `http://10.0.0.5/` and
//! `https://10.0.0.5/`, not the admin port `10.0.0.5:8080`. In a block-list a bare host
//! without a port blocks the host on every port: a block-list errs wide, an allow-list
//! narrow, so an ambiguous pattern never lets through what its author meant to stop.
//!
//! Hosts are compared after normalisation, on patterns and URLs alike: lower case, no
//! trailing dot, IDNA names as punycode, numeric IPv4 forms (`127.1`, `0x7f.1`) as dotted
//! quads and IPv4-mapped IPv6 (`[::ffff:7f00:1]`) as the IPv4 address it maps.
//!
//! Private-network addresses ([`crate::private_net`]) are refused unless the origin is on
//! the allow-list or on [`OriginPolicy::private_allow`], or [`OriginPolicy::allow_private_network`]
//! is set. [`OriginPolicy::check`] sees only the URL, so it catches literal addresses and
//! `localhost` names; names that resolve to private addresses are refused where the
//! connection is made ([`OriginPolicy::check_address`], on every resolved address).

use crate::private_net::{is_localhost_name, private_range};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use url::{Host, Url};

/// One origin pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OriginPattern {
    raw: String,
    /// `http` or `https` (ws/wss fold into these); `None` = any.
    scheme: Option<String>,
    /// Lower-case host; leading `*.` means any subdomain (and the domain itself).
    host: String,
    port: PortRule,
}

/// Which ports a pattern covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortRule {
    /// No port written: the default port of the URL's scheme (80 for http/ws, 443 for
    /// https/wss), never any other.
    Default,
    /// `:*`: every port.
    Any,
    /// `:N`: that port only.
    Exact(u16),
}

/// The default port of a URL scheme, after [`fold_scheme`].
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

fn fold_scheme(s: &str) -> &str {
    match s {
        "ws" => "http",
        "wss" => "https",
        other => other,
    }
}

impl TryFrom<String> for OriginPattern {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        Self::parse(&raw)
    }
}

impl From<OriginPattern> for String {
    fn from(p: OriginPattern) -> String {
        p.raw
    }
}

impl OriginPattern {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("origin pattern `{raw}`: {why}");
        let (scheme, rest) = match raw.split_once("://") {
            Some((s, r)) => (Some(fold_scheme(&s.to_ascii_lowercase()).to_owned()), r),
            None => (None, raw),
        };
        if let Some(s) = &scheme
            && s != "http"
            && s != "https"
        {
            return Err(bad("scheme must be http, https, ws or wss"));
        }
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(bad("an origin has no path"));
        }
        let port_of = |p: &str| match p {
            "*" => Ok(PortRule::Any),
            p => p
                .parse::<u16>()
                .map(PortRule::Exact)
                .map_err(|_| bad("a port is a number or `*`")),
        };
        let (host, port) = match rest.strip_prefix('[') {
            // An IPv6 literal: its colons are not a port separator.
            Some(inner) => {
                let (v6, tail) = inner.split_once(']').ok_or_else(|| bad("unclosed `[`"))?;
                let port = match tail {
                    "" => PortRule::Default,
                    t => port_of(t.strip_prefix(':').ok_or_else(|| bad("bad port"))?)?,
                };
                (format!("[{v6}]"), port)
            }
            None => match rest.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), port_of(p)?),
                None => (rest.to_owned(), PortRule::Default),
            },
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let (wildcard, bare) = match host.strip_prefix("*.") {
            Some(domain) => ("*.", domain),
            None => ("", host.as_str()),
        };
        let host = Url::parse(&format!("http://{bare}/"))
            .ok()
            .as_ref()
            .and_then(canonical_host)
            .ok_or_else(|| bad("not a valid host"))?;
        Ok(Self {
            raw: raw.to_owned(),
            scheme,
            host: format!("{wildcard}{host}"),
            port,
        })
    }

    /// Whether `url` (http/https/ws/wss) is in this pattern: its scheme, host and port
    /// (see the module docs for ports).
    pub fn matches(&self, url: &Url) -> bool {
        self.matches_with(url, self.port)
    }

    /// Whether `url` is in this pattern as a block-list entry: as [`matches`](Self::matches),
    /// except that a bare host without a port blocks every port of that host.
    pub fn blocks(&self, url: &Url) -> bool {
        let port = match (&self.scheme, self.port) {
            (None, PortRule::Default) => PortRule::Any,
            (_, port) => port,
        };
        self.matches_with(url, port)
    }

    fn matches_with(&self, url: &Url, port: PortRule) -> bool {
        let scheme = fold_scheme(url.scheme());
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        let Some(host) = canonical_host(url) else {
            return false;
        };
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        };
        if !host_ok {
            return false;
        }
        let url_port = url.port_or_known_default();
        match port {
            PortRule::Any => true,
            PortRule::Exact(p) => url_port == Some(p),
            // The default of the URL's own scheme: `http://host:443/` is not `https://host/`.
            PortRule::Default => url_port.is_some() && url_port == default_port(scheme),
        }
    }
}

/// A URL's host, normalised for comparison (see the module docs). `None`: no host.
fn canonical_host(url: &Url) -> Option<String> {
    Some(match url.host()? {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(a) => a.to_string(),
        Host::Ipv6(a) => match a.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{a}]"),
        },
    })
}

/// The IP address a canonical host names, if it is one.
fn host_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The session's network policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OriginPolicy {
    /// Empty = every origin not blocked.
    #[serde(default)]
    pub allow: Vec<OriginPattern>,
    #[serde(default)]
    pub block: Vec<OriginPattern>,
    /// Origins that may be reached at private-network addresses although they are not on
    /// `allow` (the operator's `--allow-origin`). They lift the private-network rule for
    /// those origins and restrict nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private_allow: Vec<OriginPattern>,
    /// Lifts the private-network rule entirely (`--allow-private-network`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_private_network: bool,
    /// `allow` was written by the model (MCP `computer_open`): it narrows where the session
    /// may go but does not lift the private-network rule, which only the operator can
    /// (`private_allow`, `allow_private_network`). Otherwise a model could reach cloud
    /// metadata by naming `http://169.254.169.254` in its own allow-list.
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_is_model_chosen: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// The refusal for a private-network address: says why, and what would allow it.
fn private_refusal(host: &str, ip: Option<IpAddr>, range: &str) -> Refusal {
    let what = match ip {
        Some(ip) if host_ip(host) != Some(ip) => {
            format!("{host} resolves to {ip}, a private-network address ({range})")
        }
        _ => format!("{host} is a private-network address ({range})"),
    };
    Refusal(format!(
        "{what}; private networks are off limits unless the origin is in the session's \
         allow_origins or the operator allows it (--allow-origin, --allow-private-network)"
    ))
}

/// `http://host:port/` and `https://host:port/` for an endpoint seen without a scheme
/// (`host` bare, an IPv6 literal with or without brackets, or an IP address).
fn endpoint_urls(host: &str, port: u16) -> Vec<Url> {
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    ["http", "https"]
        .iter()
        .filter_map(|scheme| Url::parse(&format!("{scheme}://{host}:{port}/")).ok())
        .collect()
}

impl OriginPolicy {
    pub fn new(allow: Vec<OriginPattern>, block: Vec<OriginPattern>) -> Self {
        Self {
            allow,
            block,
            ..Self::default()
        }
    }

    /// Adds what the operator allows on top of a session's own policy: origins reachable
    /// on private networks, or private networks altogether.
    pub fn with_operator(mut self, private_allow: &[OriginPattern], allow_private: bool) -> Self {
        self.private_allow.extend(private_allow.iter().cloned());
        self.allow_private_network |= allow_private;
        self
    }

    /// Checks a URL a page or the model wants to load. A private-network address is
    /// caught here when the URL names it literally (any IP form, `localhost`,
    /// `*.localhost`); names that resolve to one are refused when connecting.
    pub fn check(&self, raw: &str) -> Result<(), Refusal> {
        let url = Url::parse(raw).map_err(|e| Refusal(format!("not a valid URL: {e}")))?;
        match url.scheme() {
            "http" | "https" | "ws" | "wss" => {}
            // Local, origin-less content the page itself produced.
            "data" | "blob" => return Ok(()),
            "about" if url.path() == "blank" || url.path() == "srcdoc" => return Ok(()),
            other => return Err(Refusal(format!("the `{other}:` scheme is not allowed"))),
        }
        if self.block.iter().any(|p| p.blocks(&url)) {
            return Err(Refusal("the origin is on the block-list".into()));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.matches(&url)) {
            return Err(Refusal("the origin is not on the allow-list".into()));
        }
        if let Some(host) = canonical_host(&url) {
            let range = if is_localhost_name(&host) {
                Some("loopback")
            } else {
                host_ip(&host).and_then(private_range)
            };
            // A `localhost` name is allowed when its addresses are (as at the proxy).
            let loopback_allowed = || {
                is_localhost_name(&host)
                    && ["127.0.0.1", "[::1]"].iter().any(|ip| {
                        let mut named = url.clone();
                        named.set_host(Some(ip)).is_ok() && self.private_exempt(&named)
                    })
            };
            if let Some(range) = range
                && !self.private_exempt(&url)
                && !loopback_allowed()
            {
                return Err(private_refusal(&host, None, range));
            }
        }
        Ok(())
    }

    /// The host name and port whose resolved addresses decide whether `raw` may load,
    /// when the private-network rule applies to it: `None` for URLs that are refused or
    /// allowed by [`check`](Self::check) alone (an address, a `localhost` name, an exempt
    /// origin, a non-web scheme).
    #[cfg(feature = "browser")]
    pub(crate) fn endpoint_to_resolve(&self, raw: &str) -> Option<(String, u16)> {
        let url = Url::parse(raw).ok()?;
        if !matches!(url.scheme(), "http" | "https" | "ws" | "wss") || self.private_exempt(&url) {
            return None;
        }
        let Host::Domain(_) = url.host()? else {
            return None;
        };
        let host = canonical_host(&url)?;
        if is_localhost_name(&host) {
            return None;
        }
        Some((host, url.port_or_known_default()?))
    }

    /// Whether `url` may be reached at a private-network address.
    fn private_exempt(&self, url: &Url) -> bool {
        self.allow_private_network
            || (!self.allow_is_model_chosen && self.allow.iter().any(|p| p.matches(url)))
            || self.private_allow.iter().any(|p| p.matches(url))
    }

    /// The part of [`check`](Self::check) that holds browser-wide: schemes and the
    /// block-list (the allow-list and private networks are enforced per session, by its
    /// proxy).
    pub fn check_blocklist(&self, raw: &str) -> Result<(), Refusal> {
        let relaxed = Self {
            block: self.block.clone(),
            allow_private_network: true,
            ..Self::default()
        };
        relaxed.check(raw)
    }

    /// The block-list check for a connection seen without its scheme (a SOCKS proxy sees
    /// only `host:port`): refused when an `http:` or `https:` origin (and so `ws:`/`wss:`)
    /// at that host and port is blocked.
    pub fn check_endpoint(&self, host: &str, port: u16) -> Result<(), Refusal> {
        for url in endpoint_urls(host, port) {
            if self.block.iter().any(|p| p.blocks(&url)) {
                return Err(Refusal("the origin is on the block-list".into()));
            }
        }
        Ok(())
    }

    /// The checks on a connection by name, before it is resolved: the block-list, and
    /// the allow-list (an endpoint is allowed when an http/https origin on it is).
    pub fn check_connection(&self, host: &str, port: u16) -> Result<(), Refusal> {
        self.check_endpoint(host, port)?;
        if !self.allow.is_empty()
            && !endpoint_urls(host, port)
                .iter()
                .any(|u| self.allow.iter().any(|p| p.matches(u)))
        {
            return Err(Refusal("the origin is not on the allow-list".into()));
        }
        Ok(())
    }

    /// The checks on one address `host` resolved to, before connecting to it: the
    /// block-list on the address itself (blocking `http://127.0.0.1:8000` blocks every
    /// name of that address), and the private-network rule (lifted when the endpoint is
    /// allowed by its name or by that address).
    pub fn check_address(&self, host: &str, port: u16, ip: IpAddr) -> Result<(), Refusal> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let literal = ip.to_string();
        self.check_endpoint(&literal, port)?;
        let Some(range) = private_range(ip) else {
            return Ok(());
        };
        let exempt = self.allow_private_network
            || endpoint_urls(host, port)
                .iter()
                .chain(&endpoint_urls(&literal, port))
                .any(|u| self.private_exempt(u));
        if exempt {
            Ok(())
        } else {
            Err(private_refusal(host, Some(ip), range))
        }
    }
}

/// `scheme://host:port` of a URL, for "is this a new origin" checks.
pub fn origin_of(raw: &str) -> Option<String> {
    let url = Url::parse(raw).ok()?;
    match url.origin() {
        url::Origin::Tuple(..) => Some(url.origin().ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn p(s: &str) -> OriginPattern {
        OriginPattern::parse(s).unwrap()
    }

    #[test]
    fn endpoints_are_refused_when_any_scheme_on_them_is_blocked() {
        let policy = OriginPolicy::new(
            Vec::new(),
            vec![
                p("https://evil.test"),
                p("http://127.0.0.1:9000"),
                p("tracker.test"),
            ],
        );
        assert!(policy.check_endpoint("evil.test", 443).is_err());
        assert!(policy.check_endpoint("evil.test", 80).is_ok());
        assert!(policy.check_endpoint("127.0.0.1", 9000).is_err());
        assert!(policy.check_endpoint("127.0.0.1", 9001).is_ok());
        assert!(policy.check_endpoint("tracker.test", 80).is_err());
        assert!(policy.check_endpoint("tracker.test", 443).is_err());
        assert!(policy.check_endpoint("::1", 9000).is_ok());
        let ipv6 = OriginPolicy::new(Vec::new(), vec![p("http://[::1]:9000")]);
        assert!(ipv6.check_endpoint("::1", 9000).is_err());
    }

    #[test]
    fn patterns_match_origins_and_websockets() {
        let allow = p("http://127.0.0.1:8080");
        assert!(allow.matches(&Url::parse("http://127.0.0.1:8080/x?y").unwrap()));
        assert!(allow.matches(&Url::parse("ws://127.0.0.1:8080/socket").unwrap()));
        assert!(!allow.matches(&Url::parse("http://127.0.0.1:8081/").unwrap()));
        assert!(!allow.matches(&Url::parse("https://127.0.0.1:8080/").unwrap()));
        let wild = p("https://*.example.com");
        assert!(wild.matches(&Url::parse("https://a.b.example.com/").unwrap()));
        assert!(wild.matches(&Url::parse("https://example.com/").unwrap()));
        assert!(!wild.matches(&Url::parse("https://example.com:8443/").unwrap()));
        assert!(!wild.matches(&Url::parse("https://badexample.com/").unwrap()));
        let bare = p("example.com");
        assert!(bare.matches(&Url::parse("http://example.com/").unwrap()));
        assert!(bare.matches(&Url::parse("wss://example.com/").unwrap()));
        assert!(!bare.matches(&Url::parse("http://example.com:9/").unwrap()));
        assert!(!bare.matches(&Url::parse("http://example.com:443/").unwrap()));
        assert!(p("example.com:*").matches(&Url::parse("http://example.com:9/").unwrap()));
        assert!(p("[::1]:*").matches(&Url::parse("https://[::1]:9/").unwrap()));
        assert!(OriginPattern::parse("example.com:x").is_err());
        assert!(OriginPattern::parse("example.com:").is_err());
        assert!(OriginPattern::parse("ftp://x").is_err());
        assert!(OriginPattern::parse("http://x/path").is_err());
    }

    #[test]
    fn policy_blocks_schemes_and_lists() {
        let pol = OriginPolicy::new(vec![p("http://127.0.0.1:8080")], vec![]);
        assert!(pol.check("http://127.0.0.1:8080/").is_ok());
        assert!(pol.check("data:text/html,hi").is_ok());
        assert!(pol.check("about:blank").is_ok());
        for bad in [
            "file:///etc/passwd",
            "chrome://settings",
            "javascript:alert(1)",
            "http://127.0.0.1:9/",
        ] {
            assert!(pol.check(bad).is_err(), "{bad}");
        }
        let block = OriginPolicy::new(vec![], vec![p("evil.test")]);
        assert_eq!(
            block.check("https://evil.test/x").unwrap_err().0,
            "the origin is on the block-list"
        );
        assert!(block.check("https://fine.test/").is_ok());
        assert_eq!(
            origin_of("http://127.0.0.1:8080/a").as_deref(),
            Some("http://127.0.0.1:8080")
        );
    }

    #[test]
    fn hosts_match_after_normalisation() {
        let block = OriginPolicy::new(vec![], vec![p("http://127.0.0.1:8000")]);
        for same in [
            "http://127.1:8000/",
            "http://0x7f.1:8000/",
            "http://2130706433:8000/",
            "http://[::ffff:7f00:1]:8000/",
            "http://[::ffff:127.0.0.1]:8000/",
            "ws://127.0.0.1:8000/socket",
        ] {
            assert_eq!(
                block.check_blocklist(same).unwrap_err().0,
                "the origin is on the block-list",
                "{same}"
            );
        }
        assert!(block.check_endpoint("::ffff:127.0.0.1", 8000).is_err());
        let names = OriginPolicy::new(vec![], vec![p("https://Evil.Test."), p("bücher.example")]);
        for same in [
            "https://evil.test/",
            "https://EVIL.test./x",
            "http://xn--bcher-kva.example/",
            "http://BÜCHER.example./",
        ] {
            assert!(names.check_blocklist(same).is_err(), "{same}");
        }
        assert!(names.check_endpoint("evil.test.", 443).is_err());
        assert!(names.check_blocklist("https://notevil.test/").is_ok());
        assert_eq!(p("[::1]").host, "[::1]");
        assert_eq!(p("http://[::1]:9000").port, PortRule::Exact(9000));
        assert_eq!(p("[::1]").port, PortRule::Default);
        assert_eq!(p("*.Example.COM.").host, "*.example.com");
        assert!(OriginPattern::parse("http://[::1").is_err());
    }

    /// The security-review finding: `--allow-origin 10.0.0.5` used to cover every port of
    /// the host and lift the private-network rule for all of them (an admin port, another
    /// service on the same machine), although a bare host means the default ports.
    #[test]
    fn a_bare_host_opens_only_its_default_ports_to_private_networks() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let operator = |pattern: &str| OriginPolicy::default().with_operator(&[p(pattern)], false);
        let bare = operator("10.0.0.5");
        for ok in ["http://10.0.0.5/", "https://10.0.0.5/", "ws://10.0.0.5:80/"] {
            assert!(bare.check(ok).is_ok(), "{ok}");
        }
        for refused in [
            "http://10.0.0.5:8080/",
            "https://10.0.0.5:80/",
            "ws://10.0.0.5:22/",
        ] {
            let why = bare.check(refused).unwrap_err().0;
            assert!(why.contains("private-network address"), "{refused}: {why}");
        }
        assert!(bare.check_address("10.0.0.5", 80, ip("10.0.0.5")).is_ok());
        assert!(bare.check_address("10.0.0.5", 443, ip("10.0.0.5")).is_ok());
        assert!(
            bare.check_address("10.0.0.5", 8080, ip("10.0.0.5"))
                .is_err()
        );
        // A name resolving to the address, and the name itself allowed bare.
        assert!(
            bare.check_address("admin.test", 8080, ip("10.0.0.5"))
                .is_err()
        );
        let name = operator("Intranet.Example.");
        assert!(
            name.check_address("intranet.example", 443, ip("10.0.0.5"))
                .is_ok()
        );
        assert!(
            name.check_address("INTRANET.example.", 8080, ip("10.0.0.5"))
                .is_err()
        );
        let wild = operator("*.corp.example");
        assert!(
            wild.check_address("a.corp.example", 80, ip("10.0.0.5"))
                .is_ok()
        );
        assert!(
            wild.check_address("a.corp.example", 8080, ip("10.0.0.5"))
                .is_err()
        );
        // IPv6 literals, their IPv4-mapped spelling, and `localhost` names.
        let v6 = operator("[::1]");
        assert!(v6.check("http://[::1]/").is_ok());
        assert!(v6.check("http://localhost./").is_ok());
        assert!(v6.check("http://[::1]:8080/").is_err());
        assert!(v6.check("http://localhost:8080/").is_err());
        assert!(v6.check_address("localhost", 8080, ip("::1")).is_err());
        assert!(
            operator("[::ffff:a00:5]")
                .check("http://10.0.0.5:8080/")
                .is_err()
        );
        assert!(
            operator("LOCALHOST.")
                .check("http://localhost:8080/")
                .is_err()
        );
        // `host:*` and explicit ports say so.
        let any = operator("10.0.0.5:*");
        assert!(any.check("http://10.0.0.5:8080/").is_ok());
        assert!(any.check_address("10.0.0.5", 8080, ip("10.0.0.5")).is_ok());
        assert!(operator("[::1]:*").check("http://localhost:8080/").is_ok());
        let one = operator("10.0.0.5:8080");
        assert!(one.check("https://10.0.0.5:8080/").is_ok());
        assert!(one.check("http://10.0.0.5/").is_err());
        assert!(one.check_address("10.0.0.5", 8081, ip("10.0.0.5")).is_err());
    }

    #[test]
    fn a_bare_host_in_an_allow_list_allows_only_its_default_ports() {
        let allow = OriginPolicy::new(vec![p("example.com")], vec![]);
        assert!(allow.check("https://example.com/").is_ok());
        assert!(allow.check("http://example.com/").is_ok());
        let why = allow.check("http://example.com:8080/").unwrap_err().0;
        assert_eq!(why, "the origin is not on the allow-list");
        assert!(allow.check_connection("example.com", 443).is_ok());
        assert!(allow.check_connection("example.com", 8080).is_err());
        // The operator's start-page check (`operator_allows` in cordon-server) is a
        // private-network-lifted policy of the same patterns: it narrows the same way.
        let lifted = OriginPolicy::new(vec![p("127.0.0.1")], vec![]).with_operator(&[], true);
        assert!(lifted.check("http://127.0.0.1:9/").is_err());
    }

    #[test]
    fn a_bare_host_in_a_block_list_blocks_every_port() {
        let block = OriginPolicy::new(
            vec![],
            vec![
                p("Tracker.Test."),
                p("https://evil.test"),
                p("93.184.215.14"),
            ],
        );
        for url in [
            "http://tracker.test/",
            "https://tracker.test:8443/",
            "ws://tracker.test:9/",
        ] {
            assert!(block.check(url).is_err(), "{url}");
        }
        assert!(block.check_endpoint("tracker.test", 8080).is_err());
        // A blocked address, under any name that resolves to it, on any port.
        let ip = "93.184.215.14".parse().unwrap();
        assert!(block.check_address("x.test", 8080, ip).is_err());
        // With a scheme, a block-list entry means what it says.
        assert!(block.check("https://evil.test:8443/").is_ok());
        assert!(block.check("https://evil.test/").is_err());
    }

    #[test]
    fn a_model_written_allow_list_does_not_lift_the_private_network_rule() {
        let metadata = OriginPattern::parse("http://169.254.169.254").unwrap();
        let mut policy = OriginPolicy::new(vec![metadata.clone()], vec![]);
        assert!(policy.check("http://169.254.169.254/latest/").is_ok());
        policy.allow_is_model_chosen = true;
        let refusal = policy.check("http://169.254.169.254/latest/").unwrap_err();
        assert!(refusal.0.contains("private-network"), "{}", refusal.0);
        // The operator can still allow it.
        let operator = policy.with_operator(&[metadata], false);
        assert!(operator.check("http://169.254.169.254/latest/").is_ok());
    }

    #[test]
    fn private_networks_are_refused_unless_named_or_lifted() {
        let open = OriginPolicy::default();
        for url in [
            "http://127.0.0.1:8000/",
            "http://localhost:8000/",
            "http://LOCALHOST.:8000/",
            "http://app.localhost/",
            "http://127.1/",
            "http://0x7f.1/",
            "http://0.0.0.0:80/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::ffff:7f00:1]:8000/",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "ws://127.0.0.1:9/",
        ] {
            let why = open.check(url).unwrap_err().0;
            assert!(why.contains("private-network address"), "{url}: {why}");
        }
        assert!(open.check("https://example.com/").is_ok());
        assert!(open.check("http://8.8.8.8/").is_ok());
        // Named in the allow-list, or by the operator, or lifted.
        let named = OriginPolicy::new(vec![p("http://127.0.0.1:8000")], vec![]);
        assert!(named.check("http://127.0.0.1:8000/").is_ok());
        assert!(named.check("http://127.1:8000/").is_ok());
        let operator = OriginPolicy::default().with_operator(&[p("http://localhost:8000")], false);
        assert!(operator.check("http://localhost:8000/").is_ok());
        assert!(operator.check("http://localhost:8001/").is_err());
        assert!(
            operator.check("https://example.com/").is_ok(),
            "no allow-list"
        );
        let by_ip = OriginPolicy::default().with_operator(&[p("http://127.0.0.1:8000")], false);
        assert!(by_ip.check("http://localhost:8000/").is_ok());
        assert!(by_ip.check("http://localhost:8001/").is_err());
        let lifted = OriginPolicy::default().with_operator(&[], true);
        assert!(lifted.check("http://10.0.0.1/").is_ok());
        assert!(lifted.check("file:///etc/passwd").is_err());
    }

    #[test]
    fn connections_are_judged_on_every_resolved_address() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let open = OriginPolicy::default();
        // A public name that resolves to a private address (DNS rebinding, metadata).
        let why = open.check_address("rebind.example", 80, ip("169.254.169.254"));
        assert!(why.unwrap_err().0.contains("resolves to 169.254.169.254"));
        assert!(open.check_address("localhost", 80, ip("::1")).is_err());
        assert!(
            open.check_address("x.example", 80, ip("::ffff:10.0.0.1"))
                .is_err()
        );
        assert!(
            open.check_address("x.example", 80, ip("93.184.215.14"))
                .is_ok()
        );
        // Allowed by the name the page used, or by the address it resolved to.
        let by_name = OriginPolicy::new(vec![p("http://localhost:8000")], vec![]);
        assert!(by_name.check_connection("localhost", 8000).is_ok());
        assert!(
            by_name
                .check_address("localhost", 8000, ip("127.0.0.1"))
                .is_ok()
        );
        assert!(
            by_name.check_connection("127.0.0.1", 8000).is_err(),
            "allow-list"
        );
        let by_ip = OriginPolicy::default().with_operator(&[p("http://127.0.0.1:8000")], false);
        assert!(
            by_ip
                .check_address("localhost", 8000, ip("127.0.0.1"))
                .is_ok()
        );
        assert!(
            by_ip
                .check_address("localhost", 8001, ip("127.0.0.1"))
                .is_err()
        );
        // A blocked address is blocked under every name.
        let block =
            OriginPolicy::new(vec![], vec![p("http://127.0.0.1:8000")]).with_operator(&[], true);
        assert!(block.check_connection("localhost", 8000).is_ok());
        let why = block.check_address("localhost", 8000, ip("127.0.0.1"));
        assert_eq!(why.unwrap_err().0, "the origin is on the block-list");
        assert!(
            block
                .check_address("x", 8000, ip("::ffff:127.0.0.1"))
                .is_err()
        );
        assert!(block.check_address("x", 8001, ip("127.0.0.1")).is_ok());
    }
}
