//! What the reaper deletes of messages: the expired, and the oldest beyond the byte budget.

use super::MessageStore;
use crate::db::StoreResult;

impl MessageStore {
    /// Deletes up to `limit` of the oldest messages beyond `max_bytes` (their `bytes` summed from the newest; the
    /// newest is always kept), reading only the oldest `limit` rows. Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_over_budget(&self, max_bytes: i64, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            // The table's bytes are its changes added up (migration 0036): the pass keeps their sum as one
            // row and reads the oldest rows alone, as many as it may delete, not the table.
            r#"with counted as (delete from byte_totals where feed = 'messages' returning bytes),
                    total as (select coalesce(sum(bytes), 0)::bigint as bytes from counted),
                    kept as (insert into byte_totals (feed, bytes) select 'messages', bytes from total),
                    oldest as (select sequence_number, bytes, sum(bytes) over (order by sequence_number) as running
                               from messages order by sequence_number limit $2)
               -- An array, so the rows are deleted through the key's index whatever the plan guesses.
               delete from messages where sequence_number = any(array(
                 select o.sequence_number from oldest o, total t
                 where t.bytes - (o.running - o.bytes) > $1
                   and o.sequence_number < (select max(sequence_number) from messages)))"#,
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
