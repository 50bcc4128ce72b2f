//! SQL for what the broker itself writes into streams: typed events in the transaction of the change they
//! report (a question's, into its Query's stream), and the abort frame of a stream whose writer disconnected.
//! Both claim positions from the stream's counter row like any writer (see [`crate::db::feed`]).

use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx},
};

use super::typed::EventType;

/// Claims `count` positions of `stream_id` (creating the stream) for typed events the broker writes itself
/// in the caller's transaction, e.g. a question's change into its Query's stream. Returns the position
/// before the first, or `None` when another transaction holds the stream right now or a writer with a later
/// transaction id wrote it first: the caller then rolls back and tries again in a new transaction, so one
/// stream's writers keep increasing transaction ids (see [`crate::db::feed`]).
pub async fn claim_positions(tx: &mut FeedTx, stream_id: &str, count: i64) -> StoreResult<Option<i64>> {
    sqlx::query!(
        "insert into streams (stream_id) select $1 where not exists (select 1 from streams where stream_id = $1)
         on conflict do nothing",
        stream_id,
    )
    .execute(tx.conn())
    .await?;
    Ok(sqlx::query_scalar!(
        r#"update streams s set last_position = s.last_position + $2, last_tx = pg_current_xact_id()
           where s.stream_id = (select stream_id from streams where stream_id = $1 for update skip locked)
             and s.last_tx < pg_current_xact_id()
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
