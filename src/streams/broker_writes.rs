//! SQL for what the broker itself writes into streams: typed events in the transaction of the change they
//! report (a question's, into its Query's stream), and the abort frame of a stream whose writer disconnected.
//! Both claim positions from the stream's counter row like any writer (see [`crate::db::feed`]).

use std::time::Duration;

use super::{ChunkStore, store, typed::EventType};
use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx},
    outage,
};

/// The frame readers of an aborted stream get (then `[DONE]`), stored as the stream's last chunk.
pub const ABORT_FRAME: &str =
    r#"{"error":{"message":"stream aborted: the writer disconnected","type":"stream_aborted","code":"aborted"}}"#;

/// Claims `count` positions of `stream_id` (creating the stream) for typed events the broker writes itself
/// in the caller's transaction, e.g. a question's change into its Query's stream. Returns the position
/// before the first, or `None` when another transaction holds the stream right now or a writer with a later
/// transaction id wrote it first: the caller then rolls back and tries again in a new transaction, so one
/// stream's writers keep increasing transaction ids (see [`crate::db::feed`]). A transaction may claim the
/// same stream again (several questions of one Query expiring together); its positions stay contiguous.
pub async fn claim_positions(tx: &mut FeedTx, stream_id: &str, count: i64) -> StoreResult<Option<i64>> {
    store::create_streams(tx.conn(), &[stream_id]).await?;
    Ok(sqlx::query_scalar!(
        r#"update streams s set last_position = s.last_position + $2, last_tx = pg_current_xact_id()
           where s.stream_id = (select stream_id from streams where stream_id = $1 for update skip locked)
             and s.last_tx <= pg_current_xact_id()
           returning s.last_position - $2 as "base!""#,
        stream_id,
        count,
    )
    .fetch_optional(tx.conn())
    .await?)
}

/// The `to` of the stream's latest `phase_change`, if it has one.
pub async fn latest_phase(tx: &mut FeedTx, stream_id: &str) -> StoreResult<Option<String>> {
    Ok(sqlx::query_scalar!(
        "select chunk -> 'data' ->> 'to' from chunks
         where stream_id = $1 and event_type = 'phase_change' order by position desc limit 1",
        stream_id,
    )
    .fetch_optional(tx.conn())
    .await?
    .flatten())
}

/// Writes typed events at the positions after `base` (claimed with [`claim_positions`]).
pub async fn insert_events(
    tx: &mut FeedTx,
    stream_id: &str,
    base: i64,
    events: &[(EventType, serde_json::Value)],
) -> StoreResult<()> {
    let texts: Vec<String> = events
        .iter()
        .map(|(kind, data)| serde_json::json!({"event": kind.as_str(), "data": data}).to_string())
        .collect();
    let types: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    sqlx::query!(
        "insert into chunks (stream_id, position, chunk, bytes, event_type)
         select $1, $2 + e.k, e.chunk::json, octet_length(e.chunk), e.event_type
         from unnest($3::text[], $4::text[]) with ordinality as e(chunk, event_type, k) order by e.k",
        stream_id,
        base,
        &texts,
        &types as &[&str],
    )
    .execute(tx.conn())
    .await?;
    tx.also_wrote(Feed::Chunks);
    Ok(())
}

impl ChunkStore {
    /// Records that a chunk POST to `stream_id` broke mid-body: unless something is written to the stream,
    /// or it is completed, within the grace period, [`ChunkStore::abort_lost`] marks it aborted.
    pub async fn writer_lost(&self, stream_id: &str) -> StoreResult<()> {
        // Repeatable, so it rides an outage.
        outage::ride(|| async {
            sqlx::query!(
                "update streams set writer_lost_at = now() where stream_id = $1 and completed_at is null",
                stream_id,
            )
            .execute(self.pool())
            .await?;
            Ok(())
        })
        .await
    }

    /// Marks aborted up to `limit` streams whose writer was lost more than `grace` ago and that nothing was
    /// written to since: appends the abort frame and sets `aborted_at`, in one transaction with one NOTIFY.
    /// Streams another replica is marking, or writing, right now are left to the next pass, so each stream is
    /// marked once. Returns the streams marked.
    pub async fn abort_lost(&self, grace: Duration, limit: i64) -> StoreResult<Vec<String>> {
        let mut tx = FeedTx::begin(self.pool(), Feed::Chunks).await?;
        let aborted = sqlx::query_scalar!(
            r#"with due as (
                 select stream_id from streams
                 where writer_lost_at <= now() - $1::bigint * interval '1 millisecond' and completed_at is null
                 order by writer_lost_at limit $2
                 for update skip locked
               ), claimed as (
                 update streams s
                 set last_position = s.last_position + 1, last_tx = pg_current_xact_id(), aborted_at = now(),
                     writer_lost_at = null
                 from due where s.stream_id = due.stream_id and s.last_tx < pg_current_xact_id()
                 returning s.stream_id, s.last_position
               ), inserted as (
                 insert into chunks (stream_id, position, chunk, bytes, event_type)
                 select stream_id, last_position, $3::text::json, octet_length($3::text), 'stream_aborted' from claimed
                 returning 1
               )
               select stream_id as "stream_id!" from claimed"#,
            grace.as_millis() as i64,
            limit,
            ABORT_FRAME,
        )
        .fetch_all(tx.conn())
        .await?;
        if aborted.is_empty() {
            tx.rollback().await?;
        } else {
            tx.wrote();
            tx.commit().await?;
        }
        Ok(aborted)
    }
}
