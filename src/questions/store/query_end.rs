//! A Query that ends cancels the questions it left open: nobody waits for their answers any more. It ends
//! when the controller deletes it (`DELETE /sessions/queries/{name}`, `DELETE /queries/{name}/messages`) or
//! its stream is completed or aborted. A question an MCP task waits on outlives its stream's end: that is
//! Ark's pause for a person (the executor completes its stream and later resumes through `tasks/result`),
//! and so does one asked after the stream ended.

use super::{QuestionStore, RETRIES};
use crate::{
    db::{
        StoreResult,
        feed::Feed,
        retry::{Attempt, in_feed_tx},
    },
    questions::{model::QuestionRow, record::ChangeKind, store::record::record_all},
};

impl QuestionStore {
    /// Cancels every pending question Query `name` asked: the controller deleted it, so nobody waits for the
    /// answers. Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn cancel_for_query(&self, name: &str) -> StoreResult<usize> {
        change!(&self.pool, |tx| async {
            let rows = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'cancelled', closed_at = now(), resource_version = nextval('question_versions')
                   where id in (select id from questions where status = 'pending' and query_name = $1
                                order by id for update)
                   returning *"#,
                name,
            )
            .fetch_all(tx.conn())
            .await?;
            record_all(tx, ChangeKind::QuestionCancelled, rows, Some("query-deleted")).await
        })
    }

    /// Cancels up to `limit` pending questions whose Query's stream ended (completed or aborted) after they
    /// were asked — only Query `name`'s when given — except those an MCP task waits on. Returns how many.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn cancel_for_ended_streams(&self, name: Option<&str>, limit: i64) -> StoreResult<usize> {
        // Most Queries end with no question open: finding that out takes no feed lock, which every replica's
        // stream ends would otherwise queue on. A question committed after this look is the reaper's.
        let open = sqlx::query_scalar!(
            r#"select exists (select 1 from questions
                              where status = 'pending' and task_id is null and ($1::text is null or query_name = $1))
               as "open!""#,
            name,
        )
        .fetch_one(&self.pool)
        .await?;
        if !open {
            return Ok(0);
        }
        change!(&self.pool, |tx| async {
            let rows = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'cancelled', closed_at = now(), resource_version = nextval('question_versions')
                   where id in (
                     select q.id from questions q join streams s on s.stream_id = q.query_name
                     where q.status = 'pending' and q.task_id is null and ($1::text is null or q.query_name = $1)
                       and coalesce(s.completed_at, s.aborted_at) > q.created_at
                     order by q.id limit $2 for update of q skip locked)
                   returning *"#,
                name,
                limit,
            )
            .fetch_all(tx.conn())
            .await?;
            record_all(tx, ChangeKind::QuestionCancelled, rows, Some("query-ended")).await
        })
    }
}
