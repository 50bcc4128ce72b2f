//! PostgreSQL, the broker's only state: the pool, migrations, the store error, and the fan-out machinery
//! (one LISTEN connection per replica feeding an in-process hub).

pub mod embedded;
pub mod feeds;
pub mod follow;
pub mod hub;
pub mod listener;

use std::{str::FromStr, time::Duration};

use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// The schema, embedded at compile time from `migrations/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// What a store call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Postgres could not be reached (connection refused, pool timed out, connection lost).
    #[error("database unavailable: {0}")]
    Unavailable(sqlx::Error),
    /// Postgres answered with an error.
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// The replica is shutting down and takes no more writes.
    #[error("shutting down")]
    ShuttingDown,
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match error {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => {
                StoreError::Unavailable(error)
            }
            other => StoreError::Database(other),
        }
    }
}

/// Result of a store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// Connect options for `url`, named so connections can be told apart in `pg_stat_activity`.
pub fn connect_options(url: &str, application_name: &str) -> Result<PgConnectOptions, sqlx::Error> {
    Ok(PgConnectOptions::from_str(url)?
        .application_name(application_name)
        // Our list queries filter with `($1::text is null or column = $1)`; custom plans fold the
        // null test away so the per-column indexes are used even after a statement is cached.
        .options([("plan_cache_mode", "force_custom_plan")]))
}

/// The request pool of one replica.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections.max(2))
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(connect_options(url, "ark-broker")?)
        .await
}

/// Applies pending migrations. sqlx holds a Postgres advisory lock meanwhile, so replicas that start at
/// the same moment apply them once and all come up.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}
