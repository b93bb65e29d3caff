//! The exit codes of the commands that run code, and the code for an execution's result.

use cordon_protocol::execution::{ExecutionResult, ExecutionStatus};

/// Exit code: the program completed.
pub const EXIT_COMPLETED: u8 = 0;
/// Exit code: the program raised, or the guest faulted.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: bad usage or bad input files.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: a limit stopped the program.
pub const EXIT_LIMIT: u8 = 3;
/// Exit code: cancelled (Ctrl-C).
pub const EXIT_CANCELLED: u8 = 130;

/// The exit code for an execution that ended with `result`.
pub fn exit_code(result: &ExecutionResult) -> u8 {
    match result.status {
        ExecutionStatus::Completed => EXIT_COMPLETED,
        ExecutionStatus::LimitExceeded => EXIT_LIMIT,
        ExecutionStatus::Cancelled => EXIT_CANCELLED,
        _ => EXIT_ERROR,
    }
}
