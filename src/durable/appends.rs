//! SQL for Durable Streams' appends (and closes), many in one transaction: group commit. Whatever appends a
//! replica's writer ([`super::writer`]) holds are decided in the order they came, each against its stream as
//! the appends before it in the group left it, and stored with one statement per table, one wake pass for
//! the subscriptions and one NOTIFY. An append is acknowledged only after the group's commit.
//!
//! The group locks its streams' rows in id order, as every group does, so two replicas' groups that share
//! streams wait for each other instead of deadlocking. A producer's state commits with the append it admits.

use std::collections::HashMap;

use bytes::Bytes;
use sqlx::PgConnection;

use super::{
    model::{Append, Producer},
    rules::{self, AppendDecision, AppendRefusal, ProducerState, Stream},
    store::{DurableStore, stream_of},
    subs::wakes,
};
use crate::db::{
    StoreResult,
    feed::Feed,
    retry::{Attempt, Retries, in_feed_tx},
};

/// What a `POST` came to.
#[derive(Debug, Clone)]
pub enum Appended {
    /// Stored (or closed); the stream as it is now.
    Taken(Stream),
    /// Already stored; the stream as it is, and the producer's highest sequence number.
    Duplicate(Stream, Option<i64>),
    /// Refused; the stream as it is.
    Refused(Stream, AppendRefusal),
    /// 404.
    NotFound,
    /// 410: soft-deleted.
    Gone,
}

/// One stream of a group, as the group's appends leave it.
struct Touched {
    /// As locked, then as each append taken left it.
    stream: Stream,
    /// Its tail when the group began.
    first_tail: i64,
    /// Whether an append (or a close) was taken.
    taken: bool,
    /// Whether data was stored (its subscriptions are woken).
    grew: bool,
}

/// The rows a group writes, gathered as its appends are decided.
#[derive(Default)]
struct Rows {
    stream_ids: Vec<i64>,
    starts: Vec<i64>,
    ends: Vec<i64>,
    batch_ends: Vec<i64>,
    data: Vec<Bytes>,
    /// Each producer's state after the group, by stream and producer.
    producers: HashMap<(i64, String), ProducerState>,
}

impl DurableStore {
    /// Appends to (or closes) the stream at `path`: a group of one.
    pub async fn append(&self, path: &str, request: &Append) -> StoreResult<Appended> {
        let mut done = self.append_all(&[(path, request)]).await?;
        Ok(done.remove(0))
    }

    /// Runs `appends` (path and request each) in one transaction, in their order; what each came to, in
    /// the same order.
    pub async fn append_all(&self, appends: &[(&str, &Append)]) -> StoreResult<Vec<Appended>> {
        in_feed_tx!(&self.pool, Feed::Durable, Retries::claim("durable stream"), |tx| async {
            let paths: Vec<&str> = appends.iter().map(|(path, _)| *path).collect();
            let mut touched = lock_streams(tx.conn(), &paths).await?;
            let mut producers = producer_states(tx.conn(), &touched, appends).await?;
            let mut rows = Rows::default();
            let mut answers = Vec::with_capacity(appends.len());
            for (path, request) in appends {
                answers.push(decide(touched.get_mut(*path), request, &mut producers, &mut rows));
            }
            if !touched.values().any(|t| t.taken) {
                return Ok(Attempt::Rollback(answers));
            }
            store_rows(tx.conn(), &rows).await?;
            store_streams(tx.conn(), touched.values().filter(|t| t.taken).map(|t| &t.stream)).await?;
            for t in touched.values().filter(|t| t.taken) {
                tx.wrote_key(&t.stream.id.to_string(), t.first_tail, t.stream.tail);
            }
            let grown: Vec<&str> = touched.iter().filter(|(_, t)| t.grew).map(|(path, _)| path.as_str()).collect();
            if !grown.is_empty() {
                wakes::on_append(tx, &grown).await?;
            }
            Ok(Attempt::Commit(answers))
        })
    }
}

/// Decides one append against its stream as the group left it (`None`: no stream at its path), and
/// gathers what it stores.
fn decide(
    touched: Option<&mut Touched>,
    request: &Append,
    producers: &mut HashMap<(i64, String), ProducerState>,
    rows: &mut Rows,
) -> Appended {
    let touched = match touched {
        None => return Appended::NotFound,
        Some(t) if t.stream.deleted => return Appended::Gone,
        Some(t) if t.stream.expired => return Appended::NotFound,
        Some(t) => t,
    };
    let stream = &mut touched.stream;
    let id = stream.id;
    let producer_key = |p: &Producer| (id, p.id.clone());
    let state = request.producer.as_ref().and_then(|p| producers.get(&producer_key(p)).copied());
    let (messages, close) = match rules::append(stream, request, state) {
        AppendDecision::Take { messages, close } => (messages, close),
        AppendDecision::Duplicate { last_seq } => return Appended::Duplicate(stream.clone(), last_seq),
        AppendDecision::Refuse(refusal) => return Appended::Refused(stream.clone(), refusal),
    };
    let mut position = stream.tail;
    let batch_end = position + messages.iter().map(|m| width(stream.json_mode, m)).sum::<i64>();
    for message in messages {
        rows.stream_ids.push(stream.id);
        rows.starts.push(position);
        position += width(stream.json_mode, &message);
        rows.ends.push(position);
        rows.batch_ends.push(batch_end);
        rows.data.push(message);
    }
    if let Some(p) = &request.producer {
        let key = producer_key(p);
        producers.insert(key.clone(), ProducerState { epoch: p.epoch, last_seq: p.seq });
        rows.producers.insert(key, ProducerState { epoch: p.epoch, last_seq: p.seq });
    }
    touched.grew |= batch_end > stream.tail;
    touched.taken = true;
    stream.tail = batch_end;
    if request.stream_seq.is_some() {
        stream.last_stream_seq = request.stream_seq.clone();
    }
    if close {
        stream.closed = true;
        stream.closed_by = request.producer.clone();
    }
    Appended::Taken(stream.clone())
}

/// The positions a message takes: one for a JSON message, one per byte of a byte append.
fn width(json_mode: bool, message: &Bytes) -> i64 {
    if json_mode { 1 } else { message.len() as i64 }
}

/// The streams at `paths`, held for the transaction (in id order), by path.
async fn lock_streams(conn: &mut PgConnection, paths: &[&str]) -> StoreResult<HashMap<String, Touched>> {
    let rows = sqlx::query!(
        r#"select id, path, content_type, json_mode, ttl_seconds, expires_at, tail, closed, deleted, fork_of,
                  fork_position, last_stream_seq, closed_by_producer, closed_by_epoch, closed_by_seq,
                  ds_expired(ttl_seconds, expires_at, accessed_at) as "expired!"
           from ds_streams where path = any($1::text[]) order by id for update"#,
        paths as &[&str]
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|mut row| {
            let path = std::mem::take(&mut row.path);
            let stream = stream_of!(row);
            let first_tail = stream.tail;
            (path, Touched { stream, first_tail, taken: false, grew: false })
        })
        .collect())
}

/// The state of each producer the group's appends name, on the streams they append to.
async fn producer_states(
    conn: &mut PgConnection,
    touched: &HashMap<String, Touched>,
    appends: &[(&str, &Append)],
) -> StoreResult<HashMap<(i64, String), ProducerState>> {
    let (streams, names): (Vec<i64>, Vec<&str>) = appends
        .iter()
        .filter_map(|(path, request)| Some((touched.get(*path)?.stream.id, request.producer.as_ref()?.id.as_str())))
        .unzip();
    if streams.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query!(
        "select p.stream_id, p.producer_id, p.epoch, p.last_seq
         from ds_producers p
         join unnest($1::bigint[], $2::text[]) as w (stream_id, producer_id) using (stream_id, producer_id)",
        &streams,
        &names as &[&str]
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ((row.stream_id, row.producer_id), ProducerState { epoch: row.epoch, last_seq: row.last_seq }))
        .collect())
}

/// Inserts the group's messages and records its producers' states.
async fn store_rows(conn: &mut PgConnection, rows: &Rows) -> StoreResult<()> {
    if !rows.data.is_empty() {
        let data: Vec<&[u8]> = rows.data.iter().map(|m| m.as_ref()).collect();
        sqlx::query!(
            "insert into ds_messages (stream_id, start_position, end_position, batch_end, data)
             select * from unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bytea[])",
            &rows.stream_ids,
            &rows.starts,
            &rows.ends,
            &rows.batch_ends,
            &data as &[&[u8]],
        )
        .execute(&mut *conn)
        .await?;
    }
    if !rows.producers.is_empty() {
        let mut streams = Vec::with_capacity(rows.producers.len());
        let (mut names, mut epochs, mut seqs) = (Vec::new(), Vec::new(), Vec::new());
        for ((stream, name), state) in &rows.producers {
            streams.push(*stream);
            names.push(name.as_str());
            epochs.push(state.epoch);
            seqs.push(state.last_seq);
        }
        sqlx::query!(
            "insert into ds_producers (stream_id, producer_id, epoch, last_seq)
             select * from unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[])
             on conflict (stream_id, producer_id) do update set epoch = excluded.epoch, last_seq = excluded.last_seq",
            &streams,
            &names as &[&str],
            &epochs,
            &seqs,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Writes each stream's tail, closure and last `Stream-Seq` as the group left them, and restarts sliding TTLs.
async fn store_streams<'a>(conn: &mut PgConnection, streams: impl Iterator<Item = &'a Stream>) -> StoreResult<()> {
    let mut columns = StreamColumns::default();
    for stream in streams {
        columns.push(stream);
    }
    sqlx::query!(
        "update ds_streams s
         set tail = u.tail, accessed_at = now(), last_stream_seq = u.stream_seq, closed = u.closed,
             closed_by_producer = u.producer, closed_by_epoch = u.epoch, closed_by_seq = u.seq
         from unnest($1::bigint[], $2::bigint[], $3::text[], $4::bool[], $5::text[], $6::bigint[], $7::bigint[])
              as u (id, tail, stream_seq, closed, producer, epoch, seq)
         where s.id = u.id",
        &columns.ids,
        &columns.tails,
        &columns.stream_seqs as &[Option<String>],
        &columns.closed,
        &columns.producers as &[Option<String>],
        &columns.epochs as &[Option<i64>],
        &columns.seqs as &[Option<i64>],
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// `ds_streams`' written columns as arrays, one element per stream.
#[derive(Default)]
struct StreamColumns {
    ids: Vec<i64>,
    tails: Vec<i64>,
    stream_seqs: Vec<Option<String>>,
    closed: Vec<bool>,
    producers: Vec<Option<String>>,
    epochs: Vec<Option<i64>>,
    seqs: Vec<Option<i64>>,
}

impl StreamColumns {
    fn push(&mut self, stream: &Stream) {
        self.ids.push(stream.id);
        self.tails.push(stream.tail);
        self.stream_seqs.push(stream.last_stream_seq.clone());
        self.closed.push(stream.closed);
        self.producers.push(stream.closed_by.as_ref().map(|p| p.id.clone()));
        self.epochs.push(stream.closed_by.as_ref().map(|p| p.epoch));
        self.seqs.push(stream.closed_by.as_ref().map(|p| p.seq));
    }
}
