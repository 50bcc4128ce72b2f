//! SQL for conversation memory. Appends take the messages feed's writer lock, so the feed's sequence order
//! is its commit order; every read hides expired rows.

use serde_json::Value;
use sqlx::PgPool;

use super::model::{MessageFilter, MessageItem};
use crate::{
    db::{
        StoreResult,
        feeds::{self, Feed},
    },
    http::reply::iso_timestamp,
};

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
    pool: PgPool,
}

impl MessageStore {
    /// A store on `pool`.
    pub fn new(pool: PgPool) -> Self {
        MessageStore { pool }
    }

    /// Appends `messages` in order, visible to readers on every replica once this returns.
    pub async fn append(
        &self,
        conversation_id: &str,
        query_id: &str,
        messages: &[Value],
        ttl_seconds: Option<i64>,
    ) -> StoreResult<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        feeds::lock_for_append(&mut tx, Feed::Messages).await?;
        let last = sqlx::query_scalar!(
            r#"with inserted as (
                 insert into messages (conversation_id, query_id, message, expires_at)
                 select $1, $2, m.message, now() + make_interval(secs => $4::bigint)
                 from unnest($3::jsonb[]) with ordinality as m(message, position)
                 order by m.position
                 returning sequence_number)
               select max(sequence_number) as "last!" from inserted"#,
            conversation_id,
            query_id,
            messages,
            ttl_seconds,
        )
        .fetch_one(&mut *tx)
        .await?;
        feeds::notify(&mut tx, Feed::Messages, last).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Up to `limit` visible messages after sequence `after`, oldest first.
    pub async fn list(&self, filter: &MessageFilter, after: i64, limit: i64) -> StoreResult<Vec<MessageItem>> {
        let rows = sqlx::query!(
            r#"select sequence_number, conversation_id, query_id, message, created_at from messages
               where ($1::text is null or conversation_id = $1)
                 and ($2::text is null or query_id = $2)
                 and sequence_number > $3
                 and (expires_at is null or expires_at > now())
               order by sequence_number
               limit $4"#,
            filter.conversation_id,
            filter.query_id,
            after,
            limit,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| MessageItem {
                timestamp: iso_timestamp(row.created_at),
                conversation_id: row.conversation_id,
                query_id: row.query_id,
                message: row.message,
                sequence: row.sequence_number,
            })
            .collect())
    }

    /// The newest sequence of the feed; a live-only watch starts after it.
    pub async fn latest_sequence(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(r#"select coalesce(max(sequence_number), 0) as "n!" from messages"#)
            .fetch_one(&self.pool)
            .await?)
    }

    /// Conversation ids that still have visible messages, in order of first appearance.
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
    pub async fn delete_all(&self) -> StoreResult<()> {
        sqlx::query!("delete from messages").execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes one conversation's messages.
    pub async fn delete_conversation(&self, conversation_id: &str) -> StoreResult<()> {
        sqlx::query!("delete from messages where conversation_id = $1", conversation_id).execute(&self.pool).await?;
        Ok(())
    }

    /// Deletes one query's messages, in one conversation or in all of them.
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

    /// Deletes up to `limit` expired messages; replicas reaping at once skip each other's rows.
    pub async fn delete_expired(&self, limit: i64) -> StoreResult<u64> {
        let deleted = sqlx::query!(
            "delete from messages where sequence_number in (
               select sequence_number from messages where expires_at <= now()
               order by expires_at limit $1 for update skip locked)",
            limit,
        )
        .execute(&self.pool)
        .await?;
        Ok(deleted.rows_affected())
    }
}
