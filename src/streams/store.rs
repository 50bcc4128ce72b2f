//! SQL for chunk streams. Writers claim positions from each stream's counter row (see [`crate::db::feed`]):
//! a group commit claims every stream it can lock right away and leaves streams another transaction holds
//! for its next flush, so a writer that froze while holding a stream delays only that stream.

use crate::db::pool::Pool;
use std::sync::Arc;

use sqlx::PgConnection;

use super::model::{ChunkRow, Line};
use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx, GlobalCursor},
    follow::{BATCH, BATCH_BYTES, Page},
    notice::{self, KeyRange},
    notifier::Notifier,
    tail::FeedSource,
    watch::KeyPages,
};
use crate::idempotency::{self, IdempotencyKey, KeyState, Scope, StoredReply};

/// Chunks of one stream to append, in order.
#[derive(Debug)]
pub struct Append {
    /// The stream.
    pub stream_id: Arc<str>,
    /// The lines: OpenAI chunks and typed events.
    pub chunks: Vec<Line>,
}

/// Chunk streams in Postgres.
#[derive(Debug, Clone)]
pub struct ChunkStore {
    pool: Pool,
    /// This replica's liveness key ([`crate::db::listener::ListenerStatus::replica_key`]), on its open POSTs.
    replica_key: i64,
    /// Sends each flush's notification after its commit.
    notifier: Notifier,
}

impl ChunkStore {
    /// A store on `pool`, for the replica whose liveness key is `replica_key`; starts its notifier, which
    /// runs as long as a clone of the store does.
    pub fn new(pool: Pool, replica_key: i64) -> Self {
        ChunkStore { notifier: Notifier::spawn(pool.clone()), pool, replica_key }
    }

    /// The pool, for the store's other files.
    pub(super) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// What sends each flush's notification after its commit ([`super::flush`]).
    pub(super) fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// This replica's liveness key.
    pub(super) fn replica_key(&self) -> i64 {
        self.replica_key
    }

    /// Registers streams that may not exist yet; existing ones are left alone without waiting for a writer
    /// that holds them.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn create_streams(&self, stream_ids: &[&str]) -> StoreResult<()> {
        let mut statements = self.pool.statements().await?;
        create_streams(&mut statements, stream_ids).await?;
        Ok(statements.done().await?)
    }

    /// Appends one hand-over of a request that carries an idempotency key, in a transaction of its own: of
    /// its lines (the request's lines `offset..`) only those beyond what the key says is stored already are
    /// written, and the key's count moves on with them. Returns false if another transaction holds the
    /// stream right now (try again later). The stream must exist.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn append_keyed(&self, append: &Append, key: &IdempotencyKey, offset: i64) -> StoreResult<bool> {
        let mut tx = FeedTx::begin(&self.pool, Feed::Chunks).await?;
        let stream = sqlx::query!(
            r#"select last_position, last_tx < pg_current_xact_id() as "ours!"
               from streams where stream_id = $1 for update skip locked"#,
            &*append.stream_id,
        )
        .fetch_optional(tx.conn())
        .await?;
        let Some(stream) = stream.filter(|s| s.ours) else {
            tx.rollback().await?;
            return Ok(false);
        };
        let stored = idempotency::store::lock_lines(tx.conn(), key).await?;
        let lines = append.chunks.len() as i64;
        let skip = (stored - offset).clamp(0, lines) as usize;
        let rest = &append.chunks[skip..];
        if rest.is_empty() {
            tx.rollback().await?;
            return Ok(true);
        }
        let texts: Vec<&str> = rest.iter().map(|line| line.text.as_str()).collect();
        let events: Vec<Option<&str>> = rest.iter().map(|line| line.event.map(|e| e.as_str())).collect();
        sqlx::query!(
            "insert into chunks (stream_id, position, chunk, bytes, event_type)
             select $1, $2 + c.k, c.chunk::json, octet_length(c.chunk), c.event_type
             from unnest($3::text[], $4::text[]) with ordinality as c(chunk, event_type, k) order by c.k",
            &*append.stream_id,
            stream.last_position,
            &texts as &[&str],
            &events as &[Option<&str>],
        )
        .execute(tx.conn())
        .await?;
        sqlx::query!(
            // As a flush's: lines after the stream's end open it again (src/streams/flush.rs).
            "update streams set last_position = last_position + $2, last_tx = pg_current_xact_id(),
                                writer_lost_at = null, aborted_at = null, completed_at = null
             where stream_id = $1",
            &*append.stream_id,
            rest.len() as i64,
        )
        .execute(tx.conn())
        .await?;
        idempotency::store::set_lines(tx.conn(), key, offset + lines).await?;
        tx.wrote_key(&append.stream_id, stream.last_position, stream.last_position + rest.len() as i64);
        tx.commit().await?;
        Ok(true)
    }

    /// Records `key` for a chunk POST to `stream_id`, or reports what it says already.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn claim_key(&self, key: &IdempotencyKey, stream_id: &str) -> StoreResult<KeyState> {
        let mut statements = self.pool.statements().await?;
        let state = idempotency::store::claim(&mut statements, Scope::Stream, key, stream_id).await?;
        statements.done().await?;
        Ok(state)
    }

    /// Stores a chunk POST's final reply under `key`; returns the reply that stands (the first one stored).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn finish_key(&self, key: &IdempotencyKey, reply: &StoredReply) -> StoreResult<StoredReply> {
        let mut statements = self.pool.statements().await?;
        let stands = idempotency::store::finish(&mut statements, Scope::Stream, key, reply).await?;
        statements.done().await?;
        Ok(stands)
    }

    /// A stream's committed last position (0 if it has none): a live-only reader starts after it.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn last_position(&self, stream_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce((select last_position from streams where stream_id = $1), 0) as "n!""#,
            stream_id
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Whether the stream has rows after `position` (only rows OpenAI-format readers see, if `openai_only`).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn written_after(&self, stream_id: &str, position: i64, openai_only: bool) -> StoreResult<bool> {
        Ok(sqlx::query_scalar!(
            r#"select chunk_written_after($1, $2, $3) as "exists!""#,
            stream_id,
            position,
            openai_only,
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// One stream's rows after position `after`, within the catch-up limits.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn stream_page(&self, stream_id: &str, after: i64) -> StoreResult<Page<ChunkRow, i64>> {
        let rows = sqlx::query_as!(
            ChunkRow,
            r#"select c.sequence_number as "sequence!", c.stream_id as "stream_id!", c.position as "position!",
                      c.tx::text::bigint as "tx!", c.chunk::text as "chunk!", c.is_done as "is_done!",
                      c.created_at as "created_at!", c.bytes as "bytes!", c.event_type
               from chunk_stream_page($1, $2, $3, $4) with ordinality c order by c.ordinality"#,
            stream_id,
            after,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(Page::of_key(rows, after))
    }

    /// Up to `limit` rows of every stream after sequence `after` (the `GET /stream` page).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn feed_after(&self, after: i64, limit: i64) -> StoreResult<Vec<ChunkRow>> {
        Ok(sqlx::query_as!(
            ChunkRow,
            r#"select c.sequence_number as "sequence!", c.stream_id as "stream_id!", c.position as "position!",
                      c.tx::text::bigint as "tx!", c.chunk::text as "chunk!", c.is_done as "is_done!",
                      c.created_at as "created_at!", c.bytes as "bytes!", c.event_type
               from chunk_feed_after($1, $2) with ordinality c order by c.ordinality"#,
            after,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many rows the global feed holds.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn count(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select count(*) as "n!" from chunks where event_type is null or event_type = 'stream_aborted'"#
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Deletes every chunk and forgets every stream. The counters stay, so a position is never reused.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_all(&self) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query!("delete from chunks").execute(&mut *tx).await?;
        sqlx::query!("update streams set completed_at = null, purged_position = last_position")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// [`ChunkStore::create_streams`] on the caller's connection (or in its transaction).
pub(super) async fn create_streams(conn: &mut PgConnection, stream_ids: &[&str]) -> StoreResult<()> {
    sqlx::query!(
        "insert into streams (stream_id)
         select id from unnest($1::text[]) as new(id)
         where not exists (select 1 from streams s where s.stream_id = new.id)
         order by id
         on conflict do nothing",
        stream_ids as &[&str],
    )
    .execute(conn)
    .await?;
    Ok(())
}

impl KeyPages for ChunkStore {
    async fn key_page(&self, stream_id: &str, after: i64) -> StoreResult<Page<ChunkRow, i64>> {
        self.stream_page(stream_id, after).await
    }
}

impl FeedSource for ChunkStore {
    type Row = ChunkRow;

    async fn rows_of(&self, txs: &[i64]) -> StoreResult<Vec<ChunkRow>> {
        let txs: Vec<String> = txs.iter().map(i64::to_string).collect();
        Ok(sqlx::query_as!(
            ChunkRow,
            r#"select c.sequence_number as "sequence!", c.stream_id as "stream_id!", c.position as "position!",
                      c.tx::text::bigint as "tx!", c.chunk::text as "chunk!", c.is_done as "is_done!",
                      c.created_at as "created_at!", c.bytes as "bytes!", c.event_type
               from chunk_rows_of($1::text[]::xid8[]) with ordinality c order by c.ordinality"#,
            &txs,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn rows_in(&self, ranges: &[KeyRange]) -> StoreResult<Vec<ChunkRow>> {
        // A wake names positions just committed, so their rows are in the newest buckets: read those alone
        // (PostgreSQL prunes the rest as the statement starts). A key's positions have no gaps, so a read
        // that found every position asked for found them all; one that did not (rows of a restore, or a
        // range read long after its commit) reads every bucket.
        let (keys, afters, lasts) = notice::columns(ranges);
        let asked: i64 = ranges.iter().map(|range| (range.last - range.after).max(0)).sum();
        // Each range's read is a lateral one with a limit (index reads): flattened, a wake naming dozens of
        // streams was hashed against a scan of every chunk. The other feeds' `rows_in` do the same.
        let recent = sqlx::query_as!(
            ChunkRow,
            r#"select c.sequence_number as "sequence!", c.stream_id as "stream_id!", c.position as "position!",
                      c.tx::text::bigint as "tx!", c.chunk::text as "chunk!", c.is_done as "is_done!",
                      c.created_at as "created_at!", c.bytes as "bytes!", c.event_type
               from chunk_recent_rows_in($1, $2, $3) with ordinality c order by c.ordinality"#,
            &keys as &[&str],
            &afters,
            &lasts,
        )
        .fetch_all(&self.pool)
        .await?;
        if recent.len() as i64 == asked {
            return Ok(recent);
        }
        Ok(sqlx::query_as!(
            ChunkRow,
            r#"select c.sequence_number as "sequence!", c.stream_id as "stream_id!", c.position as "position!",
                      c.tx::text::bigint as "tx!", c.chunk::text as "chunk!", c.is_done as "is_done!",
                      c.created_at as "created_at!", c.bytes as "bytes!", c.event_type
               from chunk_rows_in($1, $2, $3) with ordinality c order by c.ordinality"#,
            &keys as &[&str],
            &afters,
            &lasts,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<ChunkRow, GlobalCursor>> {
        let rows = sqlx::query!(
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon,
                          ark_broker_current_epoch() as epoch)
               select h.horizon::text::bigint as "horizon!", h.epoch as "epoch?", c.sequence_number as "sequence?", c.stream_id as "stream_id?",
                      c.position as "position?", c.tx::text::bigint as "tx?", c.chunk::text as "chunk?",
                      c.is_done as "is_done?", c.created_at as "created_at?", c.bytes as "bytes?", c.event_type
               from h left join lateral chunk_global_page($1::text::xid8, $2, h.horizon, $3, $4) with ordinality c
                 on true
               order by c.ordinality"#,
            after.tx.to_string(),
            after.sequence,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        let horizon = rows.first().map_or(after.tx, |row| row.horizon);
        let epoch = rows.first().and_then(|row| row.epoch);
        let chunks: Vec<ChunkRow> = rows
            .into_iter()
            .filter_map(|row| {
                Some(ChunkRow {
                    sequence: row.sequence?,
                    stream_id: row.stream_id?,
                    position: row.position?,
                    tx: row.tx?,
                    chunk: row.chunk?,
                    is_done: row.is_done?,
                    created_at: row.created_at?,
                    bytes: row.bytes?,
                    event_type: row.event_type,
                })
            })
            .collect();
        Ok(Page::of_global(chunks, after, horizon, epoch))
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn key_heads(&self, keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query!("select stream_id, last_position from streams where stream_id = any($1)", keys)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|row| (row.stream_id, row.last_position)).collect())
    }
}
