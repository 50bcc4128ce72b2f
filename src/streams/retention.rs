//! How long finished streams are kept: the reaper deletes a completed or aborted stream's chunks once the
//! retention has passed, then the stream itself.

use super::ChunkStore;
use crate::db::StoreResult;

impl ChunkStore {
    /// Deletes up to `limit` chunks of streams that completed or were aborted more than `keep_seconds` ago,
    /// then up to `limit` of those streams once they have no chunks left; returns how many rows went. A
    /// stream id written again afterwards starts anew, at position 1.
    pub async fn reap_finished(&self, keep_seconds: i64, limit: i64) -> StoreResult<usize> {
        // From the finished streams to their chunks through the stream's index: a join let the planner scan
        // every chunk for the few streams that are due (1.6 s at 3M chunks, deleting nothing).
        let chunks = sqlx::query!(
            "delete from chunks where sequence_number in (
               select c.sequence_number
               from (select stream_id from streams
                     where coalesce(completed_at, aborted_at) < now() - make_interval(secs => $1::bigint)) s
               cross join lateral (select sequence_number from chunks where stream_id = s.stream_id
                                   limit $2 for update skip locked) c
               limit $2)",
            keep_seconds,
            limit,
        )
        .execute(self.pool())
        .await?
        .rows_affected();
        let streams = sqlx::query!(
            "delete from streams where stream_id in (
               select s.stream_id from streams s
               where coalesce(s.completed_at, s.aborted_at) < now() - make_interval(secs => $1::bigint)
                 and not exists (select 1 from chunks c where c.stream_id = s.stream_id)
               limit $2 for update skip locked)",
            keep_seconds,
            limit,
        )
        .execute(self.pool())
        .await?
        .rows_affected();
        Ok((chunks + streams) as usize)
    }
}
