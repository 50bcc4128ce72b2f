//! The benchmark's smoke shapes as a test: three real replicas, the bench's own load generator and checker
//! (`benches/cluster/load.rs`), and assertions on correctness only — never on time.

use std::time::Duration;

use crate::support::{Replica, fresh_database};

#[path = "../../benches/cluster/load.rs"]
#[expect(dead_code, reason = "the bench reads more of the outcome than this test does")]
mod load;

use load::Shape;

#[tokio::test]
async fn the_bench_smoke_shapes_deliver_every_acknowledged_chunk_once_and_in_order() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let replicas = [a.base.clone(), b.base.clone(), c.base.clone()];
    let client = reqwest::Client::new();
    for spread in [false, true] {
        let shape = Shape { streams: 5, readers: 2, rate: 10, spread, duration: Duration::from_secs(2) };
        let outcome = load::run(&client, &replicas, &shape, if spread { "smoke-spread" } else { "smoke-one" }).await;
        let label = shape.label();
        assert!(outcome.errors.is_empty(), "{label}: {:?}", outcome.errors);
        assert!(outcome.check.is_clean(), "{label}: {:?}", outcome.check);
        assert_eq!(outcome.readers, 10, "{label}: every reader opened");
        assert!(outcome.acknowledged > 0, "{label}: the writers wrote");
        assert_eq!(outcome.delivered, outcome.acknowledged * 2, "{label}: each chunk reached both readers once");
    }
}
