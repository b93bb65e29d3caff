//! The `Guest` trait: what a guest image implements for the ABI's exports.

use crate::abi::Outcome;

/// What a guest image implements; [`export_guest!`](crate::export_guest) turns it into the
/// ABI's exports.
pub trait Guest {
    /// Runs once while the image is being snapshotted: start the interpreter, import
    /// what executions will need. Everything it leaves in memory is frozen into the image.
    fn initialize();
    /// Runs one piece of source code, with the declared `tools` exposed to it, and says
    /// how it ended.
    fn execute(code: &str, tools: &[&str]) -> Outcome;
}
