//! SQL for ending streams in their writers' order (the rule is in [`super::completion`]): open chunk POSTs
//! register and release themselves in `stream_writers`, `/complete` appends the marker or asks the writers
//! to, and overdue requests are finished by any replica. Every step that decides about a stream's end holds
//! the stream's counter row (`for update`) first, so a request and a writer's release see each other.

use std::time::Duration;

use uuid::Uuid;

use super::ChunkStore;
use crate::db::{
    StoreError, StoreResult,
    feed::{self, Feed, FeedTx},
    outage,
    retry::{Attempt, Retries, in_feed_tx},
};

/// What one step of `/complete` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The marker was appended now.
    Completed,
    /// The stream was completed before.
    AlreadyCompleted,
    /// The stream is completed and no writer is open, but a POST of a new run may be about to register.
    Settling,
    /// Writers are open (or may be about to register): the completion is requested and they append it.
    Requested {
        /// The stream's committed last position when the request was made.
        position: i64,
        /// Whether this call made the request (else an earlier `/complete` had, and answers `completed`).
        first: bool,
    },
    /// Nothing was ever written to the stream and no writer is open.
    NotFound,
}

/// What releasing a writer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// A seal found no completion requested: the writer stays registered.
    Kept,
    /// The writer is gone; the stream's end, if requested, waits for other writers.
    Gone,
    /// The writer was the last one a requested completion waited for: the marker is appended.
    Completed,
}

/// The stream's row, locked for the rest of the transaction.
struct Locked {
    completed: bool,
    known: bool,
    requested: bool,
    position: i64,
}

impl ChunkStore {
    /// Registers an open chunk POST to `stream_id`; returns whether a completion is requested for it already
    /// (the POST then seals as soon as it has read what arrived).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn register_writer(&self, writer: Uuid, stream_id: &str) -> StoreResult<bool> {
        // Repeatable (an attempt whose answer was lost registered the writer already), so it rides an outage.
        outage::ride(|| async {
            Ok(sqlx::query_scalar!(
                r#"with registered as (insert into stream_writers (writer_id, stream_id, replica_key)
                                       values ($1, $2, $3) on conflict (writer_id) do nothing)
                   select exists (select 1 from streams where stream_id = $2 and complete_requested_at is not null
                                    and completed_at is null) as "requested!""#,
                writer,
                stream_id,
                self.replica_key(),
            )
            .fetch_one(self.pool())
            .await?)
        })
        .await
    }

    /// Releases `writer` of `stream_id` once every line it handed over is stored: for good when its POST ended
    /// (`seal` false), or, while the POST stays open, only if a completion is requested (`seal` true). The
    /// last writer a requested completion waited for appends the marker.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn release_writer(&self, writer: Uuid, stream_id: &str, seal: bool) -> StoreResult<Release> {
        in_feed_tx!(self.pool(), Feed::Chunks, Retries::claim("stream"), |tx| async {
            let stream = lock(tx, stream_id).await?;
            let requested = stream.as_ref().is_some_and(|s| s.requested && !s.completed);
            if seal && !requested {
                return Ok(Attempt::Rollback(Release::Kept));
            }
            sqlx::query!("delete from stream_writers where writer_id = $1", writer).execute(tx.conn()).await?;
            if stream.as_ref().is_some_and(|s| s.requested && s.completed) && !has_writers(tx, stream_id).await? {
                // An end requested from a POST opened after the stream's end, which wrote nothing: the stream
                // stays as it ended, and the request must not seal the next run's POST.
                withdraw(tx, stream_id).await?;
                return Ok(Attempt::Commit(Release::Gone));
            }
            let Some(stream) = stream.filter(|_| requested) else {
                return Ok(Attempt::Commit(Release::Gone));
            };
            if has_writers(tx, stream_id).await? {
                return Ok(Attempt::Commit(Release::Gone));
            }
            if !stream.known {
                // Nothing to end: the request is answered 404 by its own caller.
                withdraw(tx, stream_id).await?;
                return Ok(Attempt::Commit(Release::Gone));
            }
            if append_marker(tx, stream_id).await? {
                return Ok(Attempt::Commit(Release::Completed));
            }
            Ok(Attempt::Retry)
        })
    }

    /// One step of `POST /stream/{id}/complete`: appends the marker when no writer is open, otherwise
    /// requests it from the writers (and tells their replicas). A stream nothing was written to stays
    /// requested until `may_give_up`, since a POST whose first line is on its way may not be registered yet.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn request_completion(&self, stream_id: &str, may_give_up: bool) -> StoreResult<Step> {
        in_feed_tx!(self.pool(), Feed::Chunks, Retries::claim("stream"), |tx| async {
            super::store::create_streams(tx.conn(), &[stream_id]).await?;
            let stream = lock(tx, stream_id).await?.ok_or(StoreError::Contended("stream"))?;
            let writers = has_writers(tx, stream_id).await?;
            if stream.completed && !writers {
                // A POST opened since the end (a Query resumed after an approval writes its stream again)
                // may not be registered yet: ask again until `may_give_up`.
                let step = if may_give_up { Step::AlreadyCompleted } else { Step::Settling };
                return Ok(Attempt::Rollback(step));
            }
            // Completed with writers open: a new run, whose lines may not be stored yet. Its end is requested
            // from them like any other; their first flush opens the stream again.
            if !writers && stream.known {
                if append_marker(tx, stream_id).await? {
                    return Ok(Attempt::Commit(Step::Completed));
                }
                return Ok(Attempt::Retry);
            }
            if !writers && may_give_up {
                withdraw(tx, stream_id).await?;
                return Ok(Attempt::Commit(Step::NotFound));
            }
            sqlx::query!(
                "update streams set complete_requested_at = coalesce(complete_requested_at, now()) where stream_id = $1",
                stream_id,
            )
            .execute(tx.conn())
            .await?;
            sqlx::query!("select pg_notify($1, $2)", feed::CHANNEL, feed::completion_payload(stream_id))
                .execute(tx.conn())
                .await?;
            Ok(Attempt::Commit(Step::Requested { position: stream.position, first: !stream.requested }))
        })
    }

    /// Of `stream_ids` (this replica's open POSTs), those whose completion is requested.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn completion_requested(&self, stream_ids: &[String]) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!(
            "select stream_id from streams
             where stream_id = any($1) and complete_requested_at is not null and completed_at is null",
            stream_ids,
        )
        .fetch_all(self.pool())
        .await?)
    }

    /// Ends up to `limit` streams whose completion was requested more than `grace` ago and is still waiting:
    /// their writers' replicas died or froze. Their writers are forgotten and the marker appended after what
    /// is stored. Returns the streams completed.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn complete_overdue(&self, grace: Duration, limit: i64) -> StoreResult<Vec<String>> {
        let due = sqlx::query_scalar!(
            "select stream_id from streams
             where complete_requested_at <= now() - $1::bigint * interval '1 millisecond' and completed_at is null
             order by complete_requested_at limit $2",
            grace.as_millis() as i64,
            limit,
        )
        .fetch_all(self.pool())
        .await?;
        let mut completed = Vec::new();
        for stream_id in due {
            let mut tx = FeedTx::begin(self.pool(), Feed::Chunks).await?;
            let Some(stream) = lock(&mut tx, &stream_id).await? else { continue };
            if stream.completed || !stream.requested {
                tx.rollback().await?;
                continue;
            }
            if !stream.known {
                // Appending the marker forgets the writers; with nothing to end, they are forgotten here.
                sqlx::query!("delete from stream_writers where stream_id = $1", &stream_id).execute(tx.conn()).await?;
                withdraw(&mut tx, &stream_id).await?;
                tx.commit().await?;
            } else if append_marker(&mut tx, &stream_id).await? {
                tx.commit().await?;
                completed.push(stream_id);
            }
        }
        Ok(completed)
    }

    /// Whether any stream's lost writer (`abort_lost`) or requested completion (`complete_overdue`) is past
    /// `grace`: one look, without a lock or a transaction, so a pass with nothing due costs one round trip.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn overdue(&self, grace: Duration) -> StoreResult<Overdue> {
        let due = sqlx::query!(
            r#"select exists (select 1 from streams
                              where writer_lost_at <= now() - $1::bigint * interval '1 millisecond'
                                and completed_at is null) as "lost!",
                      exists (select 1 from streams
                              where complete_requested_at <= now() - $1::bigint * interval '1 millisecond'
                                and completed_at is null) as "completions!""#,
            grace.as_millis() as i64,
        )
        .fetch_one(self.pool())
        .await?;
        Ok(Overdue { lost_writers: due.lost, completions: due.completions })
    }

    /// Forgets writers registered longer ago than `age` (their replica died without releasing them).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn forget_writers_older_than(&self, age: Duration) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from stream_writers where opened_at < now() - $1::bigint * interval '1 second'",
            age.as_secs() as i64,
        )
        .execute(self.pool())
        .await?;
        Ok(deleted.rows_affected())
    }
}

/// Locks the stream's counter row for the transaction, if the stream exists.
async fn lock(tx: &mut FeedTx, stream_id: &str) -> StoreResult<Option<Locked>> {
    let row = sqlx::query!(
        r#"select completed_at is not null as "completed!", last_position > purged_position as "known!",
                  complete_requested_at is not null as "requested!", last_position
           from streams where stream_id = $1 for update"#,
        stream_id,
    )
    .fetch_optional(tx.conn())
    .await?;
    Ok(row.map(|r| Locked {
        completed: r.completed,
        known: r.known,
        requested: r.requested,
        position: r.last_position,
    }))
}

/// How long after PostgreSQL's primary changed a writer registered before it counts as alive whatever
/// `live_replicas` says: the new primary holds no replica's liveness lock until that replica's LISTEN
/// connection is back (within a second of the new primary answering), while its open POSTs ride the change
/// through with lines still to write.
const NEW_PRIMARY_GRACE_MS: i64 = 10_000;

/// Whether open POSTs of the stream remain on live replicas. A writer row of a replica that died (its
/// liveness lock is gone from `live_replicas`: PostgreSQL released it with the replica's connection) does not
/// count, so a killed writer replica does not hold the stream's end back; the row itself is left alone (the
/// replica may only be reconnecting) and goes with the stream's end or [`ChunkStore::forget_writers_older_than`].
/// Right after a change of primary ([`NEW_PRIMARY_GRACE_MS`]) the writers registered before it count too.
async fn has_writers(tx: &mut FeedTx, stream_id: &str) -> StoreResult<bool> {
    Ok(sqlx::query_scalar!(
        r#"with epoch as (select began_at from primary_epochs order by timeline desc limit 1)
           select exists (
             select 1 from stream_writers w
             where w.stream_id = $1
               and (exists (select 1 from live_replicas r where r.replica_key = w.replica_key)
                    or exists (select 1 from epoch e where w.opened_at < e.began_at
                                 and e.began_at > now() - $2::bigint * interval '1 millisecond'))
           ) as "exists!""#,
        stream_id,
        NEW_PRIMARY_GRACE_MS,
    )
    .fetch_one(tx.conn())
    .await?)
}

async fn withdraw(tx: &mut FeedTx, stream_id: &str) -> StoreResult<()> {
    sqlx::query!("update streams set complete_requested_at = null where stream_id = $1", stream_id)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Appends the completion marker to a stream whose row the transaction holds, and forgets the writers of dead
/// replicas it no longer waits for. False when a writer with a later transaction id wrote the stream first:
/// roll back and try again in a new transaction, so one stream's writers keep increasing transaction ids
/// (see [`crate::db::feed`]).
async fn append_marker(tx: &mut FeedTx, stream_id: &str) -> StoreResult<bool> {
    let marker = sqlx::query_scalar!(
        r#"with claimed as (
             update streams
             set last_position = last_position + 1, last_tx = pg_current_xact_id(), completed_at = now(),
                 writer_lost_at = null, complete_requested_at = null
             where stream_id = $1 and last_tx < pg_current_xact_id()
             returning last_position
           ), inserted as (
             insert into chunks (stream_id, position, chunk, is_done, bytes)
             select $1, last_position, '"[DONE]"', true, 8 from claimed
             returning 1
           )
           select last_position from claimed"#,
        stream_id,
    )
    .fetch_optional(tx.conn())
    .await?;
    let Some(position) = marker else { return Ok(false) };
    sqlx::query!("delete from stream_writers where stream_id = $1", stream_id).execute(tx.conn()).await?;
    tx.wrote_key(stream_id, position - 1, position);
    Ok(true)
}

/// What the sweep has to do ([`ChunkStore::overdue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overdue {
    /// A stream's writer was lost longer than the grace ago and nothing came since.
    pub lost_writers: bool,
    /// A stream's completion was requested longer than the grace ago and is still waiting.
    pub completions: bool,
}
