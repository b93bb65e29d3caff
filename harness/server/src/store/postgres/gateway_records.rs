//! The gateway's records in PostgreSQL: the same rows as the SQLite `gateway_records.rs`.

use cordon_core::clock::now_ms;

use super::connection::PostgresStore;
use crate::store::columns::to_i64;
use crate::store::error::Result;
use crate::store::gateway_records::KEPT_KIND;

impl PostgresStore {
    pub(crate) async fn put_gateway_record(
        &self,
        kind: &str,
        key: &str,
        value: &str,
    ) -> Result<()> {
        self.pool
            .get()
            .await?
            .execute(
                "INSERT INTO gateway_records (kind, key, value, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (kind, key) DO UPDATE SET value = excluded.value,
                 updated_ms = excluded.updated_ms",
                &[&kind, &key, &value, &to_i64(now_ms())],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn gateway_record(&self, kind: &str, key: &str) -> Result<Option<String>> {
        Ok(self
            .pool
            .get()
            .await?
            .query_opt(
                "SELECT value FROM gateway_records WHERE kind = $1 AND key = $2",
                &[&kind, &key],
            )
            .await?
            .map(|row| row.get(0)))
    }

    pub(crate) async fn take_gateway_record(
        &self,
        kind: &str,
        key: &str,
    ) -> Result<Option<String>> {
        Ok(self
            .pool
            .get()
            .await?
            .query_opt(
                "DELETE FROM gateway_records WHERE kind = $1 AND key = $2 RETURNING value",
                &[&kind, &key],
            )
            .await?
            .map(|row| row.get(0)))
    }

    pub(crate) async fn put_new_gateway_record(
        &self,
        kind: &str,
        key: &str,
        value: &str,
    ) -> Result<String> {
        // A no-op update on conflict returns the value already there, in one statement.
        let kept = self
            .pool
            .get()
            .await?
            .query_opt(
                "INSERT INTO gateway_records (kind, key, value, updated_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (kind, key) DO UPDATE SET kind = gateway_records.kind
                 RETURNING value",
                &[&kind, &key, &value, &to_i64(now_ms())],
            )
            .await?
            .map(|row| row.get(0));
        Ok(kept.unwrap_or_else(|| value.to_owned()))
    }

    pub(crate) async fn purge_gateway_records(
        &self,
        cutoff_ms: u64,
    ) -> Result<Vec<(String, String)>> {
        Ok(self
            .pool
            .get()
            .await?
            .query(
                "DELETE FROM gateway_records WHERE updated_ms < $1 AND kind <> $2
                 RETURNING kind, key",
                &[&to_i64(cutoff_ms), &KEPT_KIND],
            )
            .await?
            .into_iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect())
    }
}
