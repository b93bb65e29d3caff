//! Benchmark environments (`/v1/envs`) and their episodes: one `envs` row per environment
//! (`live`, `closed`, or `interrupted` when its browser session died with the process) and
//! one `env_episodes` row per reset, rewritten after every step, so `GET /v1/envs/{id}`
//! answers with every episode's task, seed, steps, reward and end after a restart.

use rusqlite::{OptionalExtension, params};

use cordon_core::clock::now_ms;

use super::columns::{to_i64, to_u64};
use super::error::Result;
use super::handle::{SqliteStore, lock};

/// `envs.state` of an environment whose session is open in some process.
pub const ENV_LIVE: &str = "live";
/// `envs.state` of an environment closed by its client (or as idle).
pub const ENV_CLOSED: &str = "closed";
/// `envs.state` of an environment that was live in a process that stopped.
pub const ENV_INTERRUPTED: &str = "interrupted";

/// One environment as recorded, with its episodes in order.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvRow {
    pub id: String,
    /// `builtin` or `miniwob`: where its tasks come from.
    pub suite: String,
    /// [`ENV_LIVE`], [`ENV_CLOSED`] or [`ENV_INTERRUPTED`].
    pub state: String,
    pub reason: Option<String>,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub episodes: Vec<EnvEpisodeRow>,
}

/// One episode (a reset) of an environment, as it stood after its last step.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvEpisodeRow {
    /// 1 for the episode the environment was created with, then one more per reset.
    pub episode: u64,
    pub task: String,
    pub seed: u64,
    pub steps: u64,
    pub reward: f64,
    pub done: bool,
}

impl SqliteStore {
    /// Records a new environment as `live`.
    pub fn insert_env(&self, id: &str, suite: &str) -> Result<()> {
        let now = to_i64(now_ms());
        lock(&self.conn).execute(
            "INSERT INTO envs (id, suite, state, created_ms, updated_ms, owner) \
             VALUES (?1, ?2, 'live', ?3, ?3, ?4)",
            params![id, suite, now, self.owner()],
        )?;
        Ok(())
    }

    /// Writes an episode of an environment as it stands (creating its row at the first
    /// write), in one transaction with the environment's `updated_ms`.
    pub fn record_env_episode(&self, env_id: &str, row: &EnvEpisodeRow) -> Result<()> {
        let now = to_i64(now_ms());
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO env_episodes \
             (env_id, episode, task, seed, steps, reward, done, started_ms, updated_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) \
             ON CONFLICT (env_id, episode) DO UPDATE SET steps = excluded.steps, \
             reward = excluded.reward, done = excluded.done, updated_ms = excluded.updated_ms",
            params![
                env_id,
                to_i64(row.episode),
                row.task,
                to_i64(row.seed),
                to_i64(row.steps),
                row.reward,
                row.done,
                now
            ],
        )?;
        tx.execute(
            "UPDATE envs SET updated_ms = ?2 WHERE id = ?1",
            params![env_id, now],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// An environment with its episodes (any state).
    pub fn env(&self, id: &str) -> Result<Option<EnvRow>> {
        let conn = lock(&self.conn);
        let head = conn
            .query_row(
                "SELECT suite, state, reason, created_ms, updated_ms FROM envs WHERE id = ?1",
                params![id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, i64>(3)?,
                        row.get::<_, i64>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((suite, state, reason, created, updated)) = head else {
            return Ok(None);
        };
        let mut statement = conn.prepare(
            "SELECT episode, task, seed, steps, reward, done FROM env_episodes \
             WHERE env_id = ?1 ORDER BY episode",
        )?;
        let episodes = statement
            .query_map(params![id], |row| {
                Ok(EnvEpisodeRow {
                    episode: to_u64(row.get(0)?),
                    task: row.get(1)?,
                    seed: to_u64(row.get(2)?),
                    steps: to_u64(row.get(3)?),
                    reward: row.get(4)?,
                    done: row.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Some(EnvRow {
            id: id.to_owned(),
            suite,
            state,
            reason,
            created_ms: to_u64(created),
            updated_ms: to_u64(updated),
            episodes,
        }))
    }

    /// Ends a live environment (`closed` or `interrupted`) with the reason; whether it was
    /// live.
    pub fn end_env(&self, id: &str, state: &str, reason: &str) -> Result<bool> {
        Ok(lock(&self.conn).execute(
            "UPDATE envs SET state = ?2, reason = ?3, updated_ms = ?4 \
             WHERE id = ?1 AND state = 'live'",
            params![id, state, reason, to_i64(now_ms())],
        )? > 0)
    }

    /// Deletes environments that are over and were last changed before `cutoff_ms`, with
    /// their episodes (one transaction); how many.
    pub fn purge_envs(&self, cutoff_ms: u64) -> Result<usize> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction()?;
        let cutoff = to_i64(cutoff_ms);
        tx.execute(
            "DELETE FROM env_episodes WHERE env_id IN \
             (SELECT id FROM envs WHERE state != 'live' AND updated_ms < ?1)",
            params![cutoff],
        )?;
        let deleted = tx.execute(
            "DELETE FROM envs WHERE state != 'live' AND updated_ms < ?1",
            params![cutoff],
        )?;
        tx.commit()?;
        Ok(deleted)
    }
}
