//! Closing the connection after a refusal answered before the request's body was read.
//!
//! Why: a request refused by a layer or a fallback (another host, a body too large, the
//! wrong content type, an unknown route or method) is answered without its body being
//! read. The connection cannot carry another request until that body is drained, so the
//! server closes it after the answer; without `Connection: close` in that answer, a
//! keep-alive client (httpx, requests, every SDK) may already have sent its next request
//! on it and sees "server disconnected" instead of an answer. Saying so in the answer
//! makes the client open a new connection for the next request.

use axum::extract::Request;
use axum::http::{HeaderValue, Version, header};
use axum::middleware::Next;
use axum::response::Response;

/// Adds `Connection: close` to an error answer (4xx, 5xx) of an HTTP/1 request that came
/// with a body: such answers are the ones that may leave the body unread. (HTTP/2 has
/// no connection header and resets only the stream.)
pub(super) async fn close_after_refusal(request: Request, next: Next) -> Response {
    let http1 = matches!(request.version(), Version::HTTP_10 | Version::HTTP_11);
    let with_body = has_body(request.headers());
    let mut response = next.run(request).await;
    let status = response.status();
    if http1 && with_body && (status.is_client_error() || status.is_server_error()) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Whether a request with these headers carries a body: chunked, or a length above zero.
fn has_body(headers: &axum::http::HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|length| length > 0)
}

#[cfg(test)]
mod tests {
    use super::has_body;
    use axum::http::{HeaderMap, HeaderValue, header};

    #[test]
    fn a_body_is_a_positive_length_or_chunks() {
        let mut headers = HeaderMap::new();
        assert!(!has_body(&headers));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        assert!(!has_body(&headers));
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("2"));
        assert!(has_body(&headers));
        let mut chunked = HeaderMap::new();
        chunked.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        assert!(has_body(&chunked));
    }
}
