//! What goes wrong between a vendor's shape and the canonical one: a shape that cannot be
//! decoded, an action a vendor cannot express.

/// A vendor shape that could not be decoded. The model can fix these, so executors return
/// them to it as error results.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("expected a JSON object{0}")]
    NotAnObject(&'static str),
    #[error("unknown action `{action}` for {vendor}; known actions: {known}")]
    UnknownAction {
        vendor: &'static str,
        action: String,
        known: &'static str,
    },
    #[error("action `{action}` needs `{field}`")]
    MissingField { action: String, field: &'static str },
    #[error("action `{action}`: `{field}` {reason}")]
    InvalidField {
        action: String,
        field: &'static str,
        reason: String,
    },
    #[error("unknown key name `{0}`")]
    UnknownKey(String),
}

/// A canonical action the target vendor has no way to express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{vendor} cannot express {what}")]
pub struct EncodeError {
    pub vendor: &'static str,
    pub what: String,
}

impl EncodeError {
    pub(super) fn new(vendor: &'static str, what: impl Into<String>) -> Self {
        Self {
            vendor,
            what: what.into(),
        }
    }
}
