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
}

impl ConversionError {
    pub(crate) fn field(field: impl Into<String>) -> Self {
        ConversionError::Field {
            field: field.into(),
        }
    }
}

/// Tool results that do not pair with the previous assistant turn's calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PairingError {
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
    };
    VendorError { status, body }
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
