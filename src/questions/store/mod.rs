//! SQL for questions. Every change takes the questions feed's writer lock, draws the next
//! `resourceVersion`, updates the row conditionally (never read-then-write), and logs a `question_events`
//! row with the question as it now is, all in one transaction with one NOTIFY.

use crate::db::pool::Pool;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use self::record::record;
use super::{
    bodies::NewQuestion,
    channel::CALLER,
    model::{Question, QuestionRow, QuestionStatus},
    record::ChangeKind,
};
use crate::db::{
    StoreResult,
    feed::{Feed, FeedTx},
    retry::{Attempt, Retries, in_feed_tx},
};

/// A question change is tried again while its Query's stream is held by another transaction, after a short
/// pause that lets the stream's holder finish.
const RETRIES: Retries = Retries { attempts: 100, first_pause: Duration::from_millis(5), contended: "Query stream" };

/// Runs one change of questions in a transaction of its own and commits it. The attempt (an async block
/// using `tx`) answers `None` when its Query's stream could not be written right now ([`super::announce`]):
/// the transaction is rolled back and the change tried again.
macro_rules! change {
    ($pool:expr, |$tx:ident| $attempt:expr) => {
        in_feed_tx!($pool, Feed::Questions, RETRIES, |$tx| async {
            let attempt: StoreResult<Option<_>> = $attempt.await;
            Ok(match attempt? {
                Some(done) => Attempt::Commit(done),
                None => Attempt::Retry,
            })
        })
    };
}

/// What a change to one question came to.
#[derive(Debug)]
pub enum Change {
    /// The change was made; the question as it is now.
    Made(Question),
    /// The question is no longer pending; as it is (the first answer won, or it was cancelled or expired).
    Conflict(Question),
    /// There is no such question.
    NotFound,
}

/// Which questions a list covers.
#[derive(Debug, Clone, Default)]
pub struct QuestionFilter {
    pub status: Option<QuestionStatus>,
    pub recipient: Option<String>,
    pub sender: Option<String>,
    /// Only the questions this principal asked.
    pub owner: Option<String>,
    /// Only questions whose content contains this text, ignoring case (the page's search box; `strpos`, not
    /// `ilike`, so `%` and `_` need no escaping).
    pub text: Option<String>,
    /// Only the questions of Queries of this name (and in this namespace).
    pub query_name: Option<String>,
    pub query_namespace: Option<String>,
    /// Only closed questions, most recently closed first (the page's Closed tab); `after` is then unused and
    /// `closed_before`, the `(closed_at, sequence)` of the previous page's last question, pages on.
    pub closed: bool,
    pub closed_before: Option<(DateTime<Utc>, i64)>,
}

/// Questions in Postgres.
#[derive(Debug, Clone)]
pub struct QuestionStore {
    pool: Pool,
}

impl QuestionStore {
    /// A store on `pool`.
    pub fn new(pool: Pool) -> Self {
        QuestionStore { pool }
    }

    /// The pool, for the store's other files.
    pub(super) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Stores a new pending question; it is committed (and visible on every replica) when this returns.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn create(&self, new: &NewQuestion) -> StoreResult<Question> {
        let id = format!("q-{}", Uuid::new_v4());
        let (namespace, name) = match &new.query {
            Some(query) => (query.namespace.as_deref(), Some(query.name.as_str())),
            None => (None, None),
        };
        let fields = crate::questions::form::field_order::of(new.response_schema.as_ref());
        change!(&self.pool, |tx| async {
            let row = sqlx::query_as!(
                QuestionRow,
                r#"insert into questions (id, sender, recipient, channels, content, query_namespace, query_name,
                                          tool_call_id, task_id, task_ttl_ms, expires_at, resource_version, owner,
                                          options, response_schema, on_timeout, escalate_to,
                                          remind_every_seconds, response_fields, caller_elicitation)
                   values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::bigint,
                           coalesce($17::timestamptz, now() + coalesce(make_interval(secs => $11::bigint),
                                                                       $10::bigint * interval '1 millisecond')),
                           nextval('question_versions'), $12, $13, $14, $15, $16, $18::bigint::integer, $19, $20)
                   returning *"#,
                id,
                new.sender,
                new.recipient,
                &new.channels,
                new.content,
                namespace,
                name,
                new.tool_call_id,
                new.task_id,
                new.task_ttl_ms,
                new.ttl_seconds.or(new.timeout_seconds),
                new.owner,
                &new.options,
                new.response_schema,
                new.on_timeout.unwrap_or_default().as_str(),
                new.escalate_to.as_ref().map(|to| serde_json::to_value(to).expect("serialises")),
                new.expires_at,
                new.remind_every_seconds,
                fields.as_deref(),
                new.caller_elicitation,
            )
            .fetch_one(tx.conn())
            .await?;
            if let Some(trace) = &new.trace {
                crate::traces::wait_store::remember(tx.conn(), &row.id, trace).await?;
            }
            // The deliveries commit with the question: never a question without them, nor twice.
            // `mcp:caller` is asked on the caller's own connection, not through the outbox.
            let outbound: Vec<String> = new.channels.iter().filter(|c| *c != CALLER).cloned().collect();
            let row = if outbound.is_empty() { row } else { deliveries::queue(tx.conn(), &row.id, &outbound).await? };
            record(tx, ChangeKind::QuestionCreated, row, None).await
        })
    }

    /// Answers a pending question with `response` (checked against its form by the caller: see
    /// [`super::answering`]); a JSON string is kept as text too, anything else as its compact JSON. The first
    /// answer wins; later ones get [`Change::Conflict`].
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn answer(
        &self,
        id: &str,
        response: &Value,
        answered_by: Option<&str>,
        via: Option<&str>,
    ) -> StoreResult<Change> {
        let text = match response {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        change!(&self.pool, |tx| async {
            if !timeout::timeout_if_due(tx, id).await? {
                return Ok(None);
            }
            let answered = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'answered', response = $2, response_value = $4, answered_by = $3, answered_at = now(),
                       closed_at = now(), resource_version = nextval('question_versions')
                   where id = $1 and status = 'pending'
                   returning *"#,
                id,
                text,
                answered_by,
                response,
            )
            .fetch_optional(tx.conn())
            .await?;
            match answered {
                Some(row) => Ok(record(tx, ChangeKind::QuestionAnswered, row, via).await?.map(Change::Made)),
                None => unchanged(tx, id).await.map(Some),
            }
        })
    }

    /// Cancels a pending question; the row stays.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn cancel(&self, id: &str) -> StoreResult<Change> {
        change!(&self.pool, |tx| async {
            if !timeout::timeout_if_due(tx, id).await? {
                return Ok(None);
            }
            let cancelled = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'cancelled', closed_at = now(), resource_version = nextval('question_versions')
                   where id = $1 and status = 'pending'
                   returning *"#,
                id,
            )
            .fetch_optional(tx.conn())
            .await?;
            match cancelled {
                Some(row) => Ok(record(tx, ChangeKind::QuestionCancelled, row, None).await?.map(Change::Made)),
                None => unchanged(tx, id).await.map(Some),
            }
        })
    }

    /// Declines a pending question: the person refuses to answer (`reason`, when they said why).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn decline(
        &self,
        id: &str,
        reason: Option<&str>,
        declined_by: Option<&str>,
        via: Option<&str>,
    ) -> StoreResult<Change> {
        change!(&self.pool, |tx| async {
            if !timeout::timeout_if_due(tx, id).await? {
                return Ok(None);
            }
            let declined = sqlx::query_as!(
                QuestionRow,
                r#"update questions
                   set status = 'declined', decline_reason = $2, answered_by = $3, closed_at = now(),
                       resource_version = nextval('question_versions')
                   where id = $1 and status = 'pending'
                   returning *"#,
                id,
                reason,
                declined_by,
            )
            .fetch_optional(tx.conn())
            .await?;
            match declined {
                Some(row) => Ok(record(tx, ChangeKind::QuestionDeclined, row, via).await?.map(Change::Made)),
                None => unchanged(tx, id).await.map(Some),
            }
        })
    }

    /// One question.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn get(&self, id: &str) -> StoreResult<Option<Question>> {
        let row = sqlx::query_as!(QuestionRow, "select * from questions where id = $1", id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(Question::from))
    }

    /// How many questions there are of each status (every status, zero included).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn count_by_status(&self) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query!(
            r#"select s.status as "status!", count(q.id) as "count!"
               from unnest(array['pending', 'answered', 'cancelled', 'expired', 'declined']) as s(status)
               left join questions q on q.status = s.status
               group by s.status order by s.status"#
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|row| (row.status, row.count)).collect())
    }

    /// The newest resourceVersion.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn current_version(&self) -> StoreResult<i64> {
        let mut statements = self.pool.statements().await?;
        let version = current_version(&mut statements).await?;
        statements.done().await?;
        Ok(version)
    }
}

/// The newest resourceVersion, on `connection` (in its snapshot).
pub(super) async fn current_version(connection: &mut PgConnection) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!(r#"select coalesce(max(resource_version), 0) as "version!" from questions"#)
        .fetch_one(connection)
        .await?)
}

/// Why a conditional change matched nothing: the question is not pending, or does not exist.
async fn unchanged(tx: &mut FeedTx, id: &str) -> StoreResult<Change> {
    let row =
        sqlx::query_as!(QuestionRow, "select * from questions where id = $1", id).fetch_optional(tx.conn()).await?;
    Ok(match row {
        Some(row) => Change::Conflict(row.into()),
        None => Change::NotFound,
    })
}

pub mod announce;
pub mod deliveries;
pub mod history;
pub mod list;
pub mod record;
pub mod tasks;
pub mod tool_calls;
pub mod waiting;
pub mod watch_log;

// Declared after `change!`, which they use.
mod caller;
mod query_end;
mod timeout;
