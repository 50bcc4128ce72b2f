//! SQL for conversation memory. Appends claim positions from the conversation's counter row (see
//! [`crate::db::feed`]), so only writers of the same conversation wait for each other; every read hides
//! expired rows.

use crate::db::pool::Pool;
use serde_json::Value;

use super::model::{MessageFilter, MessageItem};
use crate::{
    config::Ttls,
    db::{
        self, StoreResult,
        feed::{Feed, GlobalCursor},
        follow::{BATCH, BATCH_BYTES, Page},
        notice::{self, KeyRange},
        retry::{Attempt, Retries, in_feed_tx},
        tail::FeedSource,
        watch::KeyPages,
    },
    idempotency::{self, IdempotencyKey, KeyState, Scope, StoredReply},
    sessions::store as session_store,
    timestamp::iso_timestamp,
};

mod retention;
mod watch;
/// Per-conversation counts for `/memory-status`.
#[derive(Debug)]
pub struct ConversationCounts {
    /// The conversation.
    pub conversation_id: String,
    /// Visible messages in it.
    pub message_count: i64,
    /// Distinct queries that wrote them.
    pub query_count: i64,
}

/// Conversation memory in Postgres.
#[derive(Debug, Clone)]
pub struct MessageStore {
    pool: Pool,
}

/// Builds a [`MessageItem`] from a row of any query selecting the message columns.
macro_rules! item {
    ($row:expr) => {
        MessageItem {
            timestamp: iso_timestamp($row.created_at),
            conversation_id: $row.conversation_id,
            query_id: $row.query_id,
            message: $row.message,
            sequence: $row.sequence_number,
            position: $row.position,
            tx: $row.tx,
            bytes: $row.bytes,
        }
    };
}

impl MessageStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        MessageStore { pool }
    }

    /// Appends `messages` in order, expiring after `ttl_seconds` (or the default of `ttls`), visible to
    /// readers on every replica once this returns. With `once` (an idempotency key and the request's
    /// fingerprint) it appends only if the key is new, and otherwise reports what the key says;
    /// [`KeyState::New`] means "appended now".
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn append(
        &self,
        conversation_id: &str,
        query_id: &str,
        messages: &[Value],
        ttl_seconds: Option<i64>,
        ttls: Ttls,
        once: Option<(&IdempotencyKey, &str)>,
    ) -> StoreResult<KeyState> {
        if messages.is_empty() {
            return self.attach(conversation_id, query_id, ttls, once).await;
        }
        let ttl_seconds = ttl_seconds.unwrap_or(ttls.message_seconds);
        let count = messages.len() as i64;
        in_feed_tx!(&self.pool, Feed::Messages, Retries::claim("conversation"), |tx| async {
            // Committed together with the messages: a retry sees the key exactly when it sees them.
            let state = claim_once(tx.conn(), once).await?;
            if state != KeyState::New {
                return Ok(Attempt::Rollback(state));
            }
            let claimed = sqlx::query_scalar!(
                r#"with claimed as (
                     insert into conversations as c (conversation_id, last_position, last_tx)
                     values ($1, $5, pg_current_xact_id())
                     on conflict (conversation_id) do update
                       set last_position = c.last_position + excluded.last_position, last_tx = excluded.last_tx
                       where c.last_tx < excluded.last_tx
                     returning c.last_position - $5 as base
                   ), inserted as (
                     insert into messages (conversation_id, query_id, message, expires_at, position, bytes)
                     select $1, $2, m.message, now() + make_interval(secs => $4::bigint), cl.base + m.position,
                            octet_length(m.message::text)
                     from claimed cl, unnest($3::jsonb[]) with ordinality as m(message, position)
                     order by m.position
                     returning 1
                   )
                   select base as "base!" from claimed"#,
                conversation_id,
                query_id,
                messages,
                ttl_seconds,
                count,
            )
            .fetch_optional(tx.conn())
            .await?;
            let Some(base) = claimed else {
                // A writer whose transaction started after ours wrote the conversation first.
                return Ok(Attempt::Retry);
            };
            tx.wrote_key(conversation_id, base, base + count);
            // Upstream: a message of a query some session knows is activity of that session.
            if session_store::apply_message(tx.conn(), query_id, conversation_id, ttls.session_seconds).await? {
                tx.also_wrote(Feed::Sessions);
            }
            Ok(Attempt::Commit(KeyState::New))
        })
    }

    /// `POST /messages` with no message: stores none, but tells the sessions read model which conversation
    /// query `query_id` belongs to (upstream's `sessions-empty-message-post` test). The executor posts an
    /// empty list when a Query starts on a conversation before it has anything to say.
    async fn attach(
        &self,
        conversation_id: &str,
        query_id: &str,
        ttls: Ttls,
        once: Option<(&IdempotencyKey, &str)>,
    ) -> StoreResult<KeyState> {
        in_feed_tx!(&self.pool, Feed::Sessions, Retries::claim("session"), |tx| async {
            let state = claim_once(tx.conn(), once).await?;
            if state != KeyState::New {
                return Ok(Attempt::Rollback(state));
            }
            if session_store::apply_message(tx.conn(), query_id, conversation_id, ttls.session_seconds).await? {
                tx.wrote();
            }
            Ok(Attempt::Commit(KeyState::New))
        })
    }

    /// Up to `limit` visible messages after sequence `after`, oldest first.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list(&self, filter: &MessageFilter, after: i64, limit: i64) -> StoreResult<Vec<MessageItem>> {
        if let Some(conversation_id) = &filter.conversation_id {
            return self.list_conversation(conversation_id, filter.query_id.as_deref(), after, limit).await;
        }
        // Without a conversation: the whole feed, or one query's messages (the optional filter needs a plan
        // for its value).
        let mut tx = self.pool.begin().await?;
        db::plan_per_execution(&mut tx).await?;
        let rows = sqlx::query!(
            r#"select sequence_number, conversation_id, query_id, message, created_at, position,
                      tx::text::bigint as "tx!", bytes
               from messages
               where ($1::text is null or query_id = $1)
                 and sequence_number > $2
                 and (expires_at is null or expires_at > now())
               order by sequence_number
               limit $3"#,
            filter.query_id,
            after,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(rows.into_iter().map(|row| item!(row)).collect())
    }

    /// A conversation's page: one statement whose cached plan walks the conversation's index in position
    /// order, which is its sequence order (a writer draws both while it holds the conversation's counter row),
    /// so neither a transaction nor a per-execution plan is needed.
    async fn list_conversation(
        &self,
        conversation_id: &str,
        query_id: Option<&str>,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<MessageItem>> {
        let rows = sqlx::query!(
            r#"select sequence_number, conversation_id, query_id, message, created_at, position,
                      tx::text::bigint as "tx!", bytes
               from messages
               where conversation_id = $1
                 and ($2::text is null or query_id = $2)
                 and sequence_number > $3
                 and (expires_at is null or expires_at > now())
               order by position
               limit $4"#,
            conversation_id,
            query_id,
            after,
            limit,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| item!(row)).collect())
    }

    /// The whole feed's messages after `after`, below the visibility horizon, within the catch-up limits.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<MessageItem, GlobalCursor>> {
        let rows = sqlx::query!(
            r#"with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon,
                          ark_broker_current_epoch() as epoch)
               select h.horizon::text::bigint as "horizon!", h.epoch as "epoch?", m.sequence_number as "sequence_number?",
                      m.conversation_id as "conversation_id?", m.query_id as "query_id?", m.message as "message?",
                      m.created_at as "created_at?", m.position as "position?", m.tx::text::bigint as "tx?",
                      m.bytes as "bytes?"
               from h left join lateral (
                 select *, sum(bytes) over (order by tx, sequence_number) as running from messages
                 where (tx, sequence_number) > ($1::text::xid8, $2) and tx < h.horizon
                 order by tx, sequence_number limit $3
               ) m on m.running - m.bytes < $4
               order by m.tx, m.sequence_number"#,
            after.tx.to_string(),
            after.sequence,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        let horizon = rows.first().map_or(after.tx, |row| row.horizon);
        let epoch = rows.first().and_then(|row| row.epoch);
        let items = rows
            .into_iter()
            .filter_map(|row| {
                Some(MessageItem {
                    timestamp: iso_timestamp(row.created_at?),
                    conversation_id: row.conversation_id?,
                    query_id: row.query_id?,
                    message: row.message?,
                    sequence: row.sequence_number?,
                    position: row.position?,
                    tx: row.tx?,
                    bytes: row.bytes?,
                })
            })
            .collect();
        Ok(Page::of_global(items, after, horizon, epoch))
    }

    /// Conversation ids that still have visible messages, in order of first appearance.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn conversation_ids(&self) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!(
            r#"select conversation_id as "id!" from messages
               where expires_at is null or expires_at > now()
               group by conversation_id order by min(sequence_number)"#
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Message and query counts per conversation.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn counts(&self) -> StoreResult<Vec<ConversationCounts>> {
        let rows = sqlx::query!(
            r#"select conversation_id, count(*) as "messages!", count(distinct query_id) as "queries!"
               from messages where expires_at is null or expires_at > now()
               group by conversation_id order by min(sequence_number)"#
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| ConversationCounts {
                conversation_id: row.conversation_id,
                message_count: row.messages,
                query_count: row.queries,
            })
            .collect())
    }

    /// Deletes every message.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_all(&self) -> StoreResult<()> {
        sqlx::query!("delete from messages").execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes one conversation's messages.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_conversation(&self, conversation_id: &str) -> StoreResult<()> {
        sqlx::query!("delete from messages where conversation_id = $1", conversation_id).execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes one query's messages, in one conversation or in all of them.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_query(&self, conversation_id: Option<&str>, query_id: &str) -> StoreResult<()> {
        sqlx::query!(
            "delete from messages where query_id = $1 and ($2::text is null or conversation_id = $2)",
            query_id,
            conversation_id,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

impl FeedSource for MessageStore {
    type Row = MessageItem;

    async fn rows_of(&self, txs: &[i64]) -> StoreResult<Vec<MessageItem>> {
        let txs: Vec<String> = txs.iter().map(i64::to_string).collect();
        let rows = sqlx::query!(
            r#"select sequence_number, conversation_id, query_id, message, created_at, position,
                      tx::text::bigint as "tx!", bytes
               from messages where tx = any($1::text[]::xid8[]) order by tx, sequence_number"#,
            &txs,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| item!(row)).collect())
    }

    async fn rows_in(&self, ranges: &[KeyRange]) -> StoreResult<Vec<MessageItem>> {
        let (keys, afters, lasts) = notice::columns(ranges);
        let rows = sqlx::query!(
            r#"select m.sequence_number, m.conversation_id, m.query_id, m.message, m.created_at, m.position,
                      m.tx::text::bigint as "tx!", m.bytes
               from unnest($1::text[], $2::bigint[], $3::bigint[]) with ordinality as r(k, after, last, ord)
               cross join lateral (
                 select * from messages
                 where conversation_id = r.k and position > r.after and position <= r.last
                 order by position limit greatest(r.last - r.after, 0)
               ) m
               order by r.ord, m.position"#,
            &keys as &[&str],
            &afters,
            &lasts,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| item!(row)).collect())
    }

    async fn global_page(&self, after: GlobalCursor) -> StoreResult<Page<MessageItem, GlobalCursor>> {
        MessageStore::global_page(self, after).await
    }

    fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn key_heads(&self, keys: &[String]) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query!(
            "select conversation_id, last_position from conversations where conversation_id = any($1)",
            keys
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| (row.conversation_id, row.last_position)).collect())
    }
}

impl KeyPages for MessageStore {
    /// One conversation's messages after position `after`, within the catch-up limits.
    async fn key_page(&self, conversation_id: &str, after: i64) -> StoreResult<Page<MessageItem, i64>> {
        let rows = sqlx::query!(
            r#"select sequence_number, conversation_id, query_id, message, created_at, position,
                      tx::text::bigint as "tx!", bytes
               from (select *, sum(bytes) over (order by position) as running
                     from messages where conversation_id = $1 and position > $2 order by position limit $3) m
               where running - bytes < $4
               order by position"#,
            conversation_id,
            after,
            BATCH,
            BATCH_BYTES,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(Page::of_key(rows.into_iter().map(|row| item!(row)).collect(), after))
    }
}

/// Claims `once`'s idempotency key in the caller's transaction, with its reply (200, no body) recorded: a
/// retry then gets that reply exactly when it sees what the transaction wrote. [`KeyState::New`] without a key.
async fn claim_once(conn: &mut sqlx::PgConnection, once: Option<(&IdempotencyKey, &str)>) -> StoreResult<KeyState> {
    let Some((key, fingerprint)) = once else { return Ok(KeyState::New) };
    let state = idempotency::store::claim(&mut *conn, Scope::Messages, key, fingerprint).await?;
    if state == KeyState::New {
        idempotency::store::finish(conn, Scope::Messages, key, &StoredReply { status: 200, body: None }).await?;
    }
    Ok(state)
}
