//! Why a client message cannot be applied to a session.

/// Why a client message cannot be applied (nothing of it was).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The message is malformed, or does not fit the pending calls.
    #[error("{0}")]
    BadRequest(String),
    /// It answers a call twice.
    #[error("{0}")]
    Conflict(String),
}

impl SessionError {
    /// The HTTP status for it.
    pub fn status(&self) -> u16 {
        match self {
            SessionError::BadRequest(_) => 400,
            SessionError::Conflict(_) => 409,
        }
    }
}

pub(super) fn bad(message: impl Into<String>) -> SessionError {
    SessionError::BadRequest(message.into())
}
