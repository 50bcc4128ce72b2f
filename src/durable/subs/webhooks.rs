//! SQL for webhook delivery (the worker is [`super::delivery`]): taking the next due wake, marked as being
//! delivered so another replica's worker passes it by; recording the receiver's answer, fenced by the wake
//! it answers; and when the next wake falls due. The wakes themselves are [`super::wakes`].

use super::{
    model::Kind,
    store::links,
    wakes::{Wake, hold, lock, settle, take_acks},
};
use crate::db::{StoreResult, feed::FeedTx};

/// The next webhook wake to deliver, taken for delivery: held as `delivered` for its lease plus `answer_ms`
/// (the receiver's time to answer), so another replica's worker passes it by while this one POSTs it, and a
/// worker that dies meanwhile leaves it to be woken again. A wake whose lease ran out (a receiver that never
/// called back, a pull-wake worker that never acked) is settled on the way: `Some(None)`.
pub async fn take_webhook(tx: &mut FeedTx, answer_ms: i64) -> StoreResult<Option<Option<Wake>>> {
    let id = sqlx::query_scalar!(
        "select id from ds_subscriptions
         where (kind = 'webhook' and wake_state = 'due' and deliver_after <= clock_timestamp())
            or (wake_state in ('delivered', 'claimed') and lease_until <= clock_timestamp())
         order by coalesce(deliver_after, lease_until) limit 1 for update skip locked"
    )
    .fetch_optional(tx.conn())
    .await?;
    let Some(id) = id else { return Ok(None) };
    let mut subscription = lock(tx.conn(), &id).await?.expect("held");
    if subscription.wake_state != "due" {
        if !settle(tx, &subscription).await? || subscription.kind != Kind::Webhook {
            return Ok(Some(None));
        }
        subscription = lock(tx.conn(), &id).await?.expect("held");
    }
    let found = links(&mut *tx.conn(), &id).await?;
    hold(tx.conn(), &subscription, ("delivered", None), &found, answer_ms).await?;
    let subscription = lock(tx.conn(), &id).await?.expect("held");
    Ok(Some(Some(Wake { subscription, links: found })))
}

/// What a receiver's answer to `wake` comes to, unless the wake moved on meanwhile (its callback came first,
/// or it was woken again): `done` acknowledges the tails it reported and lets it go; `taken` holds it for
/// the callback, its lease counted from now; neither (a failure) makes it due again after a backoff of 1 s
/// doubling to 60 s, each ±20 %.
pub async fn answered(tx: &mut FeedTx, wake: &Wake, done: bool, taken: bool) -> StoreResult<()> {
    let Some(subscription) = lock(tx.conn(), &wake.subscription.id).await? else { return Ok(()) };
    let sent = &wake.subscription;
    if subscription.wake_state != "delivered"
        || subscription.wake_id != sent.wake_id
        || subscription.generation != sent.generation
    {
        return Ok(());
    }
    if done {
        let taken: Vec<(String, i64)> = wake.links.iter().map(|link| (link.path.clone(), link.tail)).collect();
        take_acks(tx.conn(), &subscription.id, &taken).await?;
        settle(tx, &subscription).await?;
    } else if taken {
        hold(tx.conn(), &subscription, ("delivered", None), &wake.links, 0).await?;
        sqlx::query!("update ds_subscriptions set failing = false, attempts = 0 where id = $1", subscription.id)
            .execute(tx.conn())
            .await?;
    } else {
        sqlx::query!(
            "update ds_subscriptions
             set wake_state = 'due', lease_until = null, attempts = attempts + 1, failing = true,
                 deliver_after = clock_timestamp()
                     + make_interval(secs => least(60, power(2, least(attempts, 6))) * (0.8 + random() * 0.4))
             where id = $1",
            subscription.id
        )
        .execute(tx.conn())
        .await?;
    }
    Ok(())
}

/// The next time a wake falls due (a retry, or a lease running out), for the delivery worker's timer.
pub async fn next_due_in_ms(pool: &crate::db::pool::Pool) -> StoreResult<Option<i64>> {
    let due = sqlx::query_scalar!(
        r#"select greatest(0, extract(epoch from (min(case wake_state when 'due' then deliver_after else lease_until end)
                                              - clock_timestamp())) * 1000)::bigint as "ms"
           from ds_subscriptions
           where (kind = 'webhook' and wake_state = 'due') or wake_state in ('delivered', 'claimed')"#
    )
    .fetch_one(pool)
    .await?;
    Ok(due)
}
