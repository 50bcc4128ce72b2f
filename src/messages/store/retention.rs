//! What the reaper deletes of messages: the expired, and the oldest beyond the byte budget.

use super::MessageStore;
use crate::db::StoreResult;

impl MessageStore {
    /// Deletes up to `limit` of the oldest messages beyond `max_bytes` (their `bytes` summed from the newest; the
    /// newest is always kept). Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_over_budget(&self, max_bytes: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from messages where sequence_number in (
               select sequence_number from messages
               where sequence_number <= (select t.sequence_number
                                         from (select sequence_number,
                                                      sum(bytes) over (order by sequence_number desc) as newer
                                               from messages) t
                                         where t.newer > $1 order by t.sequence_number desc limit 1)
                 and sequence_number < (select max(sequence_number) from messages)
               order by sequence_number limit $2 for update skip locked)",
            max_bytes,
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }

    /// Deletes up to `limit` expired messages; replicas reaping at once skip each other's rows.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_expired(&self, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from messages where sequence_number in (
               select sequence_number from messages where expires_at <= now()
               order by expires_at limit $1 for update skip locked)",
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}
