//! SQL for the human wait's span, run in the question's own transactions: a question asked with a trace
//! context remembers it (`question_wait_spans`), and the change that closes the question takes the row back and
//! writes the span into its trace, claiming the trace's next position like any writer of spans (see
//! [`crate::db::feed`]). Deleting the row and writing the span commit with the close, so each question's span
//! is written once, on whichever replica closes it, and a close tried again writes it again only if the first
//! try rolled back.

use sqlx::PgConnection;

use super::{
    model::NewSpan,
    wait::{self, ClosedWait, Remembered, WaitTrace},
};
use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx},
};

/// Remembers that question `question_id`, being created in the caller's transaction, was asked with `wait`'s
/// context.
pub async fn remember(conn: &mut PgConnection, question_id: &str, wait: &WaitTrace) -> StoreResult<()> {
    sqlx::query!(
        "insert into question_wait_spans (question_id, trace_parent, span_ttl_seconds) values ($1, $2, $3)",
        question_id,
        wait.parent.header_value(),
        wait.span_ttl_seconds,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes the span of the wait of a question closing in the caller's transaction, if it was asked with a trace
/// context. False when the trace's counter row is held by another transaction right now, or was written by a
/// later one (the caller rolls back and tries the whole change again, as for its Query's stream).
pub async fn close(tx: &mut FeedTx, closed: &ClosedWait<'_>) -> StoreResult<bool> {
    // The session is the one upstream gives the Query's messages: a live one before an expired one, then the
    // first by id (read here, not through the sessions domain, which stands beside this one).
    let row = sqlx::query!(
        r#"delete from question_wait_spans where question_id = $1
           returning trace_parent, asked_at, span_ttl_seconds, now() as "closed_at!",
                     (select q.session_id from session_queries q join sessions s on s.session_id = q.session_id
                      where q.query_name = $2 order by s.expires_at > now() desc, q.session_id limit 1)
                       as "session_id?""#,
        closed.question_id,
        closed.query_name,
    )
    .fetch_optional(tx.conn())
    .await?;
    let Some(row) = row else { return Ok(true) };
    let remembered = Remembered {
        trace_parent: row.trace_parent,
        asked_at: row.asked_at,
        closed_at: row.closed_at,
        session_id: row.session_id,
    };
    let Some(span) = wait::span(&remembered, closed).and_then(|span| NewSpan::new(span).ok()) else {
        tracing::warn!(question.id = closed.question_id, "a remembered trace context no longer reads; no span");
        return Ok(true);
    };
    sqlx::query!("insert into traces (trace_id) values ($1) on conflict do nothing", span.trace_id)
        .execute(tx.conn())
        .await?;
    let position = sqlx::query_scalar!(
        r#"update traces t set last_position = t.last_position + 1, last_tx = pg_current_xact_id()
           where t.trace_id = (select trace_id from traces where trace_id = $1 for update skip locked)
             and t.last_tx <= pg_current_xact_id()
           returning t.last_position"#,
        span.trace_id,
    )
    .fetch_optional(tx.conn())
    .await?;
    let Some(position) = position else { return Ok(false) };
    sqlx::query!(
        "insert into spans (trace_id, span_id, parent_span_id, name, session_id, query_name, start_time, end_time,
                            span, expires_at, position, bytes)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, now() + make_interval(secs => $10::bigint), $11,
                 octet_length($9::jsonb::text))",
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        span.name,
        span.session_id,
        span.query_name,
        span.start_time,
        span.end_time,
        span.span,
        row.span_ttl_seconds,
        position,
    )
    .execute(tx.conn())
    .await?;
    tx.also_wrote(Feed::Spans);
    Ok(true)
}
