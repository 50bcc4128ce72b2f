//! A question's side of its channel deliveries (the channels module claims, sends and settles them): the
//! deliveries queued in the asking transaction, the `deliveries` the question carries as the API shows them
//! (read from the outbox, written as a new version of the question), and which of the questions a channel
//! holds are still pending or closed.

use sqlx::PgConnection;

use super::QuestionStore;
use crate::db::StoreResult;
use crate::questions::model::QuestionRow;

/// Queues one delivery per channel of a question being asked, in the asking transaction; returns the question
/// with its deliveries.
pub async fn queue(conn: &mut PgConnection, question_id: &str, channels: &[String]) -> StoreResult<QuestionRow> {
    sqlx::query!(
        "insert into channel_deliveries (question_id, channel) select $1, unnest($2::text[]) on conflict do nothing",
        question_id,
        channels,
    )
    .execute(&mut *conn)
    .await?;
    refresh(conn, question_id).await
}

/// Writes the question's deliveries, as the API shows them, from the outbox (after a delivery changed), as a new version of the question;
/// returns the question.
pub async fn refresh(conn: &mut PgConnection, question_id: &str) -> StoreResult<QuestionRow> {
    let deliveries = sqlx::query_scalar!(
        r#"select coalesce(jsonb_agg(jsonb_build_object('channel', d.channel, 'status', d.status, 'attempts', d.attempts)
                                     || jsonb_strip_nulls(jsonb_build_object(
                                          'url', d.message_url, 'error', d.last_error,
                                          'deliveredAt', to_char(d.delivered_at at time zone 'UTC',
                                                                 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
                                     order by d.id), '[]') as "deliveries!"
           from channel_deliveries d where d.question_id = $1"#,
        question_id,
    )
    .fetch_one(&mut *conn)
    .await?;
    set_deliveries(conn, question_id, &deliveries).await
}

/// Writes `deliveries` (as the API shows them) onto question `id` as a new version of it; returns the row.
async fn set_deliveries(conn: &mut PgConnection, id: &str, deliveries: &serde_json::Value) -> StoreResult<QuestionRow> {
    Ok(sqlx::query_as!(
        QuestionRow,
        "update questions set deliveries = $2, resource_version = nextval('question_versions') where id = $1
         returning *",
        id,
        deliveries,
    )
    .fetch_one(conn)
    .await?)
}

impl QuestionStore {
    /// Which of `ids` are still pending.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn pending_among(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!("select id from questions where id = any($1) and status = 'pending'", ids)
            .fetch_all(self.pool())
            .await?)
    }

    /// Which of `ids` are closed (answered, cancelled or expired).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn closed_among(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        Ok(sqlx::query_scalar!("select id from questions where id = any($1) and status <> 'pending'", ids)
            .fetch_all(self.pool())
            .await?)
    }
}
