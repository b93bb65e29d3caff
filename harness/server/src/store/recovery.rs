//! Recovery after an unclean stop: what was live when the previous process stopped is
//! marked over, and running executions get a final event built from their log.

use cordon_core::clock::now_ms;
use cordon_protocol::execution::{
    ErrorInfo, ExecutionEvent, ExecutionResult, ExecutionStatus, Stream, ToolCallRecord, Usage,
};
use cordon_protocol::tool::Locus;
use rusqlite::{TransactionBehavior, params};
use serde_json::Value;

use super::columns::to_i64;
use super::error::Result;
use super::events::event_type;
use super::executions::RUNNING;
use super::handle::{SqliteStore, lock};
use super::replicas_schema::{DEAD_OWNER, Recovery, sqlite};

/// Why sandboxes that were live (not paused) when the server stopped are over.
pub const SANDBOX_RESTART_REASON: &str = "the server stopped while this sandbox was live (its \
    process exited or was killed before pausing it), and its variables and files went with \
    it; create a new one. Its executions stay readable";

/// Why benchmark environments (`/v1/envs`) open when their server stopped are
/// `interrupted`.
pub const ENV_RESTART_REASON: &str = "the server stopped while this environment was open \
    (its process exited or was killed) and its browser session ended with it";

/// Why computer sessions that were open when the server stopped are over.
pub const COMPUTER_RESTART_REASON: &str = "the server stopped while this computer session was \
    open (its process exited or was killed), and its browser went with it; open a new one \
    (POST /v1/computers). Its trajectory stays readable";

impl SqliteStore {
    /// Ends what dead replicas owned: see [`crate::store::Store::recover`].
    pub fn recover(&self, reason: &str, recovery: &Recovery<'_>) -> Result<usize> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = to_i64(now_ms());
        let me = recovery.me;
        let died = tx.execute(
            "DELETE FROM replicas WHERE seen_at_ms < ?1 AND id <> ?2",
            params![to_i64(recovery.dead_before_ms), me],
        )?;
        if died == 0 && !recovery.orphans {
            return Ok(0);
        }
        let running: Vec<String> = {
            let mut statement = tx.prepare(&sqlite(&format!(
                "SELECT t.id FROM executions t WHERE {DEAD_OWNER} AND t.status = $2"
            )))?;
            let rows = statement.query_map(params![me, RUNNING], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for id in &running {
            let (events, last_seq) = {
                let mut statement = tx
                    .prepare("SELECT seq, data FROM events WHERE execution_id = ?1 ORDER BY seq")?;
                let rows = statement.query_map(params![id], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })?;
                let mut events = Vec::new();
                let mut last = 0;
                for row in rows {
                    let (seq, data) = row?;
                    last = seq;
                    if let Ok(event) = serde_json::from_str::<ExecutionEvent>(&data) {
                        events.push(event);
                    }
                }
                (events, last)
            };
            let result = expired_result(&events, reason);
            let event = ExecutionEvent::Completed(result.clone());
            tx.execute(
                "INSERT INTO events (execution_id, seq, type, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id, last_seq + 1, event_type(&event), serde_json::to_string(&event)?, now],
            )?;
            tx.execute(
                "UPDATE executions SET status = ?2, finished_ms = ?3, result = ?4 WHERE id = ?1",
                params![
                    id,
                    ExecutionStatus::Interrupted.as_str(),
                    now,
                    serde_json::to_string(&result)?
                ],
            )?;
            tx.execute(
                "UPDATE approvals SET status = 'expired', decided_ms = ?1
                 WHERE execution_id = ?2 AND status = 'pending'",
                params![now, id],
            )?;
        }
        // Paused sandboxes stay paused: their state is in the object store.
        tx.execute(
            &sqlite(&format!(
                "UPDATE sandboxes AS t SET state = 'interrupted', reason = $2
                 WHERE {DEAD_OWNER} AND t.state = 'live'"
            )),
            params![me, SANDBOX_RESTART_REASON],
        )?;
        // Benchmark environments lose their browser session with their process.
        tx.execute(
            &sqlite(&format!(
                "UPDATE envs AS t SET state = 'interrupted', reason = $2, updated_ms = $3
                 WHERE {DEAD_OWNER} AND t.state = 'live'"
            )),
            params![me, ENV_RESTART_REASON, now],
        )?;
        let computers: Vec<String> = {
            let mut statement = tx.prepare(&sqlite(&format!(
                "UPDATE computers AS t SET state = 'interrupted', reason = $2, finished_ms = $3,
                     pending = NULL
                 WHERE {DEAD_OWNER} AND t.state = 'live' RETURNING id"
            )))?;
            let rows =
                statement.query_map(params![me, COMPUTER_RESTART_REASON, now], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for id in &computers {
            tx.execute(
                "UPDATE computer_approvals SET status = 'expired', decided_ms = ?1
                 WHERE computer_id = ?2 AND status = 'pending'",
                params![now, id],
            )?;
        }
        tx.commit()?;
        Ok(running.len())
    }
}

/// The result an execution gets when the process running it went away: whatever its log
/// recorded (output, tool calls) and `interrupted` with the reason.
pub(super) fn expired_result(events: &[ExecutionEvent], reason: &str) -> ExecutionResult {
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut calls: Vec<ToolCallRecord> = Vec::new();
    for event in events {
        match event {
            ExecutionEvent::OutputDelta { stream, text } => match stream {
                Stream::Stdout => stdout.push_str(text),
                Stream::Stderr => stderr.push_str(text),
            },
            ExecutionEvent::ToolCall {
                id,
                name,
                input,
                locus,
                ..
            } => calls.push(ToolCallRecord {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
                is_error: true,
                duration_us: 0,
                locus: *locus,
            }),
            ExecutionEvent::ToolResult {
                id,
                name,
                is_error,
                duration_us,
                ..
            } => match calls.iter_mut().find(|call| &call.id == id) {
                Some(call) => {
                    call.is_error = *is_error;
                    call.duration_us = *duration_us;
                }
                // Rejected before it ran: there was no `tool.call`.
                None => calls.push(ToolCallRecord {
                    id: id.clone(),
                    name: name.clone(),
                    input: Value::Null,
                    is_error: *is_error,
                    duration_us: *duration_us,
                    locus: Locus::Host,
                }),
            },
            _ => {}
        }
    }
    ExecutionResult {
        status: ExecutionStatus::Interrupted,
        limit: None,
        stdout,
        stderr,
        result: Value::Null,
        result_encoding: None,
        error: Some(ErrorInfo {
            error_type: "Interrupted".to_owned(),
            message: reason.to_owned(),
            traceback: String::new(),
        }),
        tool_calls: calls,
        usage: Usage::default(),
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use crate::store::test_rows::{computer, step};
    use cordon_protocol::execution::Language;
    use pretty_assertions::assert_eq;

    fn restart() -> Recovery<'static> {
        Recovery {
            me: "rpl_restarted",
            dead_before_ms: now_ms(),
            orphans: true,
        }
    }

    #[test]
    fn recovery_interrupts_running_executions_with_a_final_event() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cordon.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store
                .insert_execution("exec_1", "sbx_1", Language::PythonLite, "print(1)")
                .unwrap();
            let delta = ExecutionEvent::OutputDelta {
                stream: Stream::Stdout,
                text: "1\n".into(),
            };
            store.append_event("exec_1", 1, &delta).unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(
            store.recover("the server restarted", &restart()).unwrap(),
            1
        );
        let row = store.execution("exec_1").unwrap().unwrap();
        assert_eq!(row.status, "interrupted");
        let result = row.result.unwrap();
        assert_eq!(result.stdout, "1\n");
        assert_eq!(result.error.unwrap().message, "the server restarted");
        let events = store.events_after("exec_1", 0, 10).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].event_type, "execution.completed");
        assert_eq!(store.recover("again", &restart()).unwrap(), 0);
    }

    #[test]
    fn computer_steps_and_approvals_survive_a_restart_and_the_session_expires() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cordon.db");
        {
            let store = SqliteStore::open(&path).unwrap();
            store.insert_computer(&computer("cmp_1")).unwrap();
            store
                .append_computer_step("cmp_1", &step(1, None, None))
                .unwrap();
            store
                .append_computer_step("cmp_1", &step(2, Some("appr_1"), None))
                .unwrap();
            let row = store.computer("cmp_1").unwrap().unwrap();
            assert_eq!(row.steps, 2);
            assert_eq!(row.pending.unwrap()["approval_id"], "appr_1");
            assert_eq!(
                store.computer_approval("appr_1").unwrap().unwrap().1,
                "pending"
            );
        }
        let store = SqliteStore::open(&path).unwrap();
        store.recover("restarted", &restart()).unwrap();
        let row = store.computer("cmp_1").unwrap().unwrap();
        assert_eq!(row.state, "interrupted");
        assert_eq!(row.reason.as_deref(), Some(COMPUTER_RESTART_REASON));
        assert_eq!(row.pending, None);
        assert_eq!(
            store.computer_approval("appr_1").unwrap().unwrap().1,
            "expired"
        );
        let steps = store.computer_steps("cmp_1", 0).unwrap();
        assert_eq!(steps.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            store.computer_screenshot("cmp_1", 2).unwrap().as_deref(),
            Some("step-0002.png")
        );
    }
}
