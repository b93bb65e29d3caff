//! The builder setters [`ExecutionRequest`](crate::ExecutionRequest) and
//! [`SessionSpec`](crate::SessionSpec) share: `limits` and `workspace`.

/// `limits(Limits)` and `workspace(Workspace)` for a type with the fields
/// `limits: Limits` and `workspace: Option<Workspace>`; `$what` names it in the docs
/// (`"execution"`, `"session"`).
macro_rules! limits_and_workspace_setters {
    ($what:literal) => {
        /// Sets the limits.
        pub fn limits(mut self, limits: cordon_protocol::execution::Limits) -> Self {
            self.limits = limits;
            self
        }

        #[doc = concat!("Gives the ", $what, " a workspace (`/workspace` in the guest).")]
        pub fn workspace(mut self, workspace: $crate::workspace::Workspace) -> Self {
            self.workspace = Some(workspace);
            self
        }
    };
}
pub(crate) use limits_and_workspace_setters;
