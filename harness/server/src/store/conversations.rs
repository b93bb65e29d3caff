//! Gateway conversations: one row per conversation and its entries in order (client
//! requests, model turns, tool calls and results with their ids, approvals, responses),
//! each with its time and the call id it is about. Which conversation a
//! client's next request joins is the gateway's decision (`cordon-gateway`'s
//! `continuation`), never a call id found here.

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use cordon_core::clock::now_ms;

use super::columns::{row_tuple, to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// One stored conversation entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationEntryRow {
    /// Position in the conversation, from 1.
    pub seq: u64,
    /// `request`, `model_turn`, `tool_call`, `tool_result`, `approval`, `response`, `error`.
    pub kind: String,
    /// The tool call it is about.
    pub call_id: Option<String>,
    /// The model round within its client request.
    pub round: Option<u64>,
    /// How long it took, in milliseconds.
    pub duration_ms: Option<u64>,
    /// The entry itself.
    pub data: Value,
    /// When it was recorded, Unix milliseconds.
    pub at_ms: u64,
}

/// A stored conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRow {
    /// Its id.
    pub id: String,
    /// `API=URL` of the upstream.
    pub upstream: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Last entry, Unix milliseconds.
    pub updated_ms: u64,
    /// Its entries in order.
    pub entries: Vec<ConversationEntryRow>,
}

/// An entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConversationEntry<'a> {
    /// Its kind.
    pub kind: &'a str,
    /// The tool call it is about.
    pub call_id: Option<&'a str>,
    /// The model round.
    pub round: Option<u64>,
    /// How long it took.
    pub duration_ms: Option<u64>,
    /// The entry itself.
    pub data: &'a Value,
}

/// The columns of a conversation entry [`SqliteStore::conversation`] reads, in the order of its
/// `SELECT`.
type EntryColumns = (
    i64,
    String,
    Option<String>,
    Option<i64>,
    Option<i64>,
    String,
    i64,
);

impl SqliteStore {
    /// Creates the conversation unless it exists.
    pub fn begin_conversation(&self, id: &str, upstream: &str) -> Result<()> {
        let now = to_i64(now_ms());
        lock(&self.conn).execute(
            "INSERT OR IGNORE INTO conversations (id, upstream, created_ms, updated_ms) \
             VALUES (?1, ?2, ?3, ?3)",
            params![id, upstream, now],
        )?;
        Ok(())
    }

    /// Appends an entry (one transaction: the next seq and the row).
    pub fn append_conversation_entry(
        &self,
        id: &str,
        entry: &NewConversationEntry<'_>,
    ) -> Result<u64> {
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT OR IGNORE INTO conversations (id, upstream, created_ms, updated_ms) \
             VALUES (?1, '', ?2, ?2)",
            params![id, now],
        )?;
        let seq: i64 = tx.query_row(
            "UPDATE conversations SET entries = entries + 1, updated_ms = ?2 WHERE id = ?1 \
             RETURNING entries",
            params![id, now],
            |row| row.get(0),
        )?;
        tx.execute(
            "INSERT INTO conversation_entries \
             (conversation_id, seq, kind, call_id, round, duration_ms, data, at_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                id,
                seq,
                entry.kind,
                entry.call_id,
                entry.round.map(to_i64),
                entry.duration_ms.map(to_i64),
                entry.data.to_string(),
                now
            ],
        )?;
        tx.commit()?;
        Ok(to_u64(seq))
    }

    /// A conversation with its entries.
    pub fn conversation(&self, id: &str) -> Result<Option<ConversationRow>> {
        let conn = lock(&self.conn);
        let head = conn
            .query_row(
                "SELECT upstream, created_ms, updated_ms FROM conversations WHERE id = ?1",
                params![id],
                row_tuple::<(String, i64, i64)>,
            )
            .optional()?;
        let Some((upstream, created, updated)) = head else {
            return Ok(None);
        };
        let mut statement = conn.prepare(
            "SELECT seq, kind, call_id, round, duration_ms, data, at_ms FROM conversation_entries \
             WHERE conversation_id = ?1 ORDER BY seq",
        )?;
        let rows = statement.query_map(params![id], row_tuple::<EntryColumns>)?;
        let mut entries = Vec::new();
        for row in rows {
            let (seq, kind, call_id, round, duration, data, at) = row?;
            entries.push(ConversationEntryRow {
                seq: to_u64(seq),
                kind,
                call_id,
                round: round.map(to_u64),
                duration_ms: duration.map(to_u64),
                data: serde_json::from_str(&data)?,
                at_ms: to_u64(at),
            });
        }
        Ok(Some(ConversationRow {
            id: id.to_owned(),
            upstream,
            created_ms: to_u64(created),
            updated_ms: to_u64(updated),
            entries,
        }))
    }

    /// Whether conversation `id` exists.
    pub fn conversation_exists(&self, id: &str) -> Result<bool> {
        Ok(lock(&self.conn)
            .query_row(
                "SELECT 1 FROM conversations WHERE id = ?1",
                params![id],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Keeps a Responses-API response's items for `previous_response_id`.
    pub fn keep_response(&self, id: &str, parent: Option<&str>, items: &Value) -> Result<()> {
        lock(&self.conn).execute(
            "INSERT OR REPLACE INTO responses (id, parent, items, created_ms) \
             VALUES (?1, ?2, ?3, ?4)",
            params![id, parent, items.to_string(), to_i64(now_ms())],
        )?;
        Ok(())
    }

    /// A kept response: the response it continued and its items.
    pub fn response(&self, id: &str) -> Result<Option<(Option<String>, Value)>> {
        let row = lock(&self.conn)
            .query_row(
                "SELECT parent, items FROM responses WHERE id = ?1",
                params![id],
                |row| Ok((row.get::<_, Option<String>>(0)?, row.get::<_, String>(1)?)),
            )
            .optional()?;
        match row {
            Some((parent, items)) => Ok(Some((parent, serde_json::from_str(&items)?))),
            None => Ok(None),
        }
    }

    /// Deletes conversations not updated since `cutoff_ms`; how many.
    pub fn purge_conversations(&self, cutoff_ms: u64) -> Result<usize> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "DELETE FROM conversation_entries WHERE conversation_id IN \
             (SELECT id FROM conversations WHERE updated_ms < ?1)",
            params![cutoff],
        )?;
        let n = tx.execute(
            "DELETE FROM conversations WHERE updated_ms < ?1",
            params![cutoff],
        )?;
        tx.execute(
            "DELETE FROM responses WHERE created_ms < ?1",
            params![cutoff],
        )?;
        tx.commit()?;
        Ok(n)
    }

    /// Conversations newest first (by last update), at most `limit`, only those updated
    /// before `before_ms` when given (the next page starts at the last one's `updated_ms`).
    pub fn list_conversations(
        &self,
        limit: usize,
        before_ms: Option<u64>,
    ) -> Result<Vec<ConversationSummary>> {
        let conn = lock(&self.conn);
        let mut statement = conn.prepare(
            "SELECT id, upstream, created_ms, updated_ms, entries FROM conversations \
             WHERE updated_ms < ?1 ORDER BY updated_ms DESC, id DESC LIMIT ?2",
        )?;
        let before = before_ms.map_or(i64::MAX, to_i64);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let summary = |row: &rusqlite::Row<'_>| {
            Ok(ConversationSummary {
                id: row.get(0)?,
                upstream: row.get(1)?,
                created_ms: to_u64(row.get(2)?),
                updated_ms: to_u64(row.get(3)?),
                entries: to_u64(row.get(4)?),
            })
        };
        let mut listed = statement
            .query_map(params![before, limit], summary)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        // The next page starts strictly before the last one's time: a page never ends in
        // the middle of a millisecond, so nothing falls between two pages.
        if let Some(last) = listed
            .last()
            .filter(|_| i64::try_from(listed.len()).is_ok_and(|n| n == limit))
        {
            let mut same = conn.prepare(
                "SELECT id, upstream, created_ms, updated_ms, entries FROM conversations \
                 WHERE updated_ms = ?1 AND id < ?2 ORDER BY id DESC",
            )?;
            let rest = same
                .query_map(params![to_i64(last.updated_ms), last.id], summary)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            listed.extend(rest);
        }
        Ok(listed)
    }
}

/// A conversation without its entries, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSummary {
    /// Its id.
    pub id: String,
    /// `API=URL` of the upstream.
    pub upstream: String,
    /// Creation time, Unix milliseconds.
    pub created_ms: u64,
    /// Last entry, Unix milliseconds.
    pub updated_ms: u64,
    /// How many entries it has.
    pub entries: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_append_in_order_and_conversations_list_newest_first() {
        let store = SqliteStore::in_memory().unwrap();
        store
            .begin_conversation("conv_1", "anthropic=http://x")
            .unwrap();
        let data = json!({"name": "f"});
        for kind in ["request", "tool_call"] {
            store
                .append_conversation_entry(
                    "conv_1",
                    &NewConversationEntry {
                        kind,
                        call_id: (kind == "tool_call").then_some("toolu_1"),
                        round: Some(1),
                        duration_ms: None,
                        data: &data,
                    },
                )
                .unwrap();
        }
        let row = store.conversation("conv_1").unwrap().unwrap();
        assert_eq!(row.upstream, "anthropic=http://x");
        assert_eq!(row.entries.len(), 2);
        assert_eq!(row.entries[1].seq, 2);
        assert_eq!(row.entries[1].call_id.as_deref(), Some("toolu_1"));
        assert!(store.conversation("conv_2").unwrap().is_none());
        let listed = store.list_conversations(10, None).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, "conv_1");
        assert_eq!(listed[0].entries, 2);
        assert!(
            store
                .list_conversations(10, Some(listed[0].updated_ms))
                .unwrap()
                .is_empty()
        );
        assert!(store.list_conversations(0, None).unwrap().is_empty());
        // Conversations updated in one millisecond are never split between pages.
        {
            let conn = lock(&store.conn);
            for id in ["conv_a", "conv_b", "conv_c"] {
                conn.execute(
                    "INSERT INTO conversations (id, upstream, created_ms, updated_ms) \
                     VALUES (?1, '', 5, 5)",
                    params![id],
                )
                .unwrap();
            }
        }
        let first = store.list_conversations(2, Some(6)).unwrap();
        let ids: Vec<&str> = first.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["conv_c", "conv_b", "conv_a"]);
        assert!(store.list_conversations(2, Some(5)).unwrap().is_empty());
        assert_eq!(store.purge_conversations(now_ms() + 1).unwrap(), 4);
        assert!(store.conversation("conv_1").unwrap().is_none());
    }
}
