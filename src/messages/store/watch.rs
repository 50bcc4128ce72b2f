//! Where a watch of messages starts: a conversation's positions and the global feed's cursors, read for
//! [`crate::db::watch`].

use super::MessageStore;
use crate::db::{StoreResult, feed::GlobalCursor, watch::WatchSource};

impl WatchSource for MessageStore {
    /// A conversation's committed last position (0 if it has none): a live-only watch starts after it.
    async fn last_position(&self, conversation_id: &str) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce((select last_position from conversations where conversation_id = $1), 0) as "n!""#,
            conversation_id
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where a watch resumed from upstream's `cursor` (a message's sequence) continues within a
    /// conversation: one conversation's sequence numbers rise with its positions, because a writer draws them
    /// only after it holds the conversation's counter row.
    async fn position_after_sequence(&self, conversation_id: &str, sequence: i64) -> StoreResult<i64> {
        Ok(sqlx::query_scalar!(
            r#"select coalesce(max(position), 0) as "n!" from messages
               where conversation_id = $1 and sequence_number <= $2"#,
            conversation_id,
            sequence,
        )
        .fetch_one(&self.pool)
        .await?)
    }

    /// Where a global watch resumed from upstream's `cursor` continues: right after that message in global
    /// order `(tx, sequence)`. Everything before it in that order was below the horizon when it was sent,
    /// so the resume repeats and skips nothing. A message that is gone (deleted or expired) resumes after
    /// the last earlier message that is still there.
    async fn global_cursor_of(&self, sequence: i64) -> StoreResult<GlobalCursor> {
        let row = sqlx::query!(
            r#"select tx::text::bigint as "tx!", sequence_number from messages
               where sequence_number <= $1 order by sequence_number desc limit 1"#,
            sequence,
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map_or_else(GlobalCursor::default, |row| GlobalCursor { tx: row.tx, sequence: row.sequence_number }))
    }
}
