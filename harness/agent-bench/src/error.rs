//! Errors of benchmark mode, split in the type between what the policy (a model) may see
//! and what ends an episode.

use std::path::PathBuf;

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Something the policy got wrong in one step: it is reported in the step's `info.error`
/// (the policy may correct it), and the episode goes on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The action did not decode (an unknown action, a missing field).
    #[error("{0}")]
    BadAction(String),
    /// The engine refused the action (a coordinate outside the display, a blocked URL).
    #[error("{0}")]
    Refused(String),
}

/// What ends an episode (or a run) instead of a step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A suite directory that cannot be read.
    #[error("suite {path}: {reason}")]
    Suite { path: PathBuf, reason: String },
    /// A task that cannot be run as written (its `task.json`, a missing script).
    #[error("task {task}: {reason}")]
    Task { task: String, reason: String },
    /// `step` or `evaluate` before `reset`, or after the episode ended.
    #[error("{0}")]
    State(String),
    /// The browser or the session failed (fatal to the episode).
    #[error("browser: {0}")]
    Browser(#[from] cordon_computer::Error),
    /// The sandbox could not be set up.
    #[error("sandbox: {0}")]
    Sandbox(String),
    /// The pages server or the run directory failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The policy (a model behind the gateway's upstream, an external agent) failed.
    #[error("policy: {0}")]
    Policy(String),
    /// A Cordon server running the episode (`--remote`) failed or refused it.
    #[error("server {server}: {reason}")]
    Remote { server: String, reason: String },
}

impl BenchError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn task(task: &str, reason: impl Into<String>) -> Self {
        BenchError::Task {
            task: task.to_owned(),
            reason: reason.into(),
        }
    }
}
