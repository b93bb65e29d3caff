//! Gateway conversations and responses, session-protocol sessions and `meta`, in
//! PostgreSQL: the same rows as the SQLite `conversations.rs`, `sessions.rs`, `meta.rs`.

use cordon_core::clock::now_ms;
use serde_json::Value;
use tokio_postgres::IsolationLevel;

use super::connection::PostgresStore;
use crate::store::columns::{to_i64, to_u64};
use crate::store::conversations::{
    ConversationEntryRow, ConversationRow, ConversationSummary, NewConversationEntry,
};
use crate::store::error::Result;

const SUMMARY_COLUMNS: &str =
    "SELECT id, upstream, created_ms, updated_ms, entries FROM conversations";

impl PostgresStore {
    pub(crate) async fn begin_conversation(&self, id: &str, upstream: &str) -> Result<()> {
        let now = to_i64(now_ms());
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO conversations (id, upstream, created_ms, updated_ms)
                 VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO NOTHING",
                &[&id, &upstream, &now],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn append_conversation_entry(
        &self,
        id: &str,
        entry: &NewConversationEntry<'_>,
    ) -> Result<u64> {
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO conversations (id, upstream, created_ms, updated_ms)
             VALUES ($1, '', $2, $2) ON CONFLICT (id) DO NOTHING",
            &[&id, &now],
        )
        .await?;
        // The row lock this update takes orders concurrent appends: each gets the next seq.
        let seq: i64 = tx
            .query_one(
                "UPDATE conversations SET entries = entries + 1, updated_ms = $2 WHERE id = $1
                 RETURNING entries",
                &[&id, &now],
            )
            .await?
            .try_get(0)?;
        tx.execute(
            "INSERT INTO conversation_entries
                (conversation_id, seq, kind, call_id, round, duration_ms, data, at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &id,
                &seq,
                &entry.kind,
                &entry.call_id,
                &entry.round.map(to_i64),
                &entry.duration_ms.map(to_i64),
                &entry.data.to_string(),
                &now,
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(to_u64(seq))
    }

    pub(crate) async fn conversation(&self, id: &str) -> Result<Option<ConversationRow>> {
        let mut conn = self.pool.get().await?;
        // One snapshot for the head and its entries, as SQLite reads them under one lock.
        let tx = conn
            .client()
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let Some(head) = tx
            .query_opt(
                "SELECT upstream, created_ms, updated_ms FROM conversations WHERE id = $1",
                &[&id],
            )
            .await?
        else {
            return Ok(None);
        };
        let rows = tx
            .query(
                "SELECT seq, kind, call_id, round, duration_ms, data, at_ms
                 FROM conversation_entries WHERE conversation_id = $1 ORDER BY seq",
                &[&id],
            )
            .await?;
        tx.commit().await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            entries.push(ConversationEntryRow {
                seq: to_u64(row.try_get(0)?),
                kind: row.try_get(1)?,
                call_id: row.try_get(2)?,
                round: row.try_get::<_, Option<i64>>(3)?.map(to_u64),
                duration_ms: row.try_get::<_, Option<i64>>(4)?.map(to_u64),
                data: serde_json::from_str(row.try_get(5)?)?,
                at_ms: to_u64(row.try_get(6)?),
            });
        }
        Ok(Some(ConversationRow {
            id: id.to_owned(),
            upstream: head.try_get(0)?,
            created_ms: to_u64(head.try_get(1)?),
            updated_ms: to_u64(head.try_get(2)?),
            entries,
        }))
    }

    pub(crate) async fn conversation_exists(&self, id: &str) -> Result<bool> {
        Ok(self
            .pool
            .get()
            .await?
            .query_opt("SELECT 1 FROM conversations WHERE id = $1", &[&id])
            .await?
            .is_some())
    }

    pub(crate) async fn keep_response(
        &self,
        id: &str,
        parent: Option<&str>,
        items: &Value,
    ) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO responses (id, parent, items, created_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (id) DO UPDATE SET parent = EXCLUDED.parent,
                    items = EXCLUDED.items, created_ms = EXCLUDED.created_ms",
                &[&id, &parent, &items.to_string(), &to_i64(now_ms())],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn response(&self, id: &str) -> Result<Option<(Option<String>, Value)>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt("SELECT parent, items FROM responses WHERE id = $1", &[&id])
            .await?;
        match row {
            Some(row) => Ok(Some((
                row.try_get(0)?,
                serde_json::from_str(row.try_get(1)?)?,
            ))),
            None => Ok(None),
        }
    }

    pub(crate) async fn purge_conversations(&self, cutoff_ms: u64) -> Result<usize> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "DELETE FROM conversation_entries WHERE conversation_id IN
             (SELECT id FROM conversations WHERE updated_ms < $1)",
            &[&cutoff],
        )
        .await?;
        let deleted = tx
            .execute(
                "DELETE FROM conversations WHERE updated_ms < $1",
                &[&cutoff],
            )
            .await?;
        tx.execute("DELETE FROM responses WHERE created_ms < $1", &[&cutoff])
            .await?;
        tx.commit().await?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    pub(crate) async fn list_conversations(
        &self,
        limit: usize,
        before_ms: Option<u64>,
    ) -> Result<Vec<ConversationSummary>> {
        let mut conn = self.pool.get().await?;
        let before = before_ms.map_or(i64::MAX, to_i64);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = conn
            .query(
                &format!(
                    "{SUMMARY_COLUMNS} WHERE updated_ms < $1 ORDER BY updated_ms DESC, id DESC \
                     LIMIT $2"
                ),
                &[&before, &limit],
            )
            .await?;
        let mut listed = rows.iter().map(summary).collect::<Result<Vec<_>>>()?;
        // As on SQLite: a page never ends in the middle of a millisecond, so the next page
        // (strictly before the last one's time) misses nothing.
        if let Some(last) = listed
            .last()
            .filter(|_| i64::try_from(listed.len()).is_ok_and(|n| n == limit))
        {
            let rest = conn
                .query(
                    &format!(
                        "{SUMMARY_COLUMNS} WHERE updated_ms = $1 AND id < $2 ORDER BY id DESC"
                    ),
                    &[&to_i64(last.updated_ms), &last.id],
                )
                .await?;
            let rest = rest.iter().map(summary).collect::<Result<Vec<_>>>()?;
            listed.extend(rest);
        }
        Ok(listed)
    }

    pub(crate) async fn save_session(&self, id: &str, state: &str) -> Result<()> {
        let now = to_i64(now_ms());
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO sessions (id, state, created_ms, updated_ms) VALUES ($1, $2, $3, $3)
                 ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state,
                    updated_ms = EXCLUDED.updated_ms",
                &[&id, &state, &now],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn load_session(&self, id: &str) -> Result<Option<(String, u64)>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT state, updated_ms FROM sessions WHERE id = $1",
                &[&id],
            )
            .await?;
        match row {
            Some(row) => Ok(Some((row.try_get(0)?, to_u64(row.try_get(1)?)))),
            None => Ok(None),
        }
    }

    pub(crate) async fn delete_session(&self, id: &str) -> Result<bool> {
        let deleted = self
            .pool
            .get()
            .await?
            .execute("DELETE FROM sessions WHERE id = $1", &[&id])
            .await?;
        Ok(deleted > 0)
    }

    pub(crate) async fn purge_sessions(&self, cutoff_ms: u64) -> Result<usize> {
        let deleted = self
            .pool
            .get()
            .await?
            .execute(
                "DELETE FROM sessions WHERE updated_ms < $1",
                &[&to_i64(cutoff_ms)],
            )
            .await?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }

    pub(crate) async fn meta(&self, key: &str) -> Result<Option<String>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
            .await?;
        match row {
            Some(row) => Ok(Some(row.try_get(0)?)),
            None => Ok(None),
        }
    }

    pub(crate) async fn set_meta(&self, key: &str, value: Option<&str>) -> Result<()> {
        let mut conn = self.pool.get().await?;
        match value {
            Some(value) => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    &[&key, &value],
                )
                .await?
            }
            None => {
                conn.execute("DELETE FROM meta WHERE key = $1", &[&key])
                    .await?
            }
        };
        Ok(())
    }
}

fn summary(row: &tokio_postgres::Row) -> Result<ConversationSummary> {
    Ok(ConversationSummary {
        id: row.try_get(0)?,
        upstream: row.try_get(1)?,
        created_ms: to_u64(row.try_get(2)?),
        updated_ms: to_u64(row.try_get(3)?),
        entries: to_u64(row.try_get(4)?),
    })
}
