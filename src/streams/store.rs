//! SQL for chunk streams. Every write takes the chunks feed's writer lock, so one global sequence orders
//! all chunks in commit order: per-stream readers and the global feed can both advance by sequence safely.

use std::sync::Arc;

use sqlx::PgPool;

use super::model::{ChunkRow, Completion};
use crate::db::{
    StoreResult,
    feeds::{self, Feed},
};

/// Chunks of one stream to append, in order.
#[derive(Debug)]
pub struct Append {
    /// The stream.
    pub stream_id: Arc<str>,
    /// The chunks' JSON texts.
    pub chunks: Vec<String>,
}

/// Chunk streams in Postgres.
#[derive(Debug, Clone)]
pub struct ChunkStore {
    pool: PgPool,
}

impl ChunkStore {
    /// A store on `pool`.
    pub fn new(pool: PgPool) -> Self {
        ChunkStore { pool }
    }

    /// Appends several streams' chunks in one transaction with one NOTIFY (a group commit).
    pub async fn append(&self, appends: &[Append]) -> StoreResult<()> {
        let rows: usize = appends.iter().map(|a| a.chunks.len()).sum();
        if rows == 0 {
            return Ok(());
        }
        let mut stream_ids: Vec<&str> = Vec::with_capacity(rows);
        let mut chunks: Vec<&str> = Vec::with_capacity(rows);
        for append in appends {
            for chunk in &append.chunks {
                stream_ids.push(&append.stream_id);
                chunks.push(chunk);
            }
        }
        let mut tx = self.pool.begin().await?;
        feeds::lock_for_append(&mut tx, Feed::Chunks).await?;
        sqlx::query!(
            "insert into streams (stream_id) select distinct unnest($1::text[]) on conflict do nothing",
            &stream_ids as &[&str],
        )
        .execute(&mut *tx)
        .await?;
        let last = sqlx::query_scalar!(
            r#"with inserted as (
                 insert into chunks (stream_id, chunk)
                 select c.stream_id, c.chunk::json
                 from unnest($1::text[], $2::text[]) with ordinality as c(stream_id, chunk, position)
                 order by c.position
                 returning sequence_number)
               select max(sequence_number) as "last!" from inserted"#,
            &stream_ids as &[&str],
            &chunks as &[&str],
        )
        .fetch_one(&mut *tx)
        .await?;
        feeds::notify(&mut tx, Feed::Chunks, last).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Appends the completion marker once; later calls report that it is there already.
    pub async fn complete(&self, stream_id: &str) -> StoreResult<Completion> {
        let mut tx = self.pool.begin().await?;
        feeds::lock_for_append(&mut tx, Feed::Chunks).await?;
        let completed_now = sqlx::query_scalar!(
            "update streams set completed_at = now() where stream_id = $1 and completed_at is null returning stream_id",
            stream_id,
        )
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
        if !completed_now {
            let exists = sqlx::query_scalar!(
                r#"select exists (select 1 from streams where stream_id = $1) as "exists!""#,
                stream_id
            )
            .fetch_one(&mut *tx)
            .await?;
            tx.rollback().await?;
            return Ok(if exists { Completion::AlreadyCompleted } else { Completion::NotFound });
        }
        let marker = sqlx::query_scalar!(
            r#"insert into chunks (stream_id, chunk, is_done) values ($1, '"[DONE]"', true) returning sequence_number"#,
            stream_id,
        )
        .fetch_one(&mut *tx)
        .await?;
        feeds::notify(&mut tx, Feed::Chunks, marker).await?;
        tx.commit().await?;
        Ok(Completion::Completed)
    }

    /// Up to `limit` rows of one stream after `after`.
    pub async fn stream_after(&self, stream_id: &str, after: i64, limit: i64) -> StoreResult<Vec<ChunkRow>> {
        Ok(sqlx::query_as!(
            ChunkRow,
            r#"select sequence_number as sequence, stream_id, chunk::text as "chunk!", is_done, created_at
               from chunks where stream_id = $1 and sequence_number > $2 order by sequence_number limit $3"#,
            stream_id,
            after,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Up to `limit` rows of every stream after `after` (the global feed).
    pub async fn feed_after(&self, after: i64, limit: i64) -> StoreResult<Vec<ChunkRow>> {
        Ok(sqlx::query_as!(
            ChunkRow,
            r#"select sequence_number as sequence, stream_id, chunk::text as "chunk!", is_done, created_at
               from chunks where sequence_number > $1 order by sequence_number limit $2"#,
            after,
            limit,
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// How many rows the global feed holds.
    pub async fn count(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(r#"select count(*) as "n!" from chunks"#).fetch_one(&self.pool).await?)
    }

    /// The newest sequence of the feed; a live-only reader starts after it.
    pub async fn latest_sequence(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(r#"select coalesce(max(sequence_number), 0) as "n!" from chunks"#)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Deletes every stream and chunk.
    pub async fn delete_all(&self) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query!("delete from chunks").execute(&mut *tx).await?;
        sqlx::query!("delete from streams").execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }
}
