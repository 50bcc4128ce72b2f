//! The PgBouncer fixture (issue 35): a stock PgBouncer in transaction mode, whose two server connections its
//! clients share transaction by transaction.

use std::{collections::HashSet, str::FromStr, time::Duration};

use sqlx::{
    ConnectOptions, Connection, Executor,
    postgres::{PgConnectOptions, PgListener, PgPoolOptions},
};

use crate::support::{fresh_database, pgbouncer::PgBouncer};

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn pgbouncer_shares_two_server_connections_and_carries_no_session() {
    let database_url = fresh_database().await;
    let (bouncer, url) = PgBouncer::start(&database_url).await;

    // PgBouncer 1.18 refuses the startup parameters it does not track, sqlx's default extra_float_digits first.
    let refused = PgConnectOptions::from_str(&url).unwrap().connect().await.expect_err("refused");
    assert!(refused.to_string().contains("unsupported startup parameter: extra_float_digits"), "{refused}");

    // Six clients, in transactions, reach no more than the two server connections.
    let options = PgConnectOptions::from_str(&url).unwrap().extra_float_digits(None);
    let pool = PgPoolOptions::new().max_connections(6).connect_with(options).await.unwrap();
    let client = |_| async {
        let mut backends = Vec::new();
        for _ in 0..5 {
            let mut tx = pool.begin().await.unwrap();
            // Unnamed (not persistent): a named statement would meet another client's of the same name there.
            let pid: i32 =
                sqlx::query_scalar("select pg_backend_pid()").persistent(false).fetch_one(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
            backends.push(pid);
        }
        backends
    };
    let backends: HashSet<i32> = futures::future::join_all((0..6).map(client)).await.into_iter().flatten().collect();
    assert!(backends.len() <= 2, "{backends:?}");
    assert!(bouncer.show("SERVERS").await.len() <= 2);

    // LISTEN through it hears nothing: the server connection it ran on went back to the pool.
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen("pgbouncer_fixture").await.unwrap();
    let mut direct = PgConnectOptions::from_str(&database_url).unwrap().connect().await.unwrap();
    direct.execute("notify pgbouncer_fixture").await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(500), listener.recv()).await.is_err(),
        "heard through PgBouncer"
    );
    direct.close().await.unwrap();
}
