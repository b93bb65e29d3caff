//! [`blocking`]: runs blocking X work without stalling the other tasks of the runtime.

/// Runs blocking work (x11rb round trips, enigo's XTEST calls, encoding a capture)
/// without stalling the other tasks of a multi-threaded runtime: the worker hands them to
/// another thread first. A hostile program can hold the server (`XGrabServer`), and then
/// every round trip waits for it.
pub(super) fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
