//! A reply that ends a request early: its HTTP status, error type and message.

use crate::containers::ContainerError;

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

/// The reply for a container a request cannot use: 409 when it was interrupted by a
/// restart, 503 when the store failed, else 400.
pub(super) fn container_failure(error: &ContainerError) -> Fail {
    match error {
        ContainerError::Interrupted(_) => fail(409, "invalid_request_error", error.to_string()),
        ContainerError::Lost(..) => fail(503, "api_error", error.to_string()),
        _ => bad_request(error.to_string()),
    }
}
