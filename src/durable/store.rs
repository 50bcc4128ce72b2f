//! SQL for Durable Streams: finding a stream by path, reading its data (across the fork chain it inherits
//! from), the sliding TTL, and the reaper's pass. Writes are in [`super::writes`].

use bytes::Bytes;

use super::rules::Stream;
use crate::db::{StoreResult, pool::Pool};

/// The durable streams' tables.
#[derive(Debug, Clone)]
pub struct DurableStore {
    pub(super) pool: Pool,
}

/// A stored row's bytes in the read's range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The position of its first byte (message).
    pub start: i64,
    /// The position after it.
    pub end: i64,
    /// Its bytes (one JSON message's text in JSON mode).
    pub data: Bytes,
    /// Where the append it came in ends (as far as this read may see).
    pub batch_end: i64,
}

/// Longest fork chain followed (a fork of a fork of …); a deeper one is refused at creation.
pub const MOST_FORK_DEPTH: i32 = 64;

/// Reads a stream row (the query's columns in this order) into a [`Stream`].
macro_rules! stream_of {
    ($row:expr) => {{
        let row = $row;
        $crate::durable::rules::Stream {
            id: row.id,
            content_type: row.content_type,
            json_mode: row.json_mode,
            expiry: $crate::durable::model::Expiry::from_columns(row.ttl_seconds, row.expires_at),
            tail: row.tail,
            closed: row.closed,
            deleted: row.deleted,
            expired: row.expired,
            fork: row.fork_of.zip(row.fork_position),
            last_stream_seq: row.last_stream_seq,
            closed_by: match (row.closed_by_producer, row.closed_by_epoch, row.closed_by_seq) {
                (Some(id), Some(epoch), Some(seq)) => Some($crate::durable::model::Producer { id, epoch, seq }),
                _ => None,
            },
        }
    }};
}
pub(super) use stream_of;

impl DurableStore {
    /// The store on `pool`.
    pub fn new(pool: Pool) -> Self {
        DurableStore { pool }
    }

    /// The stream at `path`, whatever its state.
    pub async fn find(&self, path: &str) -> StoreResult<Option<Stream>> {
        find(&self.pool, path, false).await
    }

    /// Stream `id` as it is now (a live reader's look after a wake-up).
    pub async fn current(&self, id: i64) -> StoreResult<Option<Stream>> {
        let row = sqlx::query!(
            r#"select id, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                      fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                      ds_expired(ttl_seconds, expires_at, accessed_at) as "expired!"
               from ds_streams where id = $1"#,
            id
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| stream_of!(row)))
    }

    /// Restarts a sliding TTL: a read or write reached the stream.
    pub async fn touch(&self, id: i64) -> StoreResult<()> {
        sqlx::query!("update ds_streams set accessed_at = now() where id = $1 and ttl_seconds is not null", id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The stream's stored data from `from` to `to` (its tail as read), at most `most_rows` rows and about
    /// `most_bytes` bytes (always at least one row): its own rows and, below its fork position, its source's.
    pub async fn read(
        &self,
        stream: &Stream,
        from: i64,
        to: i64,
        most_rows: i64,
        most_bytes: usize,
    ) -> StoreResult<Vec<Piece>> {
        let segments = match stream.fork {
            None => vec![(stream.id, 0, to)],
            Some(_) => self.segments(stream.id, to).await?,
        };
        let (ids, lows, highs): (Vec<i64>, Vec<i64>, Vec<i64>) = segments
            .into_iter()
            .filter(|&(_, low, high)| high > from && high > low)
            .map(|(id, low, high)| (id, low.max(from), high))
            .fold((vec![], vec![], vec![]), |(mut i, mut l, mut h), (id, low, high)| {
                i.push(id);
                l.push(low);
                h.push(high);
                (i, l, h)
            });
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query!(
            r#"select s.low as "low!", s.high as "high!", m.start_position, m.end_position, m.batch_end, m.data
               from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as s (id, low, high)
               cross join lateral (
                   select start_position, end_position, batch_end, data from ds_messages
                   where stream_id = s.id and end_position > s.low and start_position < s.high
                   order by end_position limit $4
               ) m
               order by s.low, m.end_position"#,
            &ids,
            &lows,
            &highs,
            most_rows,
        )
        .fetch_all(&self.pool)
        .await?;
        let mut pieces = Vec::with_capacity(rows.len());
        let mut bytes = 0;
        for row in rows.into_iter().take(most_rows as usize) {
            if bytes >= most_bytes && !pieces.is_empty() {
                break;
            }
            let (start, end) = (row.start_position.max(row.low), row.end_position.min(row.high));
            let data = Bytes::from(row.data);
            let data = if (start, end) == (row.start_position, row.end_position) {
                data
            } else {
                // A fork position inside a byte row (a sub-offset), or a read starting inside one.
                data.slice((start - row.start_position) as usize..(end - row.start_position) as usize)
            };
            bytes += data.len();
            pieces.push(Piece { start, end, data, batch_end: row.batch_end.min(row.high) });
        }
        Ok(pieces)
    }

    /// Which stream holds each range of `id`'s positions below `tail`: `(stream, from, to)`, lowest first.
    async fn segments(&self, id: i64, tail: i64) -> StoreResult<Vec<(i64, i64, i64)>> {
        let chain = sqlx::query!(
            r#"with recursive chain (id, fork_of, fork_position, depth) as (
                   select id, fork_of, fork_position, 0 from ds_streams where id = $1
                   union all
                   select s.id, s.fork_of, s.fork_position, c.depth + 1
                   from ds_streams s join chain c on s.id = c.fork_of where c.depth < $2
               )
               select id as "id!", fork_position from chain order by depth"#,
            id,
            MOST_FORK_DEPTH,
        )
        .fetch_all(&self.pool)
        .await?;
        // Each stream holds its positions from its own fork position up to the lowest fork position of the
        // streams forked from it along the chain.
        let mut segments = Vec::with_capacity(chain.len());
        let mut high = tail;
        for link in chain {
            let low = link.fork_position.unwrap_or(0);
            if high > low {
                segments.push((link.id, low, high));
            }
            high = high.min(low);
        }
        segments.reverse();
        Ok(segments)
    }

    /// One pass of the reaper: streams past their expiry go (soft-deleted while forks read them), and
    /// soft-deleted streams no fork reads any more go with their data. At most `batch` of each.
    pub async fn reap(&self, batch: i64) -> StoreResult<usize> {
        let retired = sqlx::query!(
            "update ds_streams set deleted = true
             where id in (select id from ds_streams x
                          where not deleted and ds_expired(ttl_seconds, expires_at, accessed_at)
                            and exists (select 1 from ds_streams f where f.fork_of = x.id)
                          limit $1)",
            batch,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        let gone = sqlx::query!(
            "delete from ds_streams where id in (
                 select id from ds_streams x
                 where (deleted or ds_expired(ttl_seconds, expires_at, accessed_at))
                   and not exists (select 1 from ds_streams f where f.fork_of = x.id)
                 limit $1)",
            batch,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok((retired + gone) as usize)
    }
}

/// The stream at `path`, locked for the transaction when `lock` (a write holds its row to commit).
pub(super) async fn find<'e>(conn: impl sqlx::PgExecutor<'e>, path: &str, lock: bool) -> StoreResult<Option<Stream>> {
    let row = if lock {
        sqlx::query!(
            r#"select id, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                      fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                      ds_expired(ttl_seconds, expires_at, accessed_at) as "expired!"
               from ds_streams where path = $1 for update"#,
            path
        )
        .fetch_optional(conn)
        .await?
        .map(|row| stream_of!(row))
    } else {
        sqlx::query!(
            r#"select id, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                      fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                      ds_expired(ttl_seconds, expires_at, accessed_at) as "expired!"
               from ds_streams where path = $1"#,
            path
        )
        .fetch_optional(conn)
        .await?
        .map(|row| stream_of!(row))
    };
    Ok(row)
}
