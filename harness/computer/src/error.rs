//! Errors, split in the type between what the model may see and what is fatal.

use cordon_protocol::computer::DecodeError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A problem with one action that the model can correct. It becomes an `is_error` result
/// (status `error` in a step report); the session carries on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(
        "coordinate ({x}, {y}) is outside the screen: x must be in 0..={max_x} and y in 0..={max_y}"
    )]
    OutOfRange {
        x: i64,
        y: i64,
        max_x: i64,
        max_y: i64,
    },
    #[error("{what} is not supported by the {backend} backend")]
    Unsupported { what: String, backend: &'static str },
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Navigation or a request to a URL the session's policy does not allow.
    #[error("blocked: {url} ({reason})")]
    Blocked { url: String, reason: String },
    /// An approval gate or the user refused the action.
    #[error("denied by rule `{rule}`: {reason}")]
    Denied { rule: String, reason: String },
    #[error("no pending approval with id `{0}`")]
    NoSuchApproval(String),
}

/// Everything that can go wrong. [`Error::Action`] is model-visible; every other variant is
/// fatal to the step (and usually to the session), and stays out of the conversation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Action(#[from] ActionError),
    /// Chromium is not where we looked. `package` is the Debian package that installs it
    /// there (`chromium-headless-shell` for the headless shell, else `chromium`).
    #[error(
        "Chromium not found at {path}: install it with `sudo apt-get install -y {package}` \
         or pass its path (--chromium / BrowserOptions::executable)"
    )]
    BrowserMissing { path: String, package: &'static str },
    /// Cordon runs as root, where Chromium's own sandbox cannot run, and the operator did
    /// not opt out of it explicitly (the flag; in the library, `BrowserOptions::no_sandbox`).
    #[error(
        "Chromium's sandbox cannot run as root: run Cordon as an unprivileged user, or pass \
         --no-browser-sandbox to start Chromium without it"
    )]
    SandboxAsRoot,
    /// The browser or the CDP connection failed (crash, hang, protocol error).
    #[error("browser: {0}")]
    Browser(String),
    /// The browser process this session ran in crashed or stopped answering. Only the
    /// sessions on that process get this; the next `new_session` starts a new process.
    #[error(
        "browser lost: {reason}; this session cannot continue: open a new session \
         (Chromium is restarted for it)"
    )]
    BrowserLost { reason: String },
    /// The session was closed or its browser went away; start a new session.
    #[error("session closed: {0}")]
    SessionClosed(String),
    /// `Xvfb` is not where we looked (desktop backend).
    #[error(
        "Xvfb not found at {path}: install it with `sudo apt-get install -y xvfb` \
         or pass its path (DesktopOptions::xvfb / CORDON_XVFB)"
    )]
    XvfbMissing { path: String },
    /// The X display could not be started or set up, or a program could not be launched
    /// into it (desktop backend).
    #[error("desktop: {0}")]
    Desktop(String),
    /// The session's X server died or stopped answering. Only this session is affected;
    /// open a new one.
    #[error("display lost: {reason}; this session cannot continue: open a new session")]
    DisplayLost { reason: String },
    #[error("image: {0}")]
    Image(String),
    #[error("trajectory {path}: {source}")]
    Trajectory {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// Whether this error should be shown to the model as an error result.
    pub fn is_model_visible(&self) -> bool {
        matches!(self, Self::Action(_))
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Self::Action(ActionError::Decode(e))
    }
}
