//! Reading questions for a list (`GET /questions`, the page's tabs, MCP's pending list): a page of them in one
//! read-only snapshot with its resourceVersion, so a watch from there misses nothing and repeats nothing; for
//! the page, the exact count of pending questions under its search in the same snapshot.

use sqlx::{PgConnection, Postgres, Transaction};

use super::{QuestionFilter, QuestionStore, current_version};
use crate::{
    db::{self, StoreResult},
    questions::model::{Question, QuestionRow, QuestionStatus},
};

/// A page of questions and how many are pending under a search, read in one snapshot.
#[derive(Debug)]
pub struct Counted {
    /// The resourceVersion of the snapshot.
    pub version: i64,
    /// The page.
    pub questions: Vec<Question>,
    /// How many questions are pending under the search: exact, whatever the page size.
    pub pending: i64,
}

impl QuestionStore {
    /// Up to `limit` questions created after `after`, oldest first (or with `filter.closed` the most recently
    /// closed first), with the resourceVersion of the same snapshot.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list(&self, filter: &QuestionFilter, after: i64, limit: i64) -> StoreResult<(i64, Vec<Question>)> {
        let mut tx = self.snapshot().await?;
        let version = current_version(&mut tx).await?;
        let questions = rows(&mut tx, filter, after, limit).await?;
        tx.commit().await?;
        Ok((version, questions))
    }

    /// Like [`QuestionStore::list`], and how many questions are pending under `pending`'s search (its
    /// `status` and `closed` are not read), in the same snapshot: the page's count agrees with its list, and
    /// the watch from their resourceVersion counts on from there. The count reads the index on
    /// `(status, sequence_number)` only (an index-only scan of the pending questions; a search by recipient
    /// or sender reads theirs).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn list_counting_pending(
        &self,
        filter: &QuestionFilter,
        after: i64,
        limit: i64,
        pending: &QuestionFilter,
    ) -> StoreResult<Counted> {
        let mut tx = self.snapshot().await?;
        let version = current_version(&mut tx).await?;
        let questions = rows(&mut tx, filter, after, limit).await?;
        let pending = count_pending(&mut tx, pending).await?;
        tx.commit().await?;
        Ok(Counted { version, questions, pending })
    }

    /// A read-only transaction on one snapshot, planning each statement for its parameters.
    async fn snapshot(&self) -> StoreResult<Transaction<'static, Postgres>> {
        let mut tx = self.pool().begin_read_only_snapshot().await?;
        db::plan_per_execution(&mut tx).await?;
        Ok(tx)
    }
}

/// The page of questions `filter`, `after` and `limit` describe.
async fn rows(tx: &mut PgConnection, filter: &QuestionFilter, after: i64, limit: i64) -> StoreResult<Vec<Question>> {
    let rows = if filter.closed {
        let (closed_before, sequence_before) = filter.closed_before.unzip();
        sqlx::query_as!(
            QuestionRow,
            r#"select * from questions
               where status <> 'pending'
                 and ($1::text is null or recipient = $1)
                 and ($2::text is null or sender = $2)
                 and ($3::text is null or owner = $3)
                 and ($4::text is null or strpos(lower(content), lower($4)) > 0)
                 and ($5::text is null or query_name = $5)
                 and ($6::text is null or query_namespace = $6)
                 and ($7::timestamptz is null or (closed_at, sequence_number) < ($7, $8::bigint))
               order by closed_at desc, sequence_number desc
               limit $9"#,
            filter.recipient,
            filter.sender,
            filter.owner,
            filter.text,
            filter.query_name,
            filter.query_namespace,
            closed_before,
            sequence_before,
            limit,
        )
        .fetch_all(&mut *tx)
        .await?
    } else {
        sqlx::query_as!(
            QuestionRow,
            r#"select * from questions
               where ($1::text is null or status = $1)
                 and ($2::text is null or recipient = $2)
                 and ($3::text is null or sender = $3)
                 and ($6::text is null or owner = $6)
                 and ($7::text is null or strpos(lower(content), lower($7)) > 0)
                 and ($8::text is null or query_name = $8)
                 and ($9::text is null or query_namespace = $9)
                 and sequence_number > $4
               order by sequence_number
               limit $5"#,
            filter.status.map(QuestionStatus::as_str),
            filter.recipient,
            filter.sender,
            after,
            limit,
            filter.owner,
            filter.text,
            filter.query_name,
            filter.query_namespace,
        )
        .fetch_all(&mut *tx)
        .await?
    };
    Ok(rows.into_iter().map(Question::from).collect())
}

/// How many questions are pending under `filter`'s search.
async fn count_pending(tx: &mut PgConnection, filter: &QuestionFilter) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "count!" from questions
           where status = 'pending'
             and ($1::text is null or recipient = $1)
             and ($2::text is null or sender = $2)
             and ($3::text is null or owner = $3)
             and ($4::text is null or strpos(lower(content), lower($4)) > 0)
             and ($5::text is null or query_name = $5)
             and ($6::text is null or query_namespace = $6)"#,
        filter.recipient,
        filter.sender,
        filter.owner,
        filter.text,
        filter.query_name,
        filter.query_namespace,
    )
    .fetch_one(tx)
    .await?)
}
