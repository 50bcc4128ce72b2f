//! This replica's webhook worker: takes the next due webhook wake (marked as being delivered in a short
//! transaction, so another replica's worker passes it by), POSTs it signed to the subscription's URL outside
//! any transaction, and records what came of it — the receiver's `{"done": true}` acknowledges what it was
//! told of, any other 2xx holds the wake for its callback, a failure is tried again with backoff (1 s
//! doubling to 60 s). The durable feed's tail rings it when a wake falls due; a timer takes retries and
//! leases that ran out (a pull-wake claim's too).

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};

use super::{Subscriptions, keys::Keys, model::offset_of, store::Link, wakes::Wake, webhooks};
use crate::{
    db::{
        StoreResult,
        feed::Feed,
        retry::{Attempt, Retries, in_feed_tx},
    },
    durable::DurableStore,
};

/// How long a receiver has to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the worker sleeps without a ring: a notification lost with a LISTEN connection is made up for.
const MOST_IDLE: Duration = Duration::from_secs(5);
/// The shortest, so a wake another replica's worker is delivering is not polled for in a tight loop.
const LEAST_IDLE: Duration = Duration::from_millis(200);

/// What a POST of a wake came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// 2xx with `{"done": true}`.
    Done,
    /// Any other 2xx: the receiver calls back.
    Taken,
    /// Not answered, or not 2xx.
    Failed,
}

/// The client webhooks are POSTed with: no redirects (a receiver cannot send the broker elsewhere).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(ANSWER_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
}

/// A stream of a wake as a webhook or a claim tells of it.
pub fn wake_link_json(link: &Link) -> Value {
    json!({
        "path": link.path, "link_type": link.link_type, "acked_offset": offset_of(link.acked),
        "tail_offset": offset_of(link.tail), "has_pending": link.has_pending(),
    })
}

/// The body of `wake`'s webhook, with a callback token made by `keys` at `now`.
pub fn webhook_body(wake: &Wake, keys: &Keys, now: i64) -> Value {
    let subscription = &wake.subscription;
    let streams: Vec<Value> = wake.links.iter().map(wake_link_json).collect();
    json!({
        "subscription_id": subscription.id,
        "wake_id": subscription.wake_id,
        "generation": subscription.generation,
        "streams": streams,
        "callback_url": format!("{}__ds/subscriptions/{}/callback", subscription.base_url, subscription.id),
        "callback_token": keys.token(&subscription.id, subscription.generation, now),
    })
}

async fn post(http: &reqwest::Client, keys: &Keys, wake: &Wake) -> Delivered {
    let Some(url) = wake.subscription.webhook_url.as_deref() else { return Delivered::Failed };
    let now = chrono::Utc::now().timestamp();
    let body = webhook_body(wake, keys, now).to_string();
    let signature = keys.webhook_signature(now, body.as_bytes());
    let sent = http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) if answer.status().is_success() => answer,
        Ok(answer) => {
            tracing::warn!(subscription.id = %wake.subscription.id, status = %answer.status(), "webhook refused");
            return Delivered::Failed;
        }
        Err(error) => {
            tracing::warn!(subscription.id = %wake.subscription.id, %error, "webhook not delivered");
            return Delivered::Failed;
        }
    };
    let done = answer.json::<Value>().await.is_ok_and(|answer| answer["done"] == true);
    if done { Delivered::Done } else { Delivered::Taken }
}

impl DurableStore {
    /// Delivers the next due webhook wake: taken in one transaction, POSTed outside any, its answer
    /// recorded in another (a callback that came first wins). False when none was due.
    pub async fn deliver_next_webhook(&self, http: &reqwest::Client, keys: &Keys) -> StoreResult<bool> {
        let answer_ms = ANSWER_TIMEOUT.as_millis() as i64;
        let taken = in_feed_tx!(&self.pool, Feed::Durable, Retries::claim("subscription"), |tx| async {
            Ok(Attempt::Commit(webhooks::take_webhook(tx, answer_ms).await?))
        })?;
        let wake = match taken {
            None => return Ok(false),
            Some(None) => return Ok(true),
            Some(Some(wake)) => wake,
        };
        let delivered = post(http, keys, &wake).await;
        let (done, held) = (delivered == Delivered::Done, delivered == Delivered::Taken);
        in_feed_tx!(&self.pool, Feed::Durable, Retries::claim("subscription"), |tx| async {
            webhooks::answered(tx, &wake, done, held).await?;
            Ok(Attempt::Commit(()))
        })?;
        Ok(true)
    }
}

/// Runs the worker until it is aborted (with the durable feed's tail, at shutdown).
pub async fn run(subscriptions: Subscriptions) {
    let http = client();
    loop {
        let keys: Option<Arc<Keys>> = subscriptions.keys().await.ok();
        if let Some(keys) = &keys {
            loop {
                match subscriptions.store.deliver_next_webhook(&http, keys).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(error) => {
                        tracing::warn!(%error, "webhook delivery paused");
                        break;
                    }
                }
            }
        }
        let next = webhooks::next_due_in_ms(&subscriptions.store.pool).await.ok().flatten();
        // At least LEAST_IDLE: a wake due now may be another replica's, held while it waits for an answer.
        let idle = next.map_or(MOST_IDLE, |ms| Duration::from_millis(ms as u64).clamp(LEAST_IDLE, MOST_IDLE));
        tokio::select! {
            () = subscriptions.due.notified() => {}
            () = tokio::time::sleep(idle) => {}
        }
    }
}
