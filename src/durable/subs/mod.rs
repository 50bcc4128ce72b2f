//! Durable Streams' reserved subscription APIs (`/v1/stream/__ds/…`, the suite's "Reserved subscription
//! APIs"): webhook subscriptions, POSTed an Ed25519-signed wake when a stream they follow is appended to, and
//! pull-wake ones, whose wakes are appended to a wake stream for workers to claim. Wakes, leases and keys live
//! in PostgreSQL, so any replica answers a callback, a claim or the JWKS, and one wake is delivered once
//! whichever replica's worker takes it. See docs/durable-streams.md.

pub mod delivery;
pub mod keys;
pub mod model;
mod routes;
pub mod store;
pub mod wakes;
pub mod webhooks;

use std::sync::Arc;

use tokio::sync::{Notify, OnceCell};

pub use routes::router;

use super::DurableStore;
use crate::db::StoreResult;

/// What the subscription APIs and the delivery worker share on a replica.
#[derive(Debug, Clone)]
pub struct Subscriptions {
    /// The durable streams' tables.
    pub store: DurableStore,
    keys: Arc<OnceCell<Arc<keys::Keys>>>,
    /// Rung when a webhook may have fallen due (the durable feed's tail rings it).
    pub due: Arc<Notify>,
}

impl Subscriptions {
    /// The subscriptions of `store`.
    pub fn new(store: DurableStore) -> Self {
        Subscriptions { store, keys: Arc::default(), due: Arc::default() }
    }

    /// The signing keys every replica shares, loaded once (made by the first replica that needs them).
    pub async fn keys(&self) -> StoreResult<Arc<keys::Keys>> {
        let keys = self
            .keys
            .get_or_try_init(|| async {
                let random = ring::rand::SystemRandom::new();
                let mut fresh = [0u8; 64];
                ring::rand::SecureRandom::fill(&random, &mut fresh).expect("the system's random numbers");
                let (seed, hmac_key) = self.store.signing_keys((&fresh[..32], &fresh[32..])).await?;
                Ok::<_, crate::db::StoreError>(Arc::new(
                    keys::Keys::new(&seed, hmac_key).expect("ds_signing_keys holds a 32-byte seed"),
                ))
            })
            .await?;
        Ok(keys.clone())
    }
}
