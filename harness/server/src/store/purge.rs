//! Purging what ended long ago: finished executions, sandboxes and computer sessions that
//! are over, with everything that hangs off them.

use rusqlite::{TransactionBehavior, params};

use super::columns::to_i64;
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// What [`SqliteStore::purge`] deleted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Purged {
    /// Executions (with their events and approvals).
    pub executions: usize,
    /// Sandboxes.
    pub sandboxes: usize,
    /// Computer sessions (with their steps and approvals).
    pub computers: usize,
    /// Trajectory directories of the deleted computer sessions.
    pub trajectories: Vec<String>,
}

impl SqliteStore {
    /// Deletes what ended before `cutoff_ms` (Unix ms): finished executions with their
    /// events and approvals, sandboxes that are no longer live, and computer sessions that
    /// are over with their steps and approvals. Running executions and live sandboxes and
    /// sessions are never touched. One transaction; returns what went, including the
    /// trajectory directories for the caller to remove.
    pub fn purge(&self, cutoff_ms: u64) -> Result<Purged> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let old = "SELECT id FROM executions WHERE status != 'running' AND finished_ms < ?1";
        tx.execute(
            &format!("DELETE FROM events WHERE execution_id IN ({old})"),
            params![cutoff],
        )?;
        tx.execute(
            &format!("DELETE FROM approvals WHERE execution_id IN ({old})"),
            params![cutoff],
        )?;
        let executions = tx.execute(
            "DELETE FROM executions WHERE status != 'running' AND finished_ms < ?1",
            params![cutoff],
        )?;
        // A sandbox that is no longer live ended at its expiry at the latest; a paused one
        // is ended by the reaper first, which deletes its object.
        let sandboxes = tx.execute(
            "DELETE FROM sandboxes WHERE state NOT IN ('live', 'paused') AND expires_ms < ?1",
            params![cutoff],
        )?;
        let trajectories: Vec<String> = {
            let mut statement = tx.prepare(
                "SELECT trajectory FROM computers WHERE state != 'live' AND finished_ms < ?1",
            )?;
            let rows = statement.query_map(params![cutoff], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let old = "SELECT id FROM computers WHERE state != 'live' AND finished_ms < ?1";
        tx.execute(
            &format!("DELETE FROM computer_steps WHERE computer_id IN ({old})"),
            params![cutoff],
        )?;
        tx.execute(
            &format!("DELETE FROM computer_approvals WHERE computer_id IN ({old})"),
            params![cutoff],
        )?;
        let computers = tx.execute(
            "DELETE FROM computers WHERE state != 'live' AND finished_ms < ?1",
            params![cutoff],
        )?;
        tx.commit()?;
        Ok(Purged {
            executions,
            sandboxes,
            computers,
            trajectories,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::store::recovery::expired_result;
    use crate::store::test_rows::{computer, step};
    use cordon_core::clock::now_ms;
    use cordon_protocol::execution::{ExecutionEvent, Language};
    use pretty_assertions::assert_eq;

    #[test]
    fn purge_deletes_what_ended_before_the_cutoff_and_nothing_live() {
        let store = SqliteStore::in_memory().unwrap();
        for id in ["exec_old", "exec_running"] {
            store
                .insert_execution(id, "sbx_1", Language::PythonLite, "1")
                .unwrap();
        }
        let done = ExecutionEvent::Completed(expired_result(&[], "x"));
        store.append_event("exec_old", 1, &done).unwrap();
        store.insert_computer(&computer("cmp_old")).unwrap();
        store.insert_computer(&computer("cmp_live")).unwrap();
        store
            .append_computer_step("cmp_old", &step(1, Some("appr_9"), None))
            .unwrap();
        store.end_computer("cmp_old", "closed", "deleted").unwrap();
        // Nothing ended before the epoch.
        assert_eq!(store.purge(0).unwrap(), Purged::default());
        let purged = store.purge(now_ms() + 1).unwrap();
        assert_eq!((purged.executions, purged.computers), (1, 1));
        assert_eq!(purged.trajectories, ["/tmp/trajectories/cmp_old"]);
        assert!(store.execution("exec_old").unwrap().is_none());
        assert!(store.events_after("exec_old", 0, 10).unwrap().is_empty());
        assert!(store.execution("exec_running").unwrap().is_some());
        assert!(store.computer("cmp_old").unwrap().is_none());
        assert!(store.computer_approval("appr_9").unwrap().is_none());
        assert!(store.computer_steps("cmp_old", 0).unwrap().is_empty());
        assert!(store.computer("cmp_live").unwrap().is_some());
    }
}
