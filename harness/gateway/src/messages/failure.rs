//! A reply that ends a request early: its HTTP status, error type and message.

/// A reply that ends the request early.
pub(super) struct Fail {
    pub(super) status: u16,
    pub(super) kind: &'static str,
    pub(super) message: String,
}

pub(super) fn fail(status: u16, kind: &'static str, message: impl Into<String>) -> Fail {
    Fail {
        status,
        kind,
        message: message.into(),
    }
}

pub(super) fn bad_request(message: impl Into<String>) -> Fail {
    fail(400, "invalid_request_error", message)
}
