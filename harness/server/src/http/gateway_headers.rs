//! What the gateway's routes (`/v1/messages`…, `/session…`) read from a client's request
//! headers: a header's text, and the client's own credential for the upstream.

use axum::http::HeaderMap;
use cordon_gateway::Credential;

/// The header `name`'s text, trimmed; `None` when absent, empty or not text.
pub(super) fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The client's credential: `x-api-key`, else Gemini's `x-goog-api-key`, else the token
/// of `Authorization: Bearer`.
pub(super) fn credential(headers: &HeaderMap) -> Option<Credential> {
    header_text(headers, "x-api-key")
        .or_else(|| header_text(headers, "x-goog-api-key"))
        .or_else(|| {
            header_text(headers, "authorization")
                .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned))
        })
        .map(Credential)
}
