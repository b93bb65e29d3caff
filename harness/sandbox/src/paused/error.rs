//! What can go wrong pausing a session ([`PauseError`]), reading a paused session's bytes
//! ([`BlobError`]) and resuming one ([`ResumeError`]).

use cordon_protocol::execution::Language;

use crate::error::SandboxError;

/// Why a session could not be paused. The session is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PauseError {
    /// An execution is running (or suspended on client tools) in the session.
    #[error("an execution is running in the session; pause it once the execution has ended")]
    Busy,
    /// The session was paused already: its state lives in the blob that pause returned.
    #[error("the session was already paused")]
    AlreadyPaused,
    /// The guest holds state a paused session cannot carry (a grown table, a reference in
    /// a global).
    #[error("the session's state cannot be paused: {0}")]
    Unsupported(String),
}

/// Why bytes are not a paused session this build can read. Nothing is trusted before the
/// hash over the whole blob checks out, and nothing is allocated beyond what the bytes
/// hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// The bytes do not start like a paused session.
    #[error("not a paused sandbox session")]
    NotABlob,
    /// A paused session of a format this build does not read.
    #[error("paused session format {0} is not supported (this build reads format {1})")]
    UnsupportedVersion(u16, u16),
    /// Fewer (or more) bytes than the blob says it holds.
    #[error("the paused session is truncated or has trailing bytes")]
    Truncated,
    /// The contents do not match the blob's hash: changed or damaged in storage.
    #[error("the paused session is corrupted (its hash does not match its contents)")]
    Corrupted,
    /// The contents are not a well-formed paused session.
    #[error("the paused session is malformed: {0}")]
    Malformed(String),
}

/// Why a paused session could not be resumed. No instance is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    /// The session spec asks for another language than the session was paused in.
    #[error("the session was paused in {paused} and cannot resume as {asked}")]
    LanguageMismatch {
        /// The paused session's language.
        paused: &'static str,
        /// The spec's language.
        asked: &'static str,
    },
    /// The session was paused in another image (another build, another package set).
    #[error(
        "the session was paused in another {language} image than this sandbox runs (another build or package set)"
    )]
    OtherImage {
        /// The language of both.
        language: &'static str,
    },
    /// The image could not be loaded.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// No instance could be made (the pool is full).
    #[error("no instance for the resumed session: {0}")]
    Unavailable(String),
    /// The paused state does not fit the image's instances (out-of-range pages, a global
    /// of another type, an inconsistent file tree): a hostile or damaged blob.
    #[error("the paused session does not fit its image: {0}")]
    Invalid(String),
}

impl ResumeError {
    pub(crate) fn language_mismatch(paused: Language, asked: Language) -> Self {
        ResumeError::LanguageMismatch {
            paused: paused.as_str(),
            asked: asked.as_str(),
        }
    }
}
