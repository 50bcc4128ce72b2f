//! PostgreSQL's connection slots: a replica opens its whole request pool as it starts; out of slots (`too many
//! clients`, its `max_connections` reached), a request the replica cannot get a connection for is answered 503
//! saying so, the replica's log names `max_connections`, and once slots are free again the same request succeeds.

use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection};

use crate::support::{OwnServer, Replica, fresh_database, json_of, within};

/// Connects as many sessions as the server takes; the first refusal must be "too many clients".
async fn take_every_slot(url: &str, held: &mut Vec<PgConnection>) {
    loop {
        match PgConnection::connect(url).await {
            Ok(connection) => held.push(connection),
            Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("53300") => return,
            Err(error) => panic!("connecting failed otherwise: {error}"),
        }
        assert!(held.len() < 50, "the server took 50 sessions: its max_connections is not the test's");
    }
}

#[tokio::test]
async fn without_a_free_connection_slot_requests_get_a_503_naming_max_connections_and_succeed_once_freed() {
    let settings = vec!["max_connections=8".to_owned(), "superuser_reserved_connections=0".to_owned()];
    let (_server, url) = OwnServer::start_with(settings).await;
    let replica = Replica::start_with(&url, &["--database-pool-max", "2", "--db-ride-through-ms", "0"]).await;
    let client = reqwest::Client::new();
    let messages = replica.url("/messages?conversation_id=c");
    assert_eq!(client.get(&messages).send().await.unwrap().status(), 200);

    // Every slot taken, then the replica's request connections ended: it must open new ones, and cannot.
    let mut held = Vec::new();
    take_every_slot(&url, &mut held).await;
    let ended: i64 = sqlx::query_scalar(
        "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity where application_name = 'ark-broker'",
    )
    .fetch_one(&mut held[0])
    .await
    .unwrap();
    assert!(ended >= 1, "the replica held request connections");
    take_every_slot(&url, &mut held).await;

    // The pool retries a refused connection until its acquire timeout; the answer then says why.
    let refused = within("a 503 that names max_connections", async {
        loop {
            let (status, body) = json_of(client.get(&messages).send().await.unwrap()).await;
            assert_eq!(status, 503, "without a connection the request is refused, not failed: {body}");
            if body["error"]["message"].as_str().is_some_and(|m| m.contains("max_connections")) {
                return body;
            }
        }
    })
    .await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("too many clients"), "{refused}");
    assert!(
        replica.log().lines().any(|line| line.contains("max_connections") && line.contains("ERROR")),
        "the log names max_connections:\n{}",
        replica.log()
    );

    // Slots free again: the same request succeeds.
    for connection in held.drain(..) {
        connection.close().await.unwrap();
    }
    within("the request to succeed once slots are free", async {
        while client.get(&messages).send().await.unwrap().status() != 200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let mut admin = PgConnection::connect(&url).await.unwrap();
    let limit: String = sqlx::query_scalar("show max_connections").fetch_one(&mut admin).await.unwrap();
    assert_eq!(limit, "8", "the server ran with the test's limit");
    admin.execute("select 1").await.unwrap();
}

#[tokio::test]
async fn a_replica_opens_its_whole_request_pool_before_it_serves() {
    let url = fresh_database().await;
    let database = url.rsplit('/').next().unwrap().split('?').next().unwrap().to_owned();
    let _replica = Replica::start_with(&url, &["--database-pool-max", "4"]).await;
    // No request yet: every connection there is was opened by the start.
    let mut admin = PgConnection::connect(&url).await.unwrap();
    let open: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where datname = $1 and application_name = 'ark-broker'",
    )
    .bind(&database)
    .fetch_one(&mut admin)
    .await
    .unwrap();
    assert_eq!(open, 4, "the request pool (4) is open before the first request");
}
