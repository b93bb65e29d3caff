//! Which URLs a session may reach: an allow-list, a block-list, and schemes that are never
//! navigable (`file:`, `chrome:`, `javascript:` …).
//!
//! Patterns are origins (`http://127.0.0.1:8080`), wildcard hosts (`https://*.example.com`)
//! or bare hosts (`example.com`, any scheme, default ports). `ws:`/`wss:` URLs match the
//! `http:`/`https:` patterns of the same host and port, as browsers treat them.

use serde::{Deserialize, Serialize};
use url::Url;

/// One origin pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OriginPattern {
    raw: String,
    /// `http` or `https` (ws/wss fold into these); `None` = any.
    scheme: Option<String>,
    /// Lower-case host; leading `*.` means any subdomain (and the domain itself).
    host: String,
    /// `None` = the scheme's default port (or any port when the scheme is unspecified).
    port: Option<u16>,
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
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => {
                (h, Some(p.parse::<u16>().map_err(|_| bad("bad port"))?))
            }
            _ => (rest, None),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Self {
            raw: raw.to_owned(),
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether `url` (http/https/ws/wss) is in this pattern.
    pub fn matches(&self, url: &Url) -> bool {
        let scheme = fold_scheme(url.scheme());
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
            None => host == self.host,
        };
        if !host_ok {
            return false;
        }
        match (self.port, url.port_or_known_default()) {
            (Some(p), Some(u)) => p == u,
            (Some(_), None) => false,
            (None, u) => match self.scheme.as_deref() {
                Some("http") => u == Some(80),
                Some("https") => u == Some(443),
                _ => true,
            },
        }
    }

    /// An entry for Chromium's proxy bypass list. Scheme-less so that WebSockets to the
    /// same host and port go direct too.
    fn bypass_entry(&self) -> String {
        let port = self.port.or(match self.scheme.as_deref() {
            Some("http") => Some(80),
            Some("https") => Some(443),
            _ => None,
        });
        match port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }
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
}

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl OriginPolicy {
    pub fn new(allow: Vec<OriginPattern>, block: Vec<OriginPattern>) -> Self {
        Self { allow, block }
    }

    /// Checks a URL a page or the model wants to load.
    pub fn check(&self, raw: &str) -> Result<(), Refusal> {
        let url = Url::parse(raw).map_err(|e| Refusal(format!("not a valid URL: {e}")))?;
        match url.scheme() {
            "http" | "https" | "ws" | "wss" => {}
            // Local, origin-less content the page itself produced.
            "data" | "blob" => return Ok(()),
            "about" if url.path() == "blank" || url.path() == "srcdoc" => return Ok(()),
            other => return Err(Refusal(format!("the `{other}:` scheme is not allowed"))),
        }
        if self.block.iter().any(|p| p.matches(&url)) {
            return Err(Refusal("the origin is on the block-list".into()));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| p.matches(&url)) {
            return Err(Refusal("the origin is not on the allow-list".into()));
        }
        Ok(())
    }

    /// The part of [`check`](Self::check) that holds browser-wide: schemes and the
    /// block-list (the allow-list is enforced per context by the proxy).
    pub fn check_blocklist(&self, raw: &str) -> Result<(), Refusal> {
        let relaxed = Self {
            allow: Vec::new(),
            block: self.block.clone(),
        };
        relaxed.check(raw)
    }

    /// The block-list check for a connection seen without its scheme (a SOCKS proxy sees
    /// only `host:port`): refused when an `http:` or `https:` origin (and so `ws:`/`wss:`)
    /// at that host and port is blocked.
    pub fn check_endpoint(&self, host: &str, port: u16) -> Result<(), Refusal> {
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        for scheme in ["http", "https"] {
            self.check_blocklist(&format!("{scheme}://{host}:{port}/"))?;
        }
        Ok(())
    }

    /// Whether connections must go through the blocking proxy (a block-list and no
    /// allow-list; with an allow-list the dead proxy refuses everything else already).
    pub fn needs_blocking_proxy(&self) -> bool {
        self.allow.is_empty() && !self.block.is_empty()
    }

    /// Chromium's `proxyBypassList` for a context routed through a dead proxy: the allowed
    /// origins go direct, everything else (WebSockets included) fails at the proxy.
    /// `<-loopback>` stops Chromium from implicitly sending loopback addresses direct.
    pub fn proxy_bypass_list(&self) -> Option<String> {
        if self.allow.is_empty() {
            return None;
        }
        // `<-loopback>` must come first: placed after other rules it resets them (measured).
        let mut entries = vec!["<-loopback>".to_owned()];
        entries.extend(self.allow.iter().map(OriginPattern::bypass_entry));
        Some(entries.join(";"))
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
        assert!(policy.needs_blocking_proxy());
        assert!(policy.check_endpoint("evil.test", 443).is_err());
        assert!(policy.check_endpoint("evil.test", 80).is_ok());
        assert!(policy.check_endpoint("127.0.0.1", 9000).is_err());
        assert!(policy.check_endpoint("127.0.0.1", 9001).is_ok());
        assert!(policy.check_endpoint("tracker.test", 80).is_err());
        assert!(policy.check_endpoint("tracker.test", 443).is_err());
        assert!(policy.check_endpoint("::1", 9000).is_ok());
        let ipv6 = OriginPolicy::new(Vec::new(), vec![p("http://[::1]:9000")]);
        assert!(ipv6.check_endpoint("::1", 9000).is_err());
        assert!(!OriginPolicy::new(vec![p("a.test")], vec![p("b.test")]).needs_blocking_proxy());
        assert!(!OriginPolicy::default().needs_blocking_proxy());
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
        assert!(p("example.com").matches(&Url::parse("http://example.com:9/").unwrap()));
        assert!(OriginPattern::parse("ftp://x").is_err());
        assert!(OriginPattern::parse("http://x/path").is_err());
    }

    #[test]
    fn policy_blocks_schemes_lists_and_builds_bypass() {
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
        assert_eq!(
            pol.proxy_bypass_list().unwrap(),
            "<-loopback>;127.0.0.1:8080"
        );
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
}
