//! SQL for Durable Streams' writes other than appends ([`super::appends`]): create (a fork included) and
//! delete. Each runs in one transaction holding the stream's row, decided by [`super::rules`], and ends with
//! the feed's NOTIFY that wakes live readers on every replica; a create's initial data wakes the
//! subscriptions that follow the stream ([`super::subs::wakes::on_append`]) in the same transaction.

use std::time::Duration;

use bytes::Bytes;
use sqlx::PgConnection;

use super::{
    model::{Create, ForkFrom, Refusal},
    rules::{self, Stream, Wanted},
    store::{DurableStore, find},
    subs::wakes,
};
use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx},
    retry::{Attempt, Retries, in_feed_tx},
};

/// Two creators of one path race to insert it: the loser reads the winner's row and compares.
const RETRIES: Retries = Retries { attempts: 5, first_pause: Duration::from_millis(2), contended: "durable stream" };

/// The content type of a stream created without one.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// What a `PUT` came to.
#[derive(Debug)]
pub enum Created {
    /// Made now (201).
    New(Stream),
    /// It was there as asked (200).
    Existing(Stream),
    /// Refused.
    Refused(CreateRefusal),
}

/// Why a `PUT` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateRefusal {
    /// 409: the path holds a stream made otherwise (or a soft-deleted one).
    Conflict,
    /// 404: `Stream-Forked-From` names no stream.
    SourceMissing,
    /// 400.
    Invalid(Refusal),
}

/// What a `DELETE` came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Gone (or soft-deleted while forks read it): 204.
    Done,
    /// 404.
    NotFound,
    /// 410: already soft-deleted.
    Gone,
}

impl DurableStore {
    /// Creates the stream at `path` as `request` asks, or finds it so.
    pub async fn create(&self, path: &str, request: &Create) -> StoreResult<Created> {
        in_feed_tx!(&self.pool, Feed::Durable, RETRIES, |tx| async {
            let conn = tx.conn();
            let existing = find(&mut *conn, path, true).await?;
            let source = match &request.fork {
                None => None,
                Some(fork) => match lock_source(conn, &fork.source).await? {
                    Some(source) if source.deleted => {
                        return Ok(Attempt::Rollback(Created::Refused(CreateRefusal::Conflict)));
                    }
                    Some(source) if !source.expired => Some(source),
                    _ => return Ok(Attempt::Rollback(Created::Refused(CreateRefusal::SourceMissing))),
                },
            };
            let fork_position = match (&request.fork, &source) {
                (Some(fork), Some(source)) => match self.fork_position(source, fork).await? {
                    Ok(position) => Some(position),
                    Err(refusal) => return Ok(Attempt::Rollback(Created::Refused(refusal))),
                },
                _ => None,
            };
            let wanted = match wanted(request, source.as_ref(), fork_position) {
                Ok(wanted) => wanted,
                Err(refusal) => return Ok(Attempt::Rollback(Created::Refused(refusal))),
            };
            if let Some(existing) = &existing {
                if existing.deleted || (existing.expired && has_forks(conn, existing.id).await?) {
                    return Ok(Attempt::Rollback(Created::Refused(CreateRefusal::Conflict)));
                }
                if !existing.expired {
                    let done = match rules::same_stream(existing, &wanted) {
                        true => Created::Existing(existing.clone()),
                        false => Created::Refused(CreateRefusal::Conflict),
                    };
                    return Ok(Attempt::Rollback(done));
                }
                sqlx::query!("delete from ds_streams where id = $1", existing.id).execute(&mut *conn).await?;
            }
            let json_mode = super::model::is_json(&wanted.content_type);
            let messages = match rules::messages(json_mode, &request.body, true) {
                Ok(messages) => messages,
                Err(refusal) => return Ok(Attempt::Rollback(Created::Refused(CreateRefusal::Invalid(refusal)))),
            };
            let (ttl, at) = wanted.expiry.columns();
            let fork_of = wanted.fork.map(|f| f.0);
            let Some(id) = sqlx::query_scalar!(
                "insert into ds_streams (path, content_type, json_mode, ttl_seconds, expires_at, fork_of,
                                         fork_position, tail)
                 values ($1, $2, $3, $4, $5, $6, $7::bigint, coalesce($7::bigint, 0))
                 on conflict (path) do nothing returning id",
                path,
                wanted.content_type,
                json_mode,
                ttl,
                at,
                fork_of,
                fork_position,
            )
            .fetch_optional(&mut *conn)
            .await?
            else {
                return Ok(Attempt::Retry);
            };
            let base = fork_position.unwrap_or(0);
            wakes::new_stream(tx, path).await?;
            let stream = store(tx, (id, json_mode), base, &messages, wanted.closed).await?;
            if !messages.is_empty() {
                wakes::on_append(tx, &[path]).await?;
            }
            Ok(Attempt::Commit(Created::New(stream)))
        })
    }

    /// Deletes the stream at `path`: outright when no fork reads it (and then its soft-deleted sources no
    /// other fork reads), else soft.
    pub async fn delete(&self, path: &str) -> StoreResult<Deleted> {
        in_feed_tx!(&self.pool, Feed::Durable, Retries::claim("durable stream"), |tx| async {
            let conn = tx.conn();
            let stream = match find(&mut *conn, path, true).await? {
                None => return Ok(Attempt::Rollback(Deleted::NotFound)),
                Some(stream) if stream.deleted => return Ok(Attempt::Rollback(Deleted::Gone)),
                Some(stream) if stream.expired => return Ok(Attempt::Rollback(Deleted::NotFound)),
                Some(stream) => stream,
            };
            if has_forks(conn, stream.id).await? {
                sqlx::query!("update ds_streams set deleted = true where id = $1", stream.id)
                    .execute(&mut *conn)
                    .await?;
            } else {
                let mut next = Some(stream.id);
                while let Some(id) = next.take() {
                    let source = sqlx::query_scalar!("delete from ds_streams where id = $1 returning fork_of", id)
                        .fetch_optional(&mut *conn)
                        .await?
                        .flatten();
                    if let Some(source) = source {
                        let orphaned = sqlx::query_scalar!(
                            r#"select (deleted and not exists (select 1 from ds_streams f where f.fork_of = s.id))
                                      as "orphaned!"
                               from ds_streams s where id = $1 for update"#,
                            source
                        )
                        .fetch_optional(&mut *conn)
                        .await?;
                        next = orphaned.unwrap_or(false).then_some(source);
                    }
                }
            }
            tx.wrote_key(&stream.id.to_string(), stream.tail, stream.tail);
            Ok(Attempt::Commit(Deleted::Done))
        })
    }
}

/// Appends `message` to the stream at `path` in `tx`, as the broker itself (a subscription's wake event):
/// when the stream is there and open, with no producer, and waking no subscription. False when it was not.
pub(crate) async fn append_as_broker(tx: &mut FeedTx, path: &str, message: Bytes) -> StoreResult<bool> {
    let Some(stream) = find(&mut *tx.conn(), path, true).await? else { return Ok(false) };
    if stream.deleted || stream.expired || stream.closed {
        return Ok(false);
    }
    store(tx, (stream.id, stream.json_mode), stream.tail, &[message], false).await?;
    Ok(true)
}

/// The stream a fork names, held against deletion until the fork is made.
async fn lock_source(conn: &mut PgConnection, path: &str) -> StoreResult<Option<Stream>> {
    let row = sqlx::query!(
        r#"select id, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                  fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                  ds_expired(ttl_seconds, expires_at, accessed_at) as "expired!"
           from ds_streams where path = $1 for share"#,
        path
    )
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|row| super::store::stream_of!(row)))
}

/// What a `PUT` asks for, its defaults filled in from its source when it forks (at `position`).
fn wanted(request: &Create, source: Option<&Stream>, position: Option<i64>) -> Result<Wanted, CreateRefusal> {
    let (Some(source), Some(position), Some(fork)) = (source, position, request.fork.as_ref()) else {
        let content_type = request.content_type.clone().unwrap_or_else(|| DEFAULT_CONTENT_TYPE.into());
        return Ok(Wanted { content_type, expiry: request.expiry, closed: request.closed, fork: None });
    };
    let content_type = match &request.content_type {
        Some(sent) if super::model::media_type(sent) != super::model::media_type(&source.content_type) => {
            return Err(CreateRefusal::Conflict);
        }
        _ => source.content_type.clone(),
    };
    let expiry = rules::fork_expiry(source.expiry, request.expiry);
    // A repeated fork `PUT` naming no offset matches whatever position the first one took.
    let named = fork.offset.is_some() || fork.sub_offset > 0;
    Ok(Wanted { content_type, expiry, closed: request.closed, fork: Some((source.id, position, named)) })
}

impl DurableStore {
    /// Where a fork of `source` branches: its `Stream-Fork-Offset` (the tail when absent), plus a sub-offset
    /// into the append that starts there — bytes, or the JSON messages that came in that append.
    async fn fork_position(&self, source: &Stream, fork: &ForkFrom) -> StoreResult<Result<i64, CreateRefusal>> {
        let invalid = |message: &str| Ok(Err(CreateRefusal::Invalid(Refusal(message.into()))));
        let anchor = match fork.offset {
            None => source.tail,
            Some(offset) if offset.run != 0 || offset.position > source.tail => {
                return invalid("Stream-Fork-Offset: beyond the source's tail");
            }
            Some(offset) => offset.position,
        };
        if fork.sub_offset == 0 {
            return Ok(Ok(anchor));
        }
        let first = self.read(source, anchor, source.tail, 1, usize::MAX).await?;
        match first.first() {
            Some(piece) if piece.start == anchor && fork.sub_offset <= piece.batch_end - anchor => {
                Ok(Ok(anchor + fork.sub_offset))
            }
            _ => invalid("Stream-Fork-Sub-Offset: beyond the append at Stream-Fork-Offset"),
        }
    }
}

async fn has_forks(conn: &mut PgConnection, id: i64) -> StoreResult<bool> {
    let forks = sqlx::query_scalar!(r#"select exists (select 1 from ds_streams where fork_of = $1) as "e!""#, id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(forks)
}

/// Stores `messages` after position `tail` of stream `id` (a create's, or the broker's own, with no producer
/// and no `Stream-Seq`), closes it when `close`, and names the write in the feed's notification; the stream
/// as it is after.
async fn store(
    tx: &mut FeedTx,
    (id, json_mode): (i64, bool),
    tail: i64,
    messages: &[Bytes],
    close: bool,
) -> StoreResult<Stream> {
    let mut starts = Vec::with_capacity(messages.len());
    let mut ends = Vec::with_capacity(messages.len());
    let mut position = tail;
    for message in messages {
        // A JSON message takes one position, a byte append one per byte.
        let width = if json_mode { 1 } else { message.len() as i64 };
        starts.push(position);
        position += width;
        ends.push(position);
    }
    let data: Vec<&[u8]> = messages.iter().map(|m| m.as_ref()).collect();
    let row = sqlx::query!(
        r#"with inserted as (
               insert into ds_messages (stream_id, start_position, end_position, batch_end, data)
               select $1, s, e, $5, d from unnest($2::bigint[], $3::bigint[], $4::bytea[]) as m (s, e, d)
           )
           update ds_streams set
               tail = $5,
               accessed_at = now(),
               closed = closed or $6,
               closed_by_producer = case when $6 then null else closed_by_producer end,
               closed_by_epoch = case when $6 then null else closed_by_epoch end,
               closed_by_seq = case when $6 then null else closed_by_seq end
           where id = $1
           returning id, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                     fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                     false as "expired!""#,
        id,
        &starts,
        &ends,
        &data as &[&[u8]],
        position,
        close,
    )
    .fetch_one(tx.conn())
    .await?;
    tx.wrote_key(&id.to_string(), tail, position);
    Ok(super::store::stream_of!(row))
}
