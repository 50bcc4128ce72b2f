//! The request pool every store queries through: sqlx's pool, straight to PostgreSQL, or through a pooler in
//! transaction mode (PgBouncer before 1.21, CloudNativePG's `Pooler`) when `DATABASE_LISTEN_URL` is set.
//!
//! Through such a pooler a client holds a server connection only inside a transaction. sqlx sends each
//! statement as two exchanges (Parse/Describe, then Bind/Execute, each ending in a Sync) under a statement
//! name of its own per client connection, so outside a transaction the second exchange may reach another
//! server connection, where that name is missing or is another client's statement (measured: errors, and
//! rows of another client's statement without an error). So in pooled mode every statement runs in a
//! transaction, and every transaction opens with one simple query that also drops whatever statements the
//! server connection holds and sets the timeouts a direct connection gets at its start (a pooler drops
//! startup settings). Direct, it is sqlx's pool unchanged.

use std::sync::Arc;

use futures::{TryStreamExt, future::BoxFuture, stream::BoxStream};
use sqlx::{
    AssertSqlSafe, Either, Error, Execute, Executor, PgConnection, PgPool, Postgres, Transaction,
    pool::PoolConnection,
    postgres::{PgQueryResult, PgRow, PgStatement, PgTypeInfo},
};

/// The request pool; cheap to clone.
#[derive(Debug, Clone)]
pub struct Pool {
    inner: PgPool,
    /// Connections of their own on the server, for session locks: the request pool itself when direct.
    sessions: PgPool,
    /// Through a pooler: how each transaction begins (see the module docs), and how a read-only one does.
    pooled: Option<Arc<Begin>>,
}

#[derive(Debug)]
struct Begin {
    read_write: String,
    read_only: String,
}

impl From<PgPool> for Pool {
    fn from(inner: PgPool) -> Self {
        Pool { sessions: inner.clone(), inner, pooled: None }
    }
}

impl Pool {
    /// A pool through a pooler in transaction mode, whose transactions begin with `settings` (`SET LOCAL …`
    /// statements) and, when they may write, `enter_epoch`.
    pub fn through_pooler(inner: PgPool, sessions: PgPool, settings: &str, enter_epoch: &str) -> Self {
        let begin = |head: &str, tail: &str| format!("{head}; deallocate all; {settings}{tail}");
        let pooled = Begin {
            read_write: begin("begin", &format!("; {enter_epoch}")),
            read_only: begin("begin isolation level repeatable read, read only", ""),
        };
        Pool { inner, sessions, pooled: Some(Arc::new(pooled)) }
    }

    /// Whether statements go through a pooler.
    pub fn is_pooled(&self) -> bool {
        self.pooled.is_some()
    }

    /// sqlx's pool, for its size and idle counts.
    pub fn inner(&self) -> &PgPool {
        &self.inner
    }

    /// Where a session lock is taken (a connection of its own on the server, never one a pooler shares).
    pub fn sessions(&self) -> &PgPool {
        &self.sessions
    }

    /// Closes the pools.
    pub async fn close(&self) {
        self.inner.close().await;
        self.sessions.close().await;
    }

    /// A connection for a few statements of the caller's own: sqlx's pooled connection when direct, a
    /// transaction through a pooler. What they wrote stays only once [`Statements::done`] is called.
    pub async fn statements(&self) -> Result<Statements, Error> {
        Ok(match &self.pooled {
            None => Statements::Direct(self.inner.acquire().await?),
            Some(_) => Statements::Pooled(self.begin().await?),
        })
    }

    /// Begins a transaction.
    pub async fn begin(&self) -> Result<Transaction<'static, Postgres>, Error> {
        match &self.pooled {
            None => self.inner.begin().await,
            Some(begin) => self.inner.begin_with(AssertSqlSafe(begin.read_write.clone())).await,
        }
    }

    /// Begins a read-only transaction whose statements all see one snapshot.
    pub async fn begin_read_only_snapshot(&self) -> Result<Transaction<'static, Postgres>, Error> {
        let statement = match &self.pooled {
            None => "begin isolation level repeatable read, read only".to_owned(),
            Some(begin) => begin.read_only.clone(),
        };
        self.inner.begin_with(AssertSqlSafe(statement)).await
    }
}

impl<'p> Executor<'p> for &'_ Pool {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, Error>>
    where
        E: 'q + Execute<'q, Postgres>,
    {
        if self.pooled.is_none() {
            return (&self.inner).fetch_many(query);
        }
        // The rows are read whole before the transaction ends: every caller reads bounded pages.
        let this = self.clone();
        Box::pin(
            futures::stream::once(async move {
                let mut tx = this.begin().await?;
                let rows: Vec<_> = tx.fetch_many(query).try_collect().await?;
                tx.commit().await?;
                Ok::<_, Error>(futures::stream::iter(rows.into_iter().map(Ok)))
            })
            .try_flatten(),
        )
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<PgRow>, Error>>
    where
        E: 'q + Execute<'q, Postgres>,
    {
        if self.pooled.is_none() {
            return (&self.inner).fetch_optional(query);
        }
        let this = self.clone();
        Box::pin(async move {
            let mut tx = this.begin().await?;
            let row = tx.fetch_optional(query).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, Error>>
    where
        'p: 'e,
    {
        if self.pooled.is_none() {
            return (&self.inner).prepare_with(sql, parameters);
        }
        let this = self.clone();
        Box::pin(async move {
            let mut tx = this.begin().await?;
            let statement = tx.prepare_with(sql, parameters).await?;
            tx.commit().await?;
            Ok(statement)
        })
    }

    // Required while sqlx's `offline` feature is on (the macros turn it on); they describe at compile time.
    fn describe<'e>(self, sql: sqlx::SqlStr) -> BoxFuture<'e, Result<sqlx::Describe<Postgres>, Error>> {
        if self.pooled.is_none() {
            return (&self.inner).describe(sql);
        }
        let this = self.clone();
        Box::pin(async move {
            let mut tx = this.begin().await?;
            let described = tx.describe(sql).await?;
            tx.commit().await?;
            Ok(described)
        })
    }
}

/// See [`Pool::statements`].
#[derive(Debug)]
pub enum Statements {
    /// Each statement commits by itself.
    Direct(PoolConnection<Postgres>),
    /// Through a pooler: one transaction, committed by [`Statements::done`].
    Pooled(Transaction<'static, Postgres>),
}

impl Statements {
    /// Keeps what the statements wrote.
    pub async fn done(self) -> Result<(), Error> {
        match self {
            Statements::Direct(_) => Ok(()),
            Statements::Pooled(tx) => tx.commit().await,
        }
    }
}

impl std::ops::Deref for Statements {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match self {
            Statements::Direct(connection) => connection,
            Statements::Pooled(tx) => tx,
        }
    }
}

impl std::ops::DerefMut for Statements {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match self {
            Statements::Direct(connection) => connection,
            Statements::Pooled(tx) => tx,
        }
    }
}
