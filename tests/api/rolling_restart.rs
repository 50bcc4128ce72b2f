//! A rolling restart under load loses no live output: three replicas behind a balancer, 50 writers streaming
//! queries through it as Ark's Go executor does (one open chunk POST per query, then `/complete`), and each
//! replica restarted in turn while they stream — taken out of rotation first, as Kubernetes does, then
//! SIGTERM, then started again. Ark's executors never retry a chunk, so every writer must see every request
//! succeed, and every line of every stream must be stored once, in order, before `[DONE]`.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::support::{Replica, balancer::Balancer, fresh_database, open_body, within};

const WRITERS: usize = 50;
const RUN: Duration = Duration::from_secs(30);
const LINE_EVERY: Duration = Duration::from_millis(50);

/// One writer: queries of 10 to 40 lines, one after the other, until the run is over. Returns each query's
/// stream and line count.
async fn writer(balancer: Arc<Balancer>, writer: usize, started: Instant) -> Vec<(String, usize)> {
    // A fresh connection per request, as each Go executor query opens its own POST.
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let mut queries = Vec::new();
    let mut seed = writer as u64 * 7919 + 1;
    while started.elapsed() < RUN {
        let stream = format!("w{writer}-q{}", queries.len());
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lines = 10 + (seed >> 33) as usize % 31;
        let (sender, body) = open_body();
        let post = tokio::spawn({
            let request = client.post(balancer.url(&format!("/stream/{stream}"))).body(body);
            async move { request.header("content-type", "application/x-ndjson").send().await }
        });
        for n in 0..lines {
            let line = format!("{}\n", json!({"w": writer, "stream": stream, "n": n}));
            sender.send(Ok(bytes::Bytes::from(line))).await.expect("the POST is still open");
            tokio::time::sleep(LINE_EVERY).await;
        }
        drop(sender);
        let reply = post.await.unwrap().unwrap_or_else(|error| panic!("{stream}: the POST failed: {error}"));
        let status = reply.status();
        let reply: Value = reply.json().await.unwrap();
        assert_eq!(status, 200, "{stream}: {reply}");
        assert_eq!(reply["chunks_stored"], lines, "{stream}: {reply}");
        let completed = client.post(balancer.url(&format!("/stream/{stream}/complete"))).json(&json!({})).send().await;
        let completed = completed.unwrap_or_else(|error| panic!("{stream}: /complete failed: {error}"));
        assert_eq!(completed.status(), 200, "{stream}: /complete");
        queries.push((stream, lines));
    }
    queries
}

#[tokio::test]
async fn restarting_every_replica_in_turn_under_50_writers_loses_and_repeats_no_line() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let balancer = Arc::new(Balancer::start(&[&a.base, &b.base, &c.base]).await);
    let replicas = Arc::new(Mutex::new(vec![a, b, c]));
    let started = Instant::now();
    let writers: Vec<_> = (0..WRITERS).map(|w| tokio::spawn(writer(balancer.clone(), w, started))).collect();

    for turn in 0..3 {
        tokio::time::sleep_until((started + Duration::from_secs(4 + 8 * turn as u64)).into()).await;
        let mut old = replicas.lock().await.remove(0);
        balancer.remove(&old.base).await;
        old.terminate();
        let exited = within("the drained replica to exit", old.wait()).await;
        assert!(exited, "replica exits cleanly after its POSTs finished; log:\n{}", old.log());
        let new = Replica::start(&url).await;
        balancer.add(&new.base);
        replicas.lock().await.push(new);
    }

    let mut queries = Vec::new();
    for writer in writers {
        queries.extend(tokio::time::timeout(RUN * 2, writer).await.expect("the writers finish").unwrap());
    }
    assert!(queries.len() >= WRITERS * 10, "only {} queries ran", queries.len());

    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let stored: Vec<(String, Vec<String>)> =
        sqlx::query_as("select stream_id, array_agg(chunk::text order by position) from chunks group by stream_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    let stored: std::collections::HashMap<String, Vec<String>> = stored.into_iter().collect();
    for (stream, lines) in &queries {
        let rows = stored.get(stream).unwrap_or_else(|| panic!("{stream} has no rows"));
        let (done, lines_stored) = rows.split_last().unwrap();
        assert_eq!(done, "\"[DONE]\"", "{stream} ends with the marker");
        let numbers: Vec<u64> =
            lines_stored.iter().map(|row| serde_json::from_str::<Value>(row).unwrap()["n"].as_u64().unwrap()).collect();
        assert_eq!(numbers, (0..*lines as u64).collect::<Vec<_>>(), "{stream}: every line once, in order");
    }
    assert_eq!(stored.len(), queries.len(), "no stream besides the writers'");
}
