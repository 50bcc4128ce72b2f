//! The chunk flush: several streams' chunks in one statement that commits by itself (a group commit), its
//! notification sent after the commit ([`crate::db::notifier`]). One statement and no BEGIN or COMMIT of its
//! own is one round trip per flush where a transaction took three, which matters most when many replicas
//! share PostgreSQL's CPU and every round trip waits to be scheduled. Through a pooler the statement runs in
//! a transaction of its own ([`crate::db::pool::Statements`]).
//!
//! An answer that never comes (the connection or the server died) may hide a commit. The statement inserts a
//! commit receipt ([`crate::db::receipt`]), so the server answering next settles it; when it committed, the
//! streams it wrote are read back by the receipt's transaction.

use super::store::{Append, ChunkStore};
use crate::db::{
    StoreError, StoreResult,
    feed::Feed,
    is_unreachable, notice, outage,
    receipt::{self, Receipt},
};

impl ChunkStore {
    /// Appends several streams' chunks in one statement. Returns the streams it wrote; the others are held
    /// by another transaction right now and should be tried again. The streams must exist
    /// ([`ChunkStore::create_streams`]).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn append(&self, appends: &[&Append]) -> StoreResult<Vec<String>> {
        let rows: usize = appends.iter().map(|a| a.chunks.len()).sum();
        if rows == 0 {
            return Ok(Vec::new());
        }
        let mut stream_ids: Vec<&str> = Vec::with_capacity(rows);
        let mut chunks: Vec<&str> = Vec::with_capacity(rows);
        let mut events: Vec<Option<&str>> = Vec::with_capacity(rows);
        for append in appends {
            for line in &append.chunks {
                stream_ids.push(&append.stream_id);
                chunks.push(&line.text);
                events.push(line.event.map(|e| e.as_str()));
            }
        }
        let receipt = Receipt::new();
        let flushed = async {
            let mut statements = self.pool().statements().await?;
            let flushed = sqlx::query!(
                r#"with wanted as (
                     select stream_id, count(*) as n from unnest($1::text[]) as w(stream_id) group by stream_id
                   ), free as (
                     select s.stream_id from streams s where s.stream_id in (select stream_id from wanted)
                     order by s.stream_id for update skip locked
                   ), claimed as (
                     -- Lines after the stream's end start another run (a Query resumed after an approval):
                     -- the stream is open again, and its next `/complete` ends it again.
                     update streams s set last_position = s.last_position + w.n, last_tx = pg_current_xact_id(),
                                          writer_lost_at = null, aborted_at = null, completed_at = null
                     from wanted w
                     where s.stream_id = w.stream_id and s.stream_id in (select stream_id from free)
                       and s.last_tx < pg_current_xact_id()
                     returning s.stream_id, s.last_position - w.n as base, s.last_position as last
                   ), numbered as (
                     select c.stream_id, c.chunk, c.event_type, c.ordinal,
                            row_number() over (partition by c.stream_id order by c.ordinal) as k
                     from unnest($1::text[], $2::text[], $3::text[]) with ordinality as c(stream_id, chunk, event_type, ordinal)
                   ), inserted as (
                     insert into chunks (stream_id, position, chunk, bytes, event_type)
                     select n.stream_id, cl.base + n.k, n.chunk::json, octet_length(n.chunk), n.event_type
                     from numbered n join claimed cl on cl.stream_id = n.stream_id
                     order by n.ordinal
                     returning 1
                   ), receipt as (
                     insert into commit_receipts (token) select $5 from (select 1 from claimed limit 1) c
                   )
                   -- The notification to send once this commits: each stream with its new positions
                   -- (crate::db::notice), or only the transaction when that is too long.
                   select coalesce(array_agg(c.stream_id), '{}') as "written!",
                          (select case when octet_length(k.named) <= $6 then k.named
                                       else $4 || pg_current_xact_id()::text end
                           from (select $4 || pg_current_xact_id()::text || ':'
                                        || json_agg(json_build_array(stream_id, base, last))::text as named
                                 from claimed having count(*) > 0) k) as notification
                   from claimed c cross join (select count(*) from inserted) i"#,
                &stream_ids as &[&str],
                &chunks as &[&str],
                &events as &[Option<&str>],
                format!("{}:", Feed::Chunks.name()),
                receipt.token(),
                notice::MAX_PAYLOAD as i32,
            )
            .fetch_one(&mut *statements)
            .await?;
            statements.done().await?;
            Ok::<_, sqlx::Error>(flushed)
        }
        .await;
        match flushed {
            Ok(flushed) => {
                if let Some(notification) = flushed.notification {
                    self.notifier().notify(notification);
                }
                Ok(flushed.written)
            }
            Err(error) if is_unreachable(&error) => {
                receipt::settle_lost(self.pool(), receipt, error).await?;
                // Readers hear of it by their resync and poll: the listener lost the server too.
                outage::ride(|| self.written_by(receipt)).await.map_err(|error| {
                    tracing::warn!(error = %crate::telemetry::chain(&error), "a flush committed, but which streams it wrote could not be read back");
                    StoreError::Unsettled
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// The streams the committed flush whose receipt is `receipt` wrote.
    async fn written_by(&self, receipt: Receipt) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!(
            r#"select distinct c.stream_id as "stream_id!" from commit_receipts r join chunks c on c.tx = r.tx
               where r.token = $1"#,
            receipt.token(),
        )
        .fetch_all(self.pool())
        .await?)
    }
}
