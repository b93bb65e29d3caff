//! Pausing what holds no session: a [`PausedSession`] of a workspace alone
//! ([`PausedSession::of_workspace`]), for sandboxes whose executions each run in a fresh
//! instance and keep only their files, and putting a paused session's files back without
//! an instance ([`PausedSession::restore_workspace`]).

use cordon_protocol::execution::Language;

use super::error::ResumeError;
use super::state::PausedSession;
use super::trees;
use crate::workspace::Workspace;

impl PausedSession {
    /// A paused state holding `workspace`'s files and no instance, for `language`'s
    /// executions. It names no image (no instance state depends on one), so it comes back
    /// with [`Self::restore_workspace`]; [`Sandbox::resume`](crate::Sandbox::resume)
    /// refuses it as another image.
    pub fn of_workspace(language: Language, workspace: &Workspace) -> PausedSession {
        PausedSession {
            language,
            image: [0; 32],
            workspace: Some(trees::record(workspace)),
            instance: None,
        }
    }

    /// Whether it holds an instance's state (a session paused after running code) rather
    /// than files alone.
    pub fn has_instance(&self) -> bool {
        self.instance.is_some()
    }

    /// Puts the paused workspace's files (and its quota) into `workspace`, replacing what
    /// it held; a paused state without a workspace empties it. The tree is checked first
    /// (`ResumeError::Invalid`), and then `workspace` is unchanged.
    pub fn restore_workspace(&self, workspace: &Workspace) -> Result<(), ResumeError> {
        let tree = match &self.workspace {
            Some(record) => trees::rebuild(record).map_err(ResumeError::Invalid)?,
            None => trees::take(&Workspace::new(workspace.quota())),
        };
        trees::replace(workspace, tree);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::workspace::Quota;

    #[test]
    fn a_workspace_alone_round_trips_through_bytes() {
        let quota = Quota {
            bytes: 1 << 20,
            files: 100,
        };
        let workspace = Workspace::new(quota);
        workspace.write("a/b.txt", b"kept").unwrap();
        let paused = PausedSession::of_workspace(Language::Javascript, &workspace);
        assert!(!paused.has_instance());
        let back = PausedSession::from_bytes(&paused.to_bytes()).unwrap();
        let restored = Workspace::new(quota);
        restored.write("stale.txt", b"gone").unwrap();
        back.restore_workspace(&restored).unwrap();
        assert_eq!(restored.read("a/b.txt").unwrap(), b"kept");
        assert!(restored.read("stale.txt").is_err());
    }
}
