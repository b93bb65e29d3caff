//! Operations across table groups in PostgreSQL: the purge of what ended long ago and the
//! recovery after an unclean stop, with the semantics of the SQLite `purge.rs` and
//! `recovery.rs` (whose `expired_result` builds the final event here too).

use cordon_core::clock::now_ms;
use cordon_protocol::execution::{ExecutionEvent, ExecutionStatus};

use super::connection::PostgresStore;
use crate::store::columns::to_i64;
use crate::store::error::Result;
use crate::store::events::event_type;
use crate::store::executions::RUNNING;
use crate::store::purge::Purged;
use crate::store::recovery::{
    COMPUTER_RESTART_REASON, ENV_RESTART_REASON, SANDBOX_RESTART_REASON, expired_result,
};
use crate::store::replicas_schema::{DEAD_OWNER, Recovery};

impl PostgresStore {
    pub(crate) async fn purge(&self, cutoff_ms: u64) -> Result<Purged> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        let old = "SELECT id FROM executions WHERE status != 'running' AND finished_ms < $1";
        tx.execute(
            &format!("DELETE FROM events WHERE execution_id IN ({old})"),
            &[&cutoff],
        )
        .await?;
        tx.execute(
            &format!("DELETE FROM approvals WHERE execution_id IN ({old})"),
            &[&cutoff],
        )
        .await?;
        let executions = tx
            .execute(
                "DELETE FROM executions WHERE status != 'running' AND finished_ms < $1",
                &[&cutoff],
            )
            .await?;
        let sandboxes = tx
            .execute(
                "DELETE FROM sandboxes WHERE state NOT IN ('live', 'paused') AND expires_ms < $1",
                &[&cutoff],
            )
            .await?;
        let mut trajectories = Vec::new();
        for row in tx
            .query(
                "SELECT trajectory FROM computers WHERE state != 'live' AND finished_ms < $1",
                &[&cutoff],
            )
            .await?
        {
            trajectories.push(row.try_get::<_, String>(0)?);
        }
        let old = "SELECT id FROM computers WHERE state != 'live' AND finished_ms < $1";
        tx.execute(
            &format!("DELETE FROM computer_steps WHERE computer_id IN ({old})"),
            &[&cutoff],
        )
        .await?;
        tx.execute(
            &format!("DELETE FROM computer_approvals WHERE computer_id IN ({old})"),
            &[&cutoff],
        )
        .await?;
        let computers = tx
            .execute(
                "DELETE FROM computers WHERE state != 'live' AND finished_ms < $1",
                &[&cutoff],
            )
            .await?;
        tx.commit().await?;
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Ok(Purged {
            executions: count(executions),
            sandboxes: count(sandboxes),
            computers: count(computers),
            trajectories,
        })
    }

    pub(crate) async fn recover(&self, reason: &str, recovery: &Recovery<'_>) -> Result<usize> {
        let now = to_i64(now_ms());
        let me = recovery.me;
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        // Deleting takes the dead replicas' row locks: a replica recovering at the same
        // time waits here, then finds them gone (and their rows already ended below).
        let died = tx
            .execute(
                "DELETE FROM replicas WHERE seen_at_ms < $1 AND id <> $2",
                &[&to_i64(recovery.dead_before_ms), &me],
            )
            .await?;
        if died == 0 && !recovery.orphans {
            return Ok(0);
        }
        let mut running = Vec::new();
        // `FOR UPDATE` re-checks the status of a row another recovery just ended.
        for row in tx
            .query(
                &format!(
                    "SELECT t.id FROM executions t WHERE {DEAD_OWNER} AND t.status = $2
                     ORDER BY t.id FOR UPDATE"
                ),
                &[&me, &RUNNING],
            )
            .await?
        {
            running.push(row.try_get::<_, String>(0)?);
        }
        for id in &running {
            let mut events = Vec::new();
            let mut last_seq = 0_i64;
            for row in tx
                .query(
                    "SELECT seq, data FROM events WHERE execution_id = $1 ORDER BY seq",
                    &[id],
                )
                .await?
            {
                last_seq = row.try_get(0)?;
                if let Ok(event) = serde_json::from_str::<ExecutionEvent>(row.try_get(1)?) {
                    events.push(event);
                }
            }
            let result = expired_result(&events, reason);
            let event = ExecutionEvent::Completed(result.clone());
            tx.execute(
                "INSERT INTO events (execution_id, seq, type, data, at_ms)
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    id,
                    &(last_seq + 1),
                    &event_type(&event),
                    &serde_json::to_string(&event)?,
                    &now,
                ],
            )
            .await?;
            tx.execute(
                "UPDATE executions SET status = $2, finished_ms = $3, result = $4 WHERE id = $1",
                &[
                    id,
                    &ExecutionStatus::Interrupted.as_str(),
                    &now,
                    &serde_json::to_string(&result)?,
                ],
            )
            .await?;
            tx.execute(
                "UPDATE approvals SET status = 'expired', decided_ms = $1
                 WHERE execution_id = $2 AND status = 'pending'",
                &[&now, id],
            )
            .await?;
        }
        // Paused sandboxes stay paused: their state is in the object store.
        tx.execute(
            &format!(
                "UPDATE sandboxes AS t SET state = 'interrupted', reason = $2
                 WHERE {DEAD_OWNER} AND t.state = 'live'"
            ),
            &[&me, &SANDBOX_RESTART_REASON],
        )
        .await?;
        // Benchmark environments lose their browser session with their process.
        tx.execute(
            &format!(
                "UPDATE envs AS t SET state = 'interrupted', reason = $2, updated_ms = $3
                 WHERE {DEAD_OWNER} AND t.state = 'live'"
            ),
            &[&me, &ENV_RESTART_REASON, &now],
        )
        .await?;
        let mut computers = Vec::new();
        for row in tx
            .query(
                &format!(
                    "UPDATE computers AS t SET state = 'interrupted', reason = $2, finished_ms = $3,
                         pending = NULL
                     WHERE {DEAD_OWNER} AND t.state = 'live' RETURNING id"
                ),
                &[&me, &COMPUTER_RESTART_REASON, &now],
            )
            .await?
        {
            computers.push(row.try_get::<_, String>(0)?);
        }
        for id in &computers {
            tx.execute(
                "UPDATE computer_approvals SET status = 'expired', decided_ms = $1
                 WHERE computer_id = $2 AND status = 'pending'",
                &[&now, id],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(running.len())
    }
}
