//! Conversion and pairing errors, and each vendor's error shape.

use serde_json::{Value, json};

use super::Vendor;

/// A vendor document that cannot be decoded (a 400 for the client).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConversionError {
    #[error("`{field}` is missing or has the wrong type")]
    Field { field: String },
    #[error("unknown `{field}` value `{value}`")]
    UnknownValue { field: String, value: String },
    #[error("`{field}` is not valid JSON: {reason}")]
    InvalidJson { field: String, reason: String },
    #[error("the upstream stream reported an error: {message}")]
    Upstream { message: String },
    /// A block index a stream may not use: past the limit on blocks per turn, or skipping
    /// blocks never started. Refused before anything is allocated for it.
    #[error("`{field}` is {index}; the stream may use at most {max} there")]
    IndexOutOfRange { field: String, index: u64, max: u64 },
    /// A stream past a limit on what one turn may hold (bytes, output items): refused
    /// rather than held, so one upstream cannot take the process's memory.
    #[error("the stream is past its limit of {max} {what} per turn")]
    TooLarge { what: String, max: usize },
}

impl ConversionError {
    pub(crate) fn field(field: impl Into<String>) -> Self {
        ConversionError::Field {
            field: field.into(),
        }
    }
}

/// Tool results that do not pair with the previous assistant turn's calls, or calls whose
/// ids do not name one call each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairingError {
    #[error(
        "tool call id `{id}` is used by more than one tool call; each call needs an id of its \
         own in the whole conversation"
    )]
    DuplicateCall { id: String },
    #[error("tool result `{id}` matches no tool call of the previous assistant turn")]
    UnknownCall { id: String },
    #[error("tool call `{id}` has no result in the next message")]
    MissingResult { id: String },
    #[error("tool call `{id}` is answered more than once")]
    DuplicateResult { id: String },
}

/// An error as a client of `vendor` expects it: the HTTP status and the JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct VendorError {
    pub status: u16,
    pub body: Value,
}

/// Encode an error in `vendor`'s shape. `kind` is Anthropic's error type
/// (`invalid_request_error`, `api_error`, `overloaded_error`, …), reused as OpenAI's `type`.
pub fn encode_error(vendor: Vendor, status: u16, kind: &str, message: &str) -> VendorError {
    let body = match vendor {
        Vendor::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Vendor::OpenaiChat | Vendor::OpenaiResponses => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Vendor::Gemini => {
            json!({"error": {"code": status, "message": message, "status": google_status(status)}})
        }
    };
    VendorError { status, body }
}

/// Google's status name for an HTTP status (the `status` of its error bodies).
fn google_status(status: u16) -> &'static str {
    match status {
        400 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        413 => "INVALID_ARGUMENT",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

impl PairingError {
    /// The 400 a client of `vendor` gets for this error.
    pub fn to_vendor(&self, vendor: Vendor) -> VendorError {
        encode_error(vendor, 400, "invalid_request_error", &self.to_string())
    }
}

impl ConversionError {
    /// The 400 a client of `vendor` gets for this error.
    pub fn to_vendor(&self, vendor: Vendor) -> VendorError {
        encode_error(vendor, 400, "invalid_request_error", &self.to_string())
    }
}
