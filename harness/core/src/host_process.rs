//! What every program started for a tool shares, the `command` handler's and the `bash`
//! pack's: the default `PATH`, and the guard that kills its process group.

/// `PATH` of a `command` handler whose declaration sets none: the system directories, so
/// `argv: ["python3", ...]` works without handing the program Cordon's own `PATH`.
pub const DEFAULT_COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Kills a handler's process group when dropped: on every way a call ends (result,
/// timeout, payload limit, the execution cancelled or dropped). Children the program
/// started in the background die with it.
pub(crate) struct GroupKiller(pub(crate) Option<rustix::process::Pid>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            // ESRCH (the group already gone) is the normal case after a clean exit. On
            // the error paths the leader is not yet reaped, so its id is still taken; after
            // a clean exit the id stays taken while any member lives, and an empty group's
            // id would have to be handed to a new group leader in the instant between the
            // reaping and this call (a full pid wrap-around) to be hit by mistake.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}
