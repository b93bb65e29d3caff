//! Benchmark environments and their episodes in PostgreSQL: the same rows and the same
//! transactions as the SQLite `envs.rs`.

use cordon_core::clock::now_ms;

use super::connection::PostgresStore;
use crate::store::columns::{to_i64, to_u64};
use crate::store::envs::{EnvEpisodeRow, EnvRow};
use crate::store::error::Result;

impl PostgresStore {
    pub(crate) async fn insert_env(&self, id: &str, suite: &str) -> Result<()> {
        let now = to_i64(now_ms());
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO envs (id, suite, state, created_ms, updated_ms, owner)
                 VALUES ($1, $2, 'live', $3, $3, $4)",
                &[&id, &suite, &now, &self.owner()],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn record_env_episode(&self, env_id: &str, row: &EnvEpisodeRow) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "INSERT INTO env_episodes
                (env_id, episode, task, seed, steps, reward, done, started_ms, updated_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
             ON CONFLICT (env_id, episode) DO UPDATE SET steps = EXCLUDED.steps,
                reward = EXCLUDED.reward, done = EXCLUDED.done, updated_ms = EXCLUDED.updated_ms",
            &[
                &env_id,
                &to_i64(row.episode),
                &row.task,
                &to_i64(row.seed),
                &to_i64(row.steps),
                &row.reward,
                &row.done,
                &now,
            ],
        )
        .await?;
        tx.execute(
            "UPDATE envs SET updated_ms = $2 WHERE id = $1",
            &[&env_id, &now],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(crate) async fn env(&self, id: &str) -> Result<Option<EnvRow>> {
        let mut conn = self.pool.get().await?;
        let Some(head) = conn
            .query_opt(
                "SELECT suite, state, reason, created_ms, updated_ms FROM envs WHERE id = $1",
                &[&id],
            )
            .await?
        else {
            return Ok(None);
        };
        let mut episodes = Vec::new();
        for row in conn
            .query(
                "SELECT episode, task, seed, steps, reward, done FROM env_episodes
                 WHERE env_id = $1 ORDER BY episode",
                &[&id],
            )
            .await?
        {
            episodes.push(EnvEpisodeRow {
                episode: to_u64(row.try_get(0)?),
                task: row.try_get(1)?,
                seed: to_u64(row.try_get(2)?),
                steps: to_u64(row.try_get(3)?),
                reward: row.try_get(4)?,
                done: row.try_get(5)?,
            });
        }
        Ok(Some(EnvRow {
            id: id.to_owned(),
            suite: head.try_get(0)?,
            state: head.try_get(1)?,
            reason: head.try_get(2)?,
            created_ms: to_u64(head.try_get(3)?),
            updated_ms: to_u64(head.try_get(4)?),
            episodes,
        }))
    }

    pub(crate) async fn end_env(&self, id: &str, state: &str, reason: &str) -> Result<bool> {
        let ended = self
            .pool
            .get()
            .await?
            .execute(
                "UPDATE envs SET state = $2, reason = $3, updated_ms = $4
                 WHERE id = $1 AND state = 'live'",
                &[&id, &state, &reason, &to_i64(now_ms())],
            )
            .await?;
        Ok(ended > 0)
    }

    pub(crate) async fn purge_envs(&self, cutoff_ms: u64) -> Result<usize> {
        let cutoff = to_i64(cutoff_ms);
        let mut conn = self.pool.get().await?;
        let mut tx = conn.transaction().await?;
        tx.execute(
            "DELETE FROM env_episodes WHERE env_id IN
                (SELECT id FROM envs WHERE state != 'live' AND updated_ms < $1)",
            &[&cutoff],
        )
        .await?;
        let deleted = tx
            .execute(
                "DELETE FROM envs WHERE state != 'live' AND updated_ms < $1",
                &[&cutoff],
            )
            .await?;
        tx.commit().await?;
        Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
    }
}
