//! Replicas in PostgreSQL: heartbeats and the live owner of a thing. A paused sandbox
//! changes owner in `paused.rs`'s resume (a compare-and-set on its state: the row lock
//! decides between two replicas bringing it back).

use super::connection::PostgresStore;
use crate::store::columns::to_i64;
use crate::store::error::Result;
use crate::store::replicas_schema::{LiveOwner, Owned, live_owner_sql};

impl PostgresStore {
    pub(super) fn owner(&self) -> Option<&str> {
        self.owner.get().map(String::as_str)
    }

    pub(crate) fn owner_cell(&self) -> &std::sync::OnceLock<String> {
        &self.owner
    }

    pub(crate) async fn announcements(
        &self,
        execution_id: &str,
    ) -> tokio::sync::watch::Receiver<u64> {
        self.announcements.subscribe(&self.pool, execution_id).await
    }

    pub(crate) async fn beat_replica(&self, id: &str, address: &str, now_ms: u64) -> Result<bool> {
        let mut conn = self.pool.get().await?;
        let updated = conn
            .execute(
                "UPDATE replicas SET seen_at_ms = $2, address = $3 WHERE id = $1",
                &[&id, &to_i64(now_ms), &address],
            )
            .await?;
        if updated == 0 {
            conn.execute(
                "INSERT INTO replicas (id, address, seen_at_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms",
                &[&id, &address, &to_i64(now_ms)],
            )
            .await?;
        }
        Ok(updated > 0)
    }

    pub(crate) async fn retire_replica(&self, id: &str) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute("UPDATE replicas SET seen_at_ms = 0 WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    pub(crate) async fn live_owner(
        &self,
        owned: Owned,
        id: &str,
        alive_since_ms: u64,
    ) -> Result<Option<LiveOwner>> {
        let row = self
            .pool
            .get()
            .await?
            .query_opt(live_owner_sql(owned), &[&id, &to_i64(alive_since_ms)])
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        Ok(Some(LiveOwner {
            replica: row.try_get(0)?,
            address: row.try_get(1)?,
        }))
    }
}
