//! SQL for subscriptions themselves: the signing keys every replica shares, creating (with the streams its
//! pattern already matches), reading, deleting, and linking or unlinking streams. Wakes and leases are in
//! [`super::wakes`].

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::model::{Kind, Wanted};
use crate::{db::StoreResult, durable::DurableStore};

/// A subscription as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Its id.
    pub id: String,
    /// Webhook or pull-wake.
    pub kind: Kind,
    /// The glob it follows.
    pub pattern: Option<String>,
    /// A webhook's URL.
    pub webhook_url: Option<String>,
    /// A pull-wake's wake stream.
    pub wake_stream: Option<String>,
    /// Its lease.
    pub lease_ttl_ms: i64,
    /// What it is for.
    pub description: Option<String>,
    /// What a repeated `PUT` is compared by.
    pub config_hash: String,
    /// `{scheme}://{host}/v1/stream/` as its creator addressed the broker.
    pub base_url: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// The current wake's generation (0: never woken).
    pub generation: i64,
    /// The current wake's id.
    pub wake_id: Option<String>,
    /// `idle`, `due`, `delivered` or `claimed`.
    pub wake_state: String,
    /// Who holds a claim.
    pub holder: Option<String>,
    /// Whether a lease is held and not yet run out.
    pub leased: bool,
    /// The last delivery failed.
    pub failing: bool,
}

/// One stream a subscription follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The stream's path.
    pub path: String,
    /// `glob` (its pattern matched) or `explicit` (named).
    pub link_type: String,
    /// The position acknowledged (-1: before the first).
    pub acked: i64,
    /// The stream's tail now (0 while it does not exist).
    pub tail: i64,
}

impl Link {
    /// Whether the stream holds what was not acknowledged.
    pub fn has_pending(&self) -> bool {
        self.tail > self.acked.max(0)
    }
}

/// What a `PUT` came to.
#[derive(Debug)]
pub enum Put {
    /// Made (201).
    New(Subscription),
    /// It was there as asked (200).
    Same(Subscription),
    /// It was there, made otherwise (409).
    Different,
}

/// Reads a subscription row (the query's columns in this order).
macro_rules! subscription_of {
    ($row:expr) => {{
        let row = $row;
        Subscription {
            id: row.id,
            kind: Kind::parse(&row.kind).unwrap_or(Kind::Webhook),
            pattern: row.pattern,
            webhook_url: row.webhook_url,
            wake_stream: row.wake_stream,
            lease_ttl_ms: row.lease_ttl_ms,
            description: row.description,
            config_hash: row.config_hash,
            base_url: row.base_url,
            created_at: row.created_at,
            generation: row.generation,
            wake_id: row.wake_id,
            wake_state: row.wake_state,
            holder: row.holder,
            leased: row.leased,
            failing: row.failing,
        }
    }};
}

impl DurableStore {
    /// The signing keys every replica shares: `(Ed25519 seed, HMAC key)`, stored from `fresh` by the first
    /// replica to ask.
    pub async fn signing_keys(&self, fresh: (&[u8], &[u8])) -> StoreResult<(Vec<u8>, Vec<u8>)> {
        sqlx::query!(
            "insert into ds_signing_keys (ed25519_seed, hmac_key) values ($1, $2) on conflict (singleton) do nothing",
            fresh.0,
            fresh.1
        )
        .execute(&self.pool)
        .await?;
        let row = sqlx::query!("select ed25519_seed, hmac_key from ds_signing_keys").fetch_one(&self.pool).await?;
        Ok((row.ed25519_seed, row.hmac_key))
    }

    /// Creates subscription `id` as `wanted` asks (linked to the streams its pattern matches and those it
    /// names, at their tails: what they hold now is not news), or finds it so.
    pub async fn put_subscription(&self, id: &str, wanted: &Wanted, base_url: &str) -> StoreResult<Put> {
        let mut tx = self.pool.begin().await?;
        let hash = wanted.config_hash();
        let inserted = sqlx::query!(
            "insert into ds_subscriptions (id, kind, pattern, pattern_regex, webhook_url, wake_stream, lease_ttl_ms,
                                           description, config_hash, base_url)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) on conflict (id) do nothing",
            id,
            wanted.kind.name(),
            wanted.pattern,
            wanted.pattern_regex,
            wanted.webhook_url,
            wanted.wake_stream,
            wanted.lease_ttl_ms,
            wanted.description,
            hash,
            base_url,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if inserted {
            if let Some(regex) = &wanted.pattern_regex {
                sqlx::query!(
                    "insert into ds_subscription_links (subscription_id, path, link_type, acked_position)
                     select $1, path, 'glob', tail from ds_streams
                     where path ~ $2 and not deleted and not ds_expired(ttl_seconds, expires_at, accessed_at)
                     on conflict do nothing",
                    id,
                    regex
                )
                .execute(&mut *tx)
                .await?;
            }
            link(&mut tx, id, &wanted.streams).await?;
        }
        let found = subscription(&mut *tx, id, false).await?;
        tx.commit().await?;
        Ok(match found {
            Some(found) if inserted => Put::New(found),
            Some(found) if found.config_hash == hash => Put::Same(found),
            _ => Put::Different,
        })
    }

    /// Subscription `id`.
    pub async fn subscription(&self, id: &str) -> StoreResult<Option<Subscription>> {
        subscription(&self.pool, id, false).await
    }

    /// The streams subscription `id` follows, with their tails, by path.
    pub async fn links(&self, id: &str) -> StoreResult<Vec<Link>> {
        links(&self.pool, id).await
    }

    /// Deletes subscription `id`; false when there was none.
    pub async fn delete_subscription(&self, id: &str) -> StoreResult<bool> {
        let deleted = sqlx::query!("delete from ds_subscriptions where id = $1", id).execute(&self.pool).await?;
        Ok(deleted.rows_affected() == 1)
    }

    /// Links `paths` to subscription `id` explicitly, at their tails; false when there is no such subscription.
    pub async fn add_streams(&self, id: &str, paths: &[String]) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        if sqlx::query!("select 1 as one from ds_subscriptions where id = $1 for update", id)
            .fetch_optional(&mut *tx)
            .await?
            .is_none()
        {
            return Ok(false);
        }
        link(&mut tx, id, paths).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Removes the explicit link of `path` from subscription `id`: the link stays, as its pattern's, where the
    /// pattern matches the path (its acknowledged position with it). False when there is no such subscription.
    pub async fn remove_stream(&self, id: &str, path: &str) -> StoreResult<bool> {
        let row = sqlx::query!(
            r#"with globbed as (
                   update ds_subscription_links l set link_type = 'glob'
                   from ds_subscriptions s
                   where l.subscription_id = $1 and l.path = $2 and l.link_type = 'explicit'
                     and s.id = l.subscription_id and s.pattern_regex is not null and l.path ~ s.pattern_regex
                   returning l.path
               ), removed as (
                   delete from ds_subscription_links
                   where subscription_id = $1 and path = $2 and link_type = 'explicit'
                     and not exists (select 1 from globbed)
               )
               select exists (select 1 from ds_subscriptions where id = $1) as "found!""#,
            id,
            path
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(row.found)
    }
}

async fn link(conn: &mut PgConnection, id: &str, paths: &[String]) -> StoreResult<()> {
    sqlx::query!(
        "insert into ds_subscription_links (subscription_id, path, link_type, acked_position)
         select $1, p, 'explicit', coalesce((select tail from ds_streams where path = p and not deleted), 0)
         from unnest($2::text[]) as p
         on conflict (subscription_id, path) do update set link_type = 'explicit'",
        id,
        paths
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Subscription `id`, read with `conn` (`lock`: held for the transaction).
pub(super) async fn subscription<'e>(
    conn: impl sqlx::PgExecutor<'e>,
    id: &str,
    lock: bool,
) -> StoreResult<Option<Subscription>> {
    // Two literals, as `query!` needs: the same columns, with and without the row lock.
    let row = if lock {
        sqlx::query!(
            r#"select id, kind, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash, base_url,
                  created_at, generation, wake_id, wake_state, holder,
                  coalesce(lease_until > now(), false) as "leased!", failing
           from ds_subscriptions where id = $1 for update"#,
            id
        )
        .fetch_optional(conn)
        .await?
        .map(|row| subscription_of!(row))
    } else {
        sqlx::query!(
            r#"select id, kind, pattern, webhook_url, wake_stream, lease_ttl_ms, description, config_hash, base_url,
                  created_at, generation, wake_id, wake_state, holder,
                  coalesce(lease_until > now(), false) as "leased!", failing
           from ds_subscriptions where id = $1"#,
            id
        )
        .fetch_optional(conn)
        .await?
        .map(|row| subscription_of!(row))
    };
    Ok(row)
}

/// Subscription `id`'s links, read with `conn`.
pub(super) async fn links<'e>(conn: impl sqlx::PgExecutor<'e>, id: &str) -> StoreResult<Vec<Link>> {
    let rows = sqlx::query!(
        r#"select l.path, l.link_type, l.acked_position, coalesce(s.tail, 0) as "tail!"
           from ds_subscription_links l
           left join ds_streams s on s.path = l.path and not s.deleted
           where l.subscription_id = $1 order by l.path"#,
        id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Link { path: row.path, link_type: row.link_type, acked: row.acked_position, tail: row.tail })
        .collect())
}
