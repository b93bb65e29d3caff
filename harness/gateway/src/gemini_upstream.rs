//! What a Gemini upstream needs beyond its body: the URL, which names the model and the
//! method (`:generateContent`, or `:streamGenerateContent?alt=sse` for a stream), and where
//! the calls of a turn that came without an id are numbered.

use cordon_core::ids::fresh_id;

/// The URL of `model`'s method under `base` (the SDK's `base_url`). The model is the
/// client's text: every character outside `[A-Za-z0-9._-]` is percent-encoded, so it
/// names one path segment and nothing else.
pub(crate) fn url(base: &str, model: &str, stream: bool) -> String {
    let model = model.strip_prefix("models/").unwrap_or(model);
    let mut segment = String::with_capacity(model.len());
    for byte in model.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            segment.push(char::from(byte));
        } else {
            segment.push_str(&format!("%{byte:02X}"));
        }
    }
    let method = if stream {
        "streamGenerateContent?alt=sse"
    } else {
        "generateContent"
    };
    format!("{base}/v1beta/models/{segment}:{method}")
}

/// Where one turn numbers its calls that came without an id (`gcall_t_<random>_<n>`):
/// unique in the conversation, as the gateway keys results and approvals by id, and still
/// marked as Cordon's, so those ids never go back to the upstream.
pub(crate) fn call_position() -> String {
    format!("{}_", fresh_id("t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_names_one_path_segment() {
        assert_eq!(
            url("http://h", "models/gemini-2.5-flash", false),
            "http://h/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            url("http://h", "../x?key=1", true),
            "http://h/v1beta/models/..%2Fx%3Fkey%3D1:streamGenerateContent?alt=sse"
        );
    }
}
