//! Responses that carry bytes Cordon did not write itself — files a sandbox wrote or a
//! client uploaded, screenshots of web pages — served as inert downloads.
//!
//! Why: those bytes are attacker-chosen (model-written code, page content). Served with
//! an active type on Cordon's own origin, the script of an HTML or SVG file would run as
//! same-origin: the Host/Origin guard lets its requests through, and it could drive the
//! whole API (create sandboxes, run code, write files). So each such response
//! - is `Content-Disposition: attachment` (RFC 6266, with a safe `filename` and the exact
//!   name in `filename*`): browsers save it instead of opening it;
//! - never has an active type (HTML, SVG, XML, JavaScript, CSS are `text/plain`);
//! - says `X-Content-Type-Options: nosniff`, so no type is guessed from the bytes;
//! - says `Content-Security-Policy: sandbox; default-src 'none'; frame-ancestors 'none'`:
//!   if something renders it anyway, it has an opaque origin (its requests carry
//!   `Origin: null`, which the guard refuses), no script, no subresources, no framing;
//! - says `Cross-Origin-Resource-Policy: same-origin`, so other sites cannot embed it.
//!
//! Every other response gets `nosniff` too ([`nosniff`], a layer over all routes).

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const NOSNIFF: &str = "nosniff";
const SANDBOXED: &str = "sandbox; default-src 'none'; frame-ancestors 'none'";
/// `Cross-Origin-Resource-Policy` (not among `http`'s named headers).
const CORP: &str = "cross-origin-resource-policy";

/// `bytes` as an inert download named after the last segment of `path`, typed by its
/// extension with [`passive_type`].
pub(crate) fn download(path: &str, bytes: Vec<u8>) -> Response {
    download_as(path, passive_type(path), bytes)
}

/// `bytes` as an inert download named after the last segment of `path`, with
/// `media_type`, which must be passive (images, text, JSON, octets).
pub(crate) fn download_as(path: &str, media_type: &'static str, bytes: Vec<u8>) -> Response {
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(header::CONTENT_DISPOSITION, attachment(path));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static(NOSNIFF),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SANDBOXED),
    );
    headers.insert(
        HeaderName::from_static(CORP),
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// The content type a file is served with, from its extension. Only passive types: what
/// a browser would run or render as a document with script (HTML, SVG, XML, JavaScript,
/// CSS) is `text/plain`, so its text stays readable and nothing in it runs.
pub(crate) fn passive_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let extension = name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "csv" => "text/csv; charset=utf-8",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" | "md" | "log" | "py" | "js" | "mjs" | "cjs" | "ts" | "html" | "htm" | "xhtml"
        | "shtml" | "svg" | "svgz" | "xml" | "xsl" | "xslt" | "rss" | "atom" | "css" => {
            "text/plain; charset=utf-8"
        }
        _ => "application/octet-stream",
    }
}

/// `attachment; filename="…"; filename*=UTF-8''…` for the last segment of `path`: the
/// quoted fallback keeps printable ASCII but for `"`, `\`, `%` and `;` (others become
/// `_`); `filename*` carries the exact name, percent-encoded (RFC 8187).
fn attachment(path: &str) -> HeaderValue {
    let name = path.rsplit('/').next().unwrap_or(path);
    let name = if name.is_empty() { "download" } else { name };
    let fallback: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() || c == ' ') && !matches!(c, '"' | '\\' | '%' | ';') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::with_capacity(name.len() * 3);
    for byte in name.bytes() {
        // RFC 8187 attr-char: the bytes that may stand for themselves.
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    let value = format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}");
    // Only printable ASCII went in, so this cannot fail; a bare `attachment` if it did.
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("attachment"))
}

/// Adds `X-Content-Type-Options: nosniff` to a response that does not say it yet: no
/// response of the API is to be read as anything but the type it declares.
pub(crate) async fn nosniff(mut response: Response) -> Response {
    response
        .headers_mut()
        .entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static(NOSNIFF));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_extensions_are_never_served_as_active_types() {
        for name in [
            "a.html",
            "a.HTM",
            "d/a.xhtml",
            "a.svg",
            "a.SVGZ",
            "a.xml",
            "a.xsl",
            "a.js",
            "a.mjs",
            "a.css",
            "a.rss",
            "x.html.",
            "noext",
            ".html",
            "dir.html/file",
        ] {
            let media = passive_type(name);
            for active in ["html", "svg", "xml", "javascript", "ecmascript", "css"] {
                assert!(!media.contains(active), "{name} → {media}");
            }
        }
        assert_eq!(passive_type("out/chart.png"), "image/png");
        assert_eq!(passive_type("t.json"), "application/json");
    }

    #[test]
    fn attachment_names_are_quoted_safely_and_exactly() {
        let header = |path: &str| attachment(path).to_str().unwrap_or("").to_owned();
        assert_eq!(
            header("out/report.html"),
            "attachment; filename=\"report.html\"; filename*=UTF-8''report.html"
        );
        assert_eq!(
            header("a\"b;c%d\\e\u{e9}\r\n.svg"),
            "attachment; filename=\"a_b_c_d_e___.svg\"; \
             filename*=UTF-8''a%22b%3Bc%25d%5Ce%C3%A9%0D%0A.svg"
        );
        assert_eq!(
            header(""),
            "attachment; filename=\"download\"; filename*=UTF-8''download"
        );
    }
}
