//! SQL for wakes and leases: an append wakes the idle subscriptions that follow its stream (in the append's
//! own transaction, so a committed append is never missed and a wake never reports what did not commit);
//! a pull-wake's worker claims, acknowledges and releases; a webhook's callback acknowledges. Each turn holds
//! the subscription's row, so one wake is delivered or claimed once, whichever replica is asked.

use bytes::Bytes;
use sqlx::PgConnection;

use super::{
    model::{Ack, Kind},
    store::{Link, Subscription, links, subscription},
};
use crate::{
    db::{
        StoreResult,
        feed::{Feed, FeedTx},
        retry::{Attempt, Retries, in_feed_tx},
    },
    durable::DurableStore,
};

/// The key a transaction names in the durable feed's notification when a webhook became due: every
/// replica's delivery worker looks for work then.
pub const WEBHOOK_DUE_KEY: &str = "subscriptions";

/// Why a claim, an ack, a callback or a release was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeRefusal {
    /// No such subscription (404).
    NotFound,
    /// The request is for a wake that is not the current one, or not held (409 `FENCED`).
    Fenced,
    /// An acknowledgement names a stream it does not follow, or an offset outside what it may ack (409).
    InvalidOffset(String),
    /// Nothing to claim (409 `NO_PENDING_WORK`).
    NoPendingWork,
    /// Another worker holds the lease (409 `ALREADY_CLAIMED`).
    AlreadyClaimed { holder: Option<String>, generation: i64 },
    /// A claim of a webhook subscription, or a callback of a pull-wake one (400).
    WrongKind,
}

/// A wake as a worker is given it.
#[derive(Debug, Clone)]
pub struct Wake {
    /// The subscription.
    pub subscription: Subscription,
    /// The streams it follows, with their tails.
    pub links: Vec<Link>,
}

/// Subscription `id`, held for the transaction.
pub(super) async fn lock(conn: &mut PgConnection, id: &str) -> StoreResult<Option<Subscription>> {
    subscription(conn, id, true).await
}

/// In the transaction of appends to `paths`: links each to the subscriptions whose pattern matches
/// it and that do not follow it yet (a new stream: all it holds is news), and wakes those following any of
/// them that are idle (or whose lease ran out).
pub async fn on_append(tx: &mut FeedTx, paths: &[&str]) -> StoreResult<()> {
    sqlx::query!(
        "insert into ds_subscription_links (subscription_id, path, link_type, acked_position)
         select s.id, p.path, 'glob', -1
         from ds_subscriptions s join unnest($1::text[]) as p (path) on p.path ~ s.pattern_regex
         where s.pattern_regex is not null
         on conflict do nothing",
        paths as &[&str]
    )
    .execute(tx.conn())
    .await?;
    // Every subscription following the streams is locked, woken or not: one settling its wake (an ack, a
    // release) then reads these appends' tails, or these appends find it idle and wake it.
    let woken = sqlx::query!(
        r#"with locked as (
               select id, (wake_state = 'idle'
                           or (wake_state in ('delivered', 'claimed') and lease_until <= clock_timestamp())) as woke
               from ds_subscriptions s
               where exists (select 1 from ds_subscription_links l
                             where l.subscription_id = s.id and l.path = any($1::text[]))
               order by id
               for update
           )
           update ds_subscriptions s
           set generation = generation + 1, wake_id = 'w_' || replace(gen_random_uuid()::text, '-', ''),
               wake_state = 'due', deliver_after = clock_timestamp(), attempts = 0, holder = null,
               lease_until = null, snapshot = null
           from locked where s.id = locked.id and locked.woke
           returning s.id, s.kind, s.wake_stream, s.generation,
                     (select min(l.path) from ds_subscription_links l
                      where l.subscription_id = s.id and l.path = any($1::text[])) as "path!""#,
        paths as &[&str]
    )
    .fetch_all(tx.conn())
    .await?;
    for row in woken {
        announce(tx, &row.id, Kind::parse(&row.kind), row.wake_stream.as_deref(), &row.path, row.generation).await?;
    }
    Ok(())
}

/// In the transaction that creates a stream at `path`: a stream deleted or expired there before was another,
/// so what its followers acknowledged of it does not count for this one.
pub async fn new_stream(tx: &mut FeedTx, path: &str) -> StoreResult<()> {
    sqlx::query!("update ds_subscription_links set acked_position = -1 where path = $1 and acked_position <> -1", path)
        .execute(tx.conn())
        .await?;
    Ok(())
}

/// Tells of a new wake: a webhook's delivery workers are notified; a pull-wake's wake event is appended to
/// its wake stream (when it is there and open), as the broker, with no further wakes of its own.
async fn announce(
    tx: &mut FeedTx,
    id: &str,
    kind: Option<Kind>,
    wake_stream: Option<&str>,
    path: &str,
    generation: i64,
) -> StoreResult<()> {
    match (kind, wake_stream) {
        (Some(Kind::PullWake), Some(wake_stream)) => {
            let event = serde_json::json!({
                "type": "wake", "subscription_id": id, "stream": path, "generation": generation,
                "ts": chrono::Utc::now().timestamp_millis(),
            });
            crate::durable::writes::append_as_broker(tx, wake_stream, Bytes::from(event.to_string())).await?;
        }
        _ => tx.wrote_key(WEBHOOK_DUE_KEY, 0, 0),
    }
    Ok(())
}

/// A new wake of `subscription`, which has pending work: announced like an append's.
async fn rewake(tx: &mut FeedTx, subscription: &Subscription, links: &[Link]) -> StoreResult<()> {
    let generation = sqlx::query_scalar!(
        "update ds_subscriptions
         set generation = generation + 1, wake_id = 'w_' || replace(gen_random_uuid()::text, '-', ''),
             wake_state = 'due', deliver_after = clock_timestamp(), attempts = 0, holder = null,
             lease_until = null, snapshot = null
         where id = $1 returning generation",
        subscription.id
    )
    .fetch_one(tx.conn())
    .await?;
    let path = links.iter().find(|link| link.has_pending()).map_or("", |link| link.path.as_str());
    let wake_stream = subscription.wake_stream.as_deref();
    announce(tx, &subscription.id, Some(subscription.kind), wake_stream, path, generation).await
}

/// Back to idle: nothing is asked of anyone.
async fn rest(conn: &mut PgConnection, id: &str) -> StoreResult<()> {
    sqlx::query!(
        "update ds_subscriptions set wake_state = 'idle', holder = null, lease_until = null, snapshot = null,
                failing = false, attempts = 0
         where id = $1",
        id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Holds the current wake for its lease (plus `extra_ms`) from now, as `state`, by `holder`, with the tails it
/// reported.
pub(super) async fn hold(
    conn: &mut PgConnection,
    subscription: &Subscription,
    (state, holder): (&str, Option<&str>),
    links: &[Link],
    extra_ms: i64,
) -> StoreResult<()> {
    let snapshot: serde_json::Map<String, serde_json::Value> =
        links.iter().map(|link| (link.path.clone(), link.tail.into())).collect();
    sqlx::query!(
        "update ds_subscriptions
         set wake_state = $2, holder = $3,
             lease_until = clock_timestamp() + make_interval(secs => $4::float8 / 1000),
             snapshot = $5
         where id = $1",
        subscription.id,
        state,
        holder,
        (subscription.lease_ttl_ms + extra_ms) as f64,
        serde_json::Value::Object(snapshot),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether `acks` may be taken: each names a stream followed, at an offset from what was acknowledged to
/// the tail.
fn check_acks(links: &[Link], acks: &[Ack]) -> Result<Vec<(String, i64)>, WakeRefusal> {
    acks.iter()
        .map(|ack| {
            let link = links.iter().find(|link| link.path == ack.stream);
            let position = super::model::position_of(&ack.offset);
            match (link, position) {
                (Some(link), Some(position)) if position >= link.acked && position <= link.tail => {
                    Ok((ack.stream.clone(), position))
                }
                (None, _) => Err(WakeRefusal::InvalidOffset(format!("{}: not a stream it follows", ack.stream))),
                _ => Err(WakeRefusal::InvalidOffset(format!("{}: offset {} out of range", ack.stream, ack.offset))),
            }
        })
        .collect()
}

pub(super) async fn take_acks(conn: &mut PgConnection, id: &str, acks: &[(String, i64)]) -> StoreResult<()> {
    let (paths, positions): (Vec<String>, Vec<i64>) = acks.iter().cloned().unzip();
    sqlx::query!(
        "update ds_subscription_links l set acked_position = greatest(l.acked_position, a.position)
         from unnest($2::text[], $3::bigint[]) as a (path, position)
         where l.subscription_id = $1 and l.path = a.path",
        id,
        &paths,
        &positions
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A pull-wake worker's claim of subscription `id`'s pending work.
async fn claim(tx: &mut FeedTx, id: &str, worker: &str) -> StoreResult<Result<Wake, WakeRefusal>> {
    let Some(subscription) = lock(tx.conn(), id).await? else { return Ok(Err(WakeRefusal::NotFound)) };
    if subscription.kind != Kind::PullWake {
        return Ok(Err(WakeRefusal::WrongKind));
    }
    if subscription.wake_state == "claimed" && subscription.leased {
        let refusal = WakeRefusal::AlreadyClaimed { holder: subscription.holder, generation: subscription.generation };
        return Ok(Err(refusal));
    }
    let found = links(&mut *tx.conn(), id).await?;
    if subscription.wake_state != "due" {
        // Idle, or a claim that ran out: there is work only if a stream holds more than was acknowledged.
        if !found.iter().any(Link::has_pending) {
            return Ok(Err(WakeRefusal::NoPendingWork));
        }
        sqlx::query!(
            "update ds_subscriptions
             set generation = generation + 1, wake_id = 'w_' || replace(gen_random_uuid()::text, '-', '')
             where id = $1",
            id
        )
        .execute(tx.conn())
        .await?;
    }
    hold(tx.conn(), &subscription, ("claimed", Some(worker)), &found, 0).await?;
    let subscription = lock(tx.conn(), id).await?.expect("held");
    Ok(Ok(Wake { subscription, links: found }))
}

/// Whether `wake_id` and `generation` (a request's, and the token's `epoch`) name the wake `subscription`
/// holds as `state`.
fn current(subscription: &Subscription, state: &str, wake_id: &str, generation: i64, epoch: i64) -> bool {
    subscription.wake_state == state
        && subscription.wake_id.as_deref() == Some(wake_id)
        && subscription.generation == generation
        && epoch == generation
}

/// What an acknowledgement came to: whether another wake follows at once.
pub type NextWake = bool;

/// A worker's acknowledgement (`held_as`: `claimed` for a pull-wake's ack, `delivered` for a webhook's
/// callback) of the wake `wake_id`/`generation`, with its token's `epoch`; `done` lets the wake go.
async fn acknowledge(
    tx: &mut FeedTx,
    id: &str,
    held_as: &str,
    (wake_id, generation, epoch): WakeNamed<'_>,
    acks: &[Ack],
    done: bool,
) -> StoreResult<Result<NextWake, WakeRefusal>> {
    let Some(subscription) = lock(tx.conn(), id).await? else { return Ok(Err(WakeRefusal::NotFound)) };
    if !current(&subscription, held_as, wake_id, generation, epoch) {
        return Ok(Err(WakeRefusal::Fenced));
    }
    let found = links(&mut *tx.conn(), id).await?;
    let taken = match check_acks(&found, acks) {
        Ok(taken) => taken,
        Err(refusal) => return Ok(Err(refusal)),
    };
    take_acks(tx.conn(), id, &taken).await?;
    if !done {
        hold(tx.conn(), &subscription, (held_as, subscription.holder.as_deref()), &found, 0).await?;
        return Ok(Ok(false));
    }
    settle(tx, &subscription).await.map(Ok)
}

/// The wake is let go: a new one at once if work is pending, else idle. Whether a new one began.
pub(super) async fn settle(tx: &mut FeedTx, subscription: &Subscription) -> StoreResult<NextWake> {
    let after = links(&mut *tx.conn(), &subscription.id).await?;
    if after.iter().any(Link::has_pending) {
        rewake(tx, subscription, &after).await?;
        return Ok(true);
    }
    rest(tx.conn(), &subscription.id).await?;
    Ok(false)
}

/// A pull-wake worker lets its claim go without finishing it.
async fn release(
    tx: &mut FeedTx,
    id: &str,
    (wake_id, generation, epoch): WakeNamed<'_>,
) -> StoreResult<Result<(), WakeRefusal>> {
    let Some(subscription) = lock(tx.conn(), id).await? else { return Ok(Err(WakeRefusal::NotFound)) };
    if !current(&subscription, "claimed", wake_id, generation, epoch) {
        return Ok(Err(WakeRefusal::Fenced));
    }
    settle(tx, &subscription).await?;
    Ok(Ok(()))
}

/// A worker's turn on a subscription: one transaction, retried when it lost a race.
const TURN: Retries = Retries::claim("subscription");

/// The wake a request names: its id, its generation, and the `epoch` of the token it came with.
pub type WakeNamed<'a> = (&'a str, i64, i64);

impl DurableStore {
    /// A pull-wake worker's claim of subscription `id`'s pending work.
    pub async fn claim_wake(&self, id: &str, worker: &str) -> StoreResult<Result<Wake, WakeRefusal>> {
        in_feed_tx!(&self.pool, Feed::Durable, TURN, |tx| async { Ok(Attempt::Commit(claim(tx, id, worker).await?)) })
    }

    /// An acknowledgement of the wake `named`: a pull-wake's ack (`held_as` `claimed`) or a webhook's callback
    /// (`delivered`).
    pub async fn acknowledge_wake(
        &self,
        id: &str,
        held_as: &str,
        named: WakeNamed<'_>,
        acks: &[Ack],
        done: bool,
    ) -> StoreResult<Result<NextWake, WakeRefusal>> {
        in_feed_tx!(&self.pool, Feed::Durable, TURN, |tx| async {
            Ok(Attempt::Commit(acknowledge(tx, id, held_as, named, acks, done).await?))
        })
    }

    /// A pull-wake worker lets the wake `named` go.
    pub async fn release_wake(&self, id: &str, named: WakeNamed<'_>) -> StoreResult<Result<(), WakeRefusal>> {
        in_feed_tx!(&self.pool, Feed::Durable, TURN, |tx| async { Ok(Attempt::Commit(release(tx, id, named).await?)) })
    }
}
