//! A LISTEN connection silently dropped while its socket stays open (through a proxy that stops forwarding
//! it): the listener's heartbeat notices within 10 s, the replica replaces the connection, ends
//! the stale session that still holds its liveness lock, and its readers hear new writes again.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{
    Replica, SseReader, fresh_database,
    observe::{LogsOnFailure, until_logged, until_ready_is},
    pg_proxy::PgProxy,
    within,
};

#[tokio::test]
async fn a_listen_connection_silently_dropped_is_noticed_by_the_heartbeat_and_replaced() {
    let url = fresh_database().await;
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let proxy = PgProxy::start(format!("{}:{}", options.get_host(), options.get_port())).await;
    let proxied = url.replacen(&format!("{}:{}", options.get_host(), options.get_port()), &proxy.address, 1);
    let (a, b) = tokio::join!(Replica::start(&proxied), Replica::start(&url));
    let _logs = LogsOnFailure(vec![&a, &b]);
    let client = reqwest::Client::new();
    let mut reader = SseReader::open(&client, &a.url("/stream/heard")).await;
    let write = |n: u64| client.post(b.url("/stream/heard")).body(format!("{}\n", json!({"n": n}))).send();
    assert_eq!(write(0).await.unwrap().status(), 200);
    assert_eq!(within("the first line on A", reader.take_data(1)).await, ["{\"n\":0}"]);

    let dropped = Instant::now();
    proxy.drop_listen_connections();
    let noticed = within("the heartbeat to notice", until_logged(&a, "heartbeat not heard back", dropped)).await;
    println!("a LISTEN connection silently dropped: noticed after {noticed:?}");
    assert!(noticed <= Duration::from_secs(10), "noticed after {noticed:?}");
    // The dropped session still holds the replica's liveness lock on the server: the new connection ends it.
    within("the stale session to be ended", until_logged(&a, "previous LISTEN session was still open", dropped)).await;
    within("A to be ready", until_ready_is(&client, &a, 200, dropped)).await;
    assert_eq!(write(1).await.unwrap().status(), 200);
    assert_eq!(within("the next line on A", reader.take_data(1)).await, ["{\"n\":1}"]);
    let holders: (i64,) = sqlx::query_as(
        "select count(*) from pg_locks l join pg_stat_activity s using (pid)
         where l.locktype = 'advisory' and l.objsubid = 1 and l.granted and s.application_name = $1",
    )
    .bind(format!("ark-broker-listener {}", a.pid()))
    .fetch_one(&sqlx::PgPool::connect(&url).await.unwrap())
    .await
    .unwrap();
    assert_eq!(holders.0, 1, "exactly one session of A holds its liveness lock");
}
