//! The Host/Origin guard of both HTTP listeners (`cordon serve`, `cordon mcp --http`):
//! a request is served only if it names this server by one of the names it serves, and a
//! browser request only if it comes from a page at one of those names.
//!
//! Why: a web page the user visits can send requests to `http://127.0.0.1:7420` (with an
//! `Origin` naming the page), or point its own DNS name at 127.0.0.1 (DNS rebinding: then
//! the request even looks same-origin to the browser, but carries `Host: attacker.example`).
//! Refusing unknown `Host` and `Origin` values closes both doors, before authentication
//! and before any body is read.
//!
//! The rules ([`HostGuard::check`]):
//! - The names served are `localhost`, `127.0.0.1`, `::1`, the literal IP the listener is
//!   bound to (unless it is unspecified, `0.0.0.0`/`::`), and every `--allow-host NAME`.
//!   Names compare exactly, ASCII case aside: no trailing dot, no other spelling of an IP.
//! - `Host` (and the authority of an absolute-form request target, when there is one) must
//!   be one of them, with no port or the port the listener is bound to. Otherwise `403
//!   forbidden_host`.
//! - No `Host` at all (and no authority in the target) is `400 missing_host`: HTTP/1.1
//!   requires it (RFC 9112 §3.2), every browser sends it, and without it the request names
//!   no server to judge.
//! - `Origin`, when present, must be `http://` or `https://` followed by an allowed name,
//!   with no port or the bound port (so `Origin: null` and pages on other local ports are
//!   refused). Otherwise `403 forbidden_origin`. Requests without `Origin` (curl, SDKs) pass.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Longest header value quoted back in an error message.
const MAX_QUOTED_CHARS: usize = 200;

/// One name a server answers to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Served {
    /// A DNS name, lowercase.
    Name(String),
    /// An IP literal (`[::1]` in a Host header, `::1` here).
    Ip(IpAddr),
}

impl Served {
    fn parse(text: &str) -> Served {
        let bare = text
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(text);
        match bare.parse::<IpAddr>() {
            Ok(ip) => Served::Ip(ip),
            Err(_) => Served::Name(bare.to_ascii_lowercase()),
        }
    }

    fn shown(&self) -> String {
        match self {
            Served::Name(name) => name.clone(),
            Served::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
            Served::Ip(ip) => ip.to_string(),
        }
    }
}

/// Which `Host` and `Origin` values a listener accepts (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGuard {
    served: Vec<Served>,
    port: u16,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No `Host` header and no authority in the request target.
    #[error("the request has no Host header; HTTP/1.1 requires one")]
    MissingHost,
    /// `Host` (or the target's authority) is not a name this server answers to.
    #[error("Host {0:?} is not a name this server answers to")]
    ForbiddenHost(String),
    /// `Origin` names a page that is not at one of this server's names.
    #[error("Origin {0:?} is not one of this server's own origins")]
    ForbiddenOrigin(String),
}

/// Checks one `--allow-host` value: a DNS name or an IP address (IPv6 with or without
/// brackets), without scheme, port or path. Returns it as the guard will compare it.
pub fn parse_allowed_host(text: &str) -> Result<String, String> {
    let text = text.trim();
    let hint = "give a host name or IP address as clients write it in the URL, without \
                scheme, port or path, e.g. --allow-host cordon.internal";
    if text.is_empty() {
        return Err(format!("the name is empty; {hint}"));
    }
    let bare = text
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(text);
    if bare.parse::<IpAddr>().is_ok() {
        return Ok(Served::parse(bare).shown());
    }
    let valid = !bare.starts_with(['.', '-'])
        && !bare.ends_with(['.', '-'])
        && !bare.contains("..")
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
    if valid {
        Ok(bare.to_ascii_lowercase())
    } else {
        Err(format!("{text:?} is not a host name; {hint}"))
    }
}

impl HostGuard {
    /// The guard of a listener bound to `bound`, also accepting `allowed_hosts` (names as
    /// [`parse_allowed_host`] returns them).
    pub fn new(bound: SocketAddr, allowed_hosts: &[String]) -> HostGuard {
        let mut served = vec![
            Served::Name("localhost".to_owned()),
            Served::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Served::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ];
        let mut add = |name: Served| {
            if !served.contains(&name) {
                served.push(name);
            }
        };
        // No client names a server `0.0.0.0`; clients of a wildcard listener use the
        // machine's real names, which the operator lists with --allow-host.
        if !bound.ip().is_unspecified() {
            add(Served::Ip(bound.ip()));
        }
        for name in allowed_hosts {
            add(Served::parse(name));
        }
        HostGuard {
            served,
            port: bound.port(),
        }
    }

    /// Judges a request by its target and headers.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let mut hosts = headers.get_all(header::HOST).iter();
        let host = hosts.next();
        if hosts.next().is_some() {
            return Err(Refusal::ForbiddenHost("(several Host headers)".to_owned()));
        }
        if host.is_none() && uri.authority().is_none() {
            return Err(Refusal::MissingHost);
        }
        if let Some(host) = host {
            let text = host.to_str().map_err(|_| quoted_host(host.as_bytes()))?;
            if !self.authority_allowed(text) {
                return Err(quoted_host(text.as_bytes()));
            }
        }
        // An absolute-form target (`POST http://name/...`) names the server itself, and
        // RFC 9112 makes it win over `Host`: it must pass too.
        if let Some(authority) = uri.authority()
            && !self.authority_allowed(authority.as_str())
        {
            return Err(quoted_host(authority.as_str().as_bytes()));
        }
        let mut origins = headers.get_all(header::ORIGIN).iter();
        if let Some(origin) = origins.next() {
            if origins.next().is_some() {
                return Err(Refusal::ForbiddenOrigin(
                    "(several Origin headers)".to_owned(),
                ));
            }
            let refused = || Refusal::ForbiddenOrigin(quote(origin.as_bytes()));
            let text = origin.to_str().map_err(|_| refused())?;
            if !self.origin_allowed(text) {
                return Err(refused());
            }
        }
        Ok(())
    }

    /// `name` or `name:port` with an allowed name and no port or the bound port.
    fn authority_allowed(&self, text: &str) -> bool {
        // Userinfo has no place in a Host header, and `Authority` would accept it.
        if text.contains('@') {
            return false;
        }
        let Ok(authority) = text.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        let port_ok = match authority.port() {
            None => !text.ends_with(':'),
            Some(port) => port.as_str() == self.port.to_string(),
        };
        port_ok && self.served.contains(&Served::parse(authority.host()))
    }

    /// `http://` or `https://`, then an allowed authority, and nothing after it.
    fn origin_allowed(&self, text: &str) -> bool {
        let Some((scheme, authority)) = text.split_once("://") else {
            return false;
        };
        matches!(scheme, "http" | "https")
            && !authority.contains(['/', '?', '#'])
            && self.authority_allowed(authority)
    }

    /// The names this guard accepts, as an operator would write them.
    fn names(&self) -> String {
        self.served
            .iter()
            .map(Served::shown)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The HTTP answer to `refusal`, telling the operator what to change.
    pub fn refusal_response(&self, refusal: &Refusal) -> ApiError {
        let names = self.names();
        let port = self.port;
        match refusal {
            Refusal::MissingHost => ApiError::bad_request(
                "missing_host",
                format!(
                    "the request has no Host header; send `Host: localhost:{port}` (or another \
                     name this server answers to: {names})"
                ),
            ),
            Refusal::ForbiddenHost(host) => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!(
                    "Host {host} is not a name this server answers to ({names}, with no port \
                     or port {port}); requests naming other hosts are refused to stop DNS \
                     rebinding. If clients reach this server by that name, start it with \
                     --allow-host NAME"
                ),
            ),
            Refusal::ForbiddenOrigin(origin) => ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_origin",
                format!(
                    "requests from web pages at Origin {origin} are refused: only pages at \
                     this server's own names ({names}, http or https, with no port or port \
                     {port}) may call it. If a page served under another name should, start \
                     the server with --allow-host NAME"
                ),
            ),
        }
    }
}

fn quoted_host(bytes: &[u8]) -> Refusal {
    Refusal::ForbiddenHost(quote(bytes))
}

/// A header value for an error message: lossy UTF-8, debug-quoted, cut to a bounded length.
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    if cut.len() < text.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// Axum middleware: refuses requests the guard refuses, before anything else runs.
pub async fn guard_requests(
    State(guard): State<Arc<HostGuard>>,
    request: Request,
    next: Next,
) -> Response {
    match guard.check(request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            // The refused request's body is never read, so hyper will not reuse the connection;
            // saying so stops a client from sending its next request down a socket that is
            // about to close ("server disconnected without sending a response").
            let mut response = guard.refusal_response(&refusal).into_response();
            response.headers_mut().insert(
                header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use pretty_assertions::assert_eq;

    fn guard(bound: &str, allowed: &[&str]) -> HostGuard {
        let allowed: Vec<String> = allowed
            .iter()
            .map(|name| parse_allowed_host(name).unwrap())
            .collect();
        HostGuard::new(bound.parse().unwrap(), &allowed)
    }

    fn check(guard: &HostGuard, host: Option<&str>, origin: Option<&str>) -> Result<(), Refusal> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        guard.check(&Uri::from_static("/v1/sandboxes"), &headers)
    }

    fn host_ok(guard: &HostGuard, host: &str) -> bool {
        check(guard, Some(host), None).is_ok()
    }

    fn origin_ok(guard: &HostGuard, origin: &str) -> bool {
        check(guard, Some("localhost:7420"), Some(origin)).is_ok()
    }

    #[test]
    fn loopback_names_pass_with_no_port_or_the_bound_port() {
        let guard = guard("127.0.0.1:7420", &[]);
        for host in [
            "localhost",
            "localhost:7420",
            "LOCALHOST:7420",
            "127.0.0.1",
            "127.0.0.1:7420",
            "[::1]",
            "[::1]:7420",
        ] {
            assert!(host_ok(&guard, host), "{host}");
        }
    }

    #[test]
    fn other_names_ports_and_spellings_are_refused() {
        let guard = guard("127.0.0.1:7420", &[]);
        for host in [
            "rebind.attacker.example:7420",
            "rebind.attacker.example",
            "localhost:7421",
            "localhost:80",
            "localhost.",
            "localhost.:7420",
            "localhost:",
            "localhost:07420",
            "127.1:7420",
            "2130706433",
            "[::ffff:127.0.0.1]:7420",
            "0.0.0.0:7420",
            "user@localhost:7420",
            "localhost.attacker.example",
            "",
            "[::1",
        ] {
            assert!(
                matches!(
                    check(&guard, Some(host), None),
                    Err(Refusal::ForbiddenHost(_))
                ),
                "{host}"
            );
        }
    }

    #[test]
    fn the_bound_address_and_allowed_hosts_are_served() {
        let guard = guard(
            "127.0.0.2:9000",
            &["cordon.internal", "[fd00::5]", "10.0.0.7"],
        );
        for host in [
            "127.0.0.2:9000",
            "cordon.internal",
            "Cordon.Internal:9000",
            "[fd00::5]:9000",
            "10.0.0.7",
        ] {
            assert!(host_ok(&guard, host), "{host}");
        }
        assert!(!host_ok(&guard, "cordon.internal:7420"));
        assert!(!host_ok(&guard, "x.cordon.internal"));
        // A wildcard bind adds no name of its own.
        let wildcard = self::guard("0.0.0.0:7420", &[]);
        assert!(!host_ok(&wildcard, "0.0.0.0:7420"));
        assert!(host_ok(&wildcard, "localhost:7420"));
    }

    #[test]
    fn origins_must_be_http_or_https_at_a_served_name() {
        let guard = guard("127.0.0.1:7420", &["cordon.internal"]);
        for origin in [
            "http://localhost:7420",
            "http://127.0.0.1:7420",
            "https://localhost",
            "http://[::1]:7420",
            "https://cordon.internal",
        ] {
            assert!(origin_ok(&guard, origin), "{origin}");
        }
        for origin in [
            "http://attacker.example",
            "http://attacker.example:7420",
            "http://localhost:3000",
            "null",
            "file://",
            "ftp://localhost:7420",
            "http://localhost:7420/",
            "http://localhost:7420/path",
            "localhost:7420",
            "http://localhost.",
            "",
        ] {
            assert!(
                matches!(
                    check(&guard, Some("localhost:7420"), Some(origin)),
                    Err(Refusal::ForbiddenOrigin(_))
                ),
                "{origin}"
            );
        }
    }

    #[test]
    fn missing_or_repeated_hosts_and_absolute_targets() {
        let guard = guard("127.0.0.1:7420", &[]);
        assert_eq!(check(&guard, None, None), Err(Refusal::MissingHost));
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("localhost"));
        headers.append(header::HOST, HeaderValue::from_static("attacker.example"));
        assert!(guard.check(&Uri::from_static("/"), &headers).is_err());
        // An absolute-form target is judged even when Host is fine, and stands in for it.
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("localhost:7420"));
        let absolute = Uri::from_static("http://attacker.example:7420/v1/sandboxes");
        assert!(guard.check(&absolute, &headers).is_err());
        let loopback = Uri::from_static("http://localhost:7420/v1/sandboxes");
        assert_eq!(guard.check(&loopback, &HeaderMap::new()), Ok(()));
    }

    #[test]
    fn refusals_name_the_flag_and_stay_short() {
        let guard = guard("127.0.0.1:7420", &[]);
        let long = format!("{}.example", "a".repeat(5000));
        let refusal = check(&guard, Some(&long), None).unwrap_err();
        let error = guard.refusal_response(&refusal);
        assert_eq!(error.status, StatusCode::FORBIDDEN);
        assert_eq!(error.error_type, "forbidden_host");
        assert!(error.message.contains("--allow-host"), "{}", error.message);
        assert!(error.message.len() < 800, "{}", error.message.len());
        let refusal =
            check(&guard, Some("localhost"), Some("http://attacker.example")).unwrap_err();
        let error = guard.refusal_response(&refusal);
        assert_eq!(error.error_type, "forbidden_origin");
        assert!(error.message.contains("--allow-host"), "{}", error.message);
    }

    #[test]
    fn allowed_host_values_are_checked() {
        assert_eq!(
            parse_allowed_host("Cordon.Internal"),
            Ok("cordon.internal".to_owned())
        );
        assert_eq!(parse_allowed_host("::1"), Ok("[::1]".to_owned()));
        assert_eq!(parse_allowed_host("[fd00::5]"), Ok("[fd00::5]".to_owned()));
        assert_eq!(parse_allowed_host("10.0.0.7"), Ok("10.0.0.7".to_owned()));
        for bad in [
            "",
            "http://cordon.internal",
            "cordon.internal:8080",
            "cordon.internal/",
            "*",
            "*.example",
            "a b",
            "cordon.internal.",
            ".example",
        ] {
            assert!(parse_allowed_host(bad).is_err(), "{bad}");
        }
    }
}
