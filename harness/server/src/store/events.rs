//! The append-only event log of executions: one row per event with its sequence number.

use cordon_core::clock::now_ms;
use cordon_protocol::execution::ExecutionEvent;
use rusqlite::{TransactionBehavior, params};

use super::columns::{to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// One logged event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Position in the execution's log, from 1.
    pub seq: u64,
    /// The event's type name (`output.delta`, …).
    pub event_type: String,
    /// The event as JSON text (the same text sent over SSE).
    pub data: String,
}

/// The `type` name of an event (the serde tag).
pub fn event_type(event: &ExecutionEvent) -> &'static str {
    match event {
        ExecutionEvent::Started { .. } => "execution.started",
        ExecutionEvent::OutputDelta { .. } => "output.delta",
        ExecutionEvent::ToolCall { .. } => "tool.call",
        ExecutionEvent::ToolResult { .. } => "tool.result",
        ExecutionEvent::ApprovalRequired { .. } => "approval.required",
        ExecutionEvent::Awaiting { .. } => "execution.awaiting",
        ExecutionEvent::Completed(_) => "execution.completed",
        _ => "unknown",
    }
}

impl SqliteStore {
    /// Appends one event at `seq`. An `approval.required` also records the approval; an
    /// `execution.completed` also stores the result, ends the execution and expires its
    /// undecided approvals — all in one transaction with the event.
    pub fn append_event(&self, execution_id: &str, seq: u64, event: &ExecutionEvent) -> Result<()> {
        let data = serde_json::to_string(event)?;
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "INSERT INTO events (execution_id, seq, type, data, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![
            execution_id,
            to_i64(seq),
            event_type(event),
            data,
            now
        ])?;
        match event {
            ExecutionEvent::ApprovalRequired {
                approval_id,
                call_id,
                tool,
                input,
                reason,
            } => {
                tx.execute(
                    "INSERT OR REPLACE INTO approvals (id, execution_id, call_id, tool, input, reason, status, created_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7)",
                    params![approval_id, execution_id, call_id, tool, input.to_string(), reason, now],
                )?;
            }
            ExecutionEvent::Completed(result) => {
                tx.prepare_cached(
                    "UPDATE executions SET status = ?2, finished_ms = ?3, result = ?4 WHERE id = ?1",
                )?
                .execute(params![
                    execution_id,
                    result.status.as_str(),
                    now,
                    serde_json::to_string(result)?
                ])?;
                tx.prepare_cached(
                    "UPDATE approvals SET status = 'expired', decided_ms = ?2
                     WHERE execution_id = ?1 AND status = 'pending'",
                )?
                .execute(params![execution_id, now])?;
            }
            _ => {}
        }
        tx.commit()?;
        Ok(())
    }

    /// Up to `limit` events of an execution with `seq > after`, in order.
    pub fn events_after(
        &self,
        execution_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare_cached(
            "SELECT seq, type, data FROM events WHERE execution_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = statement.query_map(
            params![
                execution_id,
                to_i64(after),
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |row| {
                Ok(EventRow {
                    seq: to_u64(row.get(0)?),
                    event_type: row.get(1)?,
                    data: row.get(2)?,
                })
            },
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
