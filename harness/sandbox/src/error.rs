//! What can go wrong setting up the sandbox: [`SandboxError`].

/// Errors setting up the sandbox. (How an execution ends is an [`ExecutionResult`], never
/// an error: guest faults and limits are results the model can read.)
///
/// [`ExecutionResult`]: cordon_protocol::execution::ExecutionResult
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// wasmtime rejected the engine configuration.
    #[error("engine setup failed: {0}")]
    Engine(String),
    /// This build has no image for the language.
    #[error("no {language} guest image in this build (its crate was not built)")]
    ImageMissing {
        /// The language asked for.
        language: &'static str,
    },
    /// Making or loading a guest image failed.
    #[error("guest image: {0}")]
    Image(String),
}

pub(crate) fn engine_error(error: wasmtime::Error) -> SandboxError {
    SandboxError::Engine(format!("{error:#}"))
}
