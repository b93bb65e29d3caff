//! [`ComputerError`]: why a computer request could not be served, from the browser's own
//! errors.

use cordon_computer::{ActionError, Error};

/// Why a computer request could not be served. Model-visible problems with an action are
/// not errors: they are steps with status `error` or `denied`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ComputerError {
    /// The request describes a session that cannot be set up.
    #[error("{0}")]
    Invalid(String),
    /// The start URL is refused by the session's own origin policy.
    #[error("{0}")]
    Blocked(String),
    /// Chromium is missing or would not start.
    #[error("{0}")]
    Unavailable(String),
    /// The session's browser went away; the session is over.
    #[error("{0}")]
    Lost(String),
    /// A browser command failed; the session may still work.
    #[error("{0}")]
    Browser(String),
    /// Recording the trajectory failed.
    #[error("{0}")]
    Trajectory(String),
    /// A step waits for a decision on this approval first.
    #[error(
        "step waits for approval {0}: decide it first (POST /v1/approvals/{0}), then send more actions"
    )]
    Pending(String),
    /// No such approval is pending on this session (decided a moment ago, or never).
    #[error("approval {0} is not pending on this computer")]
    NoSuchApproval(String),
    /// The session was closed.
    #[error("{0}")]
    Closed(String),
}

impl ComputerError {
    pub(super) fn from_step(error: Error) -> ComputerError {
        match error {
            Error::BrowserLost { .. } | Error::SessionClosed(_) => {
                ComputerError::Lost(error.to_string())
            }
            Error::Trajectory { .. } => ComputerError::Trajectory(error.to_string()),
            Error::Action(ActionError::NoSuchApproval(id)) => ComputerError::NoSuchApproval(id),
            Error::Action(ActionError::Blocked { .. }) => ComputerError::Blocked(error.to_string()),
            Error::Action(action) => ComputerError::Invalid(action.to_string()),
            other => ComputerError::Browser(other.to_string()),
        }
    }

    pub(super) fn from_launch(error: Error) -> ComputerError {
        match error {
            Error::BrowserMissing { .. } => ComputerError::Unavailable(format!(
                "computer use needs Chromium, and it is not installed: {error} (the server \
                 takes --chromium PATH or CORDON_CHROMIUM; sandboxes work without it)"
            )),
            other => ComputerError::Unavailable(format!("Chromium did not start: {other}")),
        }
    }
}
